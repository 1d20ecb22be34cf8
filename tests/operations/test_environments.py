"""Pull-request environments (issue 81), from a laptop: `reconcile env create|update|destroy|
list` on real Delta tables through the CLI, on the shared Spark session (its catalog is in
memory: what the catalog database holds is `tests/engine/test_environment_catalog.py`'s).

A change modifies one view and adds one; the environment computes those two from
production's state at its serial, writes nothing of production, stays readable while
production steps and retention runs, updates only what a push changed, and leaves no file
behind when destroyed. Each environment's view equals a from-scratch deployment of the
pull request's program over the same input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.cli_helpers import manifest, reconcile
from tests.projects import GRADES_INPUT, feed_grades, write_files

pytestmark = pytest.mark.spark

SETTINGS = """
retention: {serials: 1, min_age: 0s}
environments: {database_prefix: review, storage: environments}
"""
PIPELINE = "name: p\nbootstrap_policy: allow\nconnectors:\n" + GRADES_INPUT
OLD = """
create table grades (student_id bigint, class string, grade int);
create materialized view best as
select student_id, max(grade) as top from grades group by student_id;
create materialized view counts as select class, count(*) as n from grades group by class;
"""
NEW = OLD.replace("max(grade) as top", "min(grade) as top") + """
create materialized view class_top as select class, max(grade) as top from grades group by class;
"""
PUSHED = NEW.replace("max(grade) as top from grades group by class",
                     "max(grade) + 1 as top from grades group by class")
FIRST = [(1, "algebra", 90), (1, "art", 70), (2, "algebra", 60)]
LATER = [(2, "art", 95), (3, "algebra", 50)]


def project_with(root: Path, program: str, settings: str = SETTINGS) -> Path:
    return write_files(root, {"reconcile.yaml": settings, "pipelines/p/program.sql": program,
                              "pipelines/p/pipeline.yaml": PIPELINE})


def environments(project: Path) -> dict[str, dict[str, Any]]:
    listed = json.loads(reconcile(project, "env", "list", "-p", "p", "--json"))
    return {row["name"]: row for row in listed["environments"]}


def record(project: Path, name: str) -> dict[str, Any]:
    """The environment's record as the state backend holds it."""
    document = json.loads((project / ".reconcile/state/p/environments.json").read_text())
    return dict(document[name])


def rows_of(spark: SparkSession, path: str, version: int) -> list[tuple[Any, ...]]:
    frame = spark.read.format("delta").option("versionAsOf", version).load(path)
    return sorted(tuple(row) for row in frame.collect())  # a test view's few rows


def delta_versions(spark: SparkSession, project: Path) -> dict[str, int]:
    """The latest Delta version of each production relation's table."""
    return {name: spark.sql(f"DESCRIBE HISTORY delta.`{project}/.reconcile/data/{entry['path']}`"
                            ).agg({"version": "max"}).first()[0]  # type: ignore[index]
            for name, entry in manifest(project, "p")["relations"].items()}


def from_scratch(spark: SparkSession, root: Path, program: str, view: str,
                 rows: list[tuple[int, str, int]]) -> list[tuple[Any, ...]]:
    """`view` of `program` deployed afresh over `rows`: the oracle."""
    fresh = project_with(root, program, "")
    reconcile(fresh, "apply", "--auto-approve")
    feed_grades(fresh, "a.json", rows)
    reconcile(fresh, "run")
    entry = manifest(fresh, "p")["relations"][view]
    return rows_of(spark, f"{fresh}/.reconcile/data/{entry['path']}", entry["version"])


def deployed_with_first_rows(tmp_path: Path) -> Path:
    """The pipeline of OLD deployed, FIRST's rows ingested by a step."""
    project = project_with(tmp_path / "project", OLD)
    reconcile(project, "apply", "--auto-approve")
    feed_grades(project, "a.json", FIRST)
    reconcile(project, "run")
    return project


def test_an_environment_holds_the_change_computed_from_production_and_touches_nothing_of_it(
        spark: SparkSession, tmp_path: Path) -> None:
    project = deployed_with_first_rows(tmp_path)
    before, before_versions = manifest(project, "p"), delta_versions(spark, project)

    (project / "pipelines/p/program.sql").write_text(NEW)
    created = reconcile(project, "env", "create", "-p", "p", "--name", "pr_7")
    assert "review_pr_7" in created and "computed best, class_top" in created, created
    assert manifest(project, "p") == before  # production's manifest, not a byte changed
    assert delta_versions(spark, project) == before_versions  # nor a Delta version
    held = record(project, "pr_7")
    assert sorted(held["relations"]) == ["best", "class_top"]
    assert held["base_serial"] == before["serial"]
    assert all(entry["path"].startswith(f"{project}/environments/pr_7/p/")
               for entry in held["relations"].values())
    for view in ("best", "class_top"):
        entry = held["relations"][view]
        assert rows_of(spark, entry["path"], entry["version"]) == from_scratch(
            spark, tmp_path / f"fresh_{view}", NEW, view, FIRST), view

    # Production goes on, retention with it: the environment's serial stays readable.
    for number, rows in enumerate((LATER, [(4, "art", 10)], [(5, "art", 20)])):
        feed_grades(project, f"later{number}.json", rows)
        reconcile(project, "run")
    reconcile(project, "state", "gc", "-p", "p")
    counts = before["relations"]["counts"]  # read in place by the environment
    assert rows_of(spark, f"{project}/.reconcile/data/{counts['path']}",
                   counts["version"]) == [("algebra", 2), ("art", 1)]

    # A push: only the view whose definition changed since the last build is computed.
    (project / "pipelines/p/program.sql").write_text(PUSHED)
    updated = reconcile(project, "env", "update", "-p", "p", "--name", "pr_7")
    assert "computed class_top" in updated and "best" not in updated.split("computed")[1]
    again = record(project, "pr_7")
    assert again["relations"]["best"] == held["relations"]["best"]
    assert again["base_serial"] == held["base_serial"]
    entry = again["relations"]["class_top"]
    assert rows_of(spark, entry["path"], entry["version"]) == from_scratch(
        spark, tmp_path / "fresh_pushed", PUSHED, "class_top", FIRST)

    listed = environments(project)["pr_7"]
    assert listed["database"] == "review_pr_7" and listed["bytes"] > 0
    assert "pr_7: review_pr_7, production serial" in reconcile(project, "env", "list")
    [shown] = json.loads(reconcile(project, "status", "-p", "p", "--json"))["environments"]
    assert (shown["name"], shown["database"], shown["base_serial"]) == (
        "pr_7", "review_pr_7", held["base_serial"])
    assert set(shown["holds"]) == set(held["relations"])
    assert f"environment pr_7: database review_pr_7, reads serial {held['base_serial']}" in \
        reconcile(project, "status", "-p", "p")

    assert "destroyed" in reconcile(project, "env", "destroy", "-p", "p", "--name", "pr_7")
    assert not (project / "environments/pr_7").exists()
    assert environments(project) == {}
    assert "nothing to do" in reconcile(project, "env", "destroy", "-p", "p", "--name", "pr_7")
    assert manifest(project, "p")["serial"] == before["serial"] + 3  # the three steps alone


@pytest.mark.parametrize(("settings", "program", "message"), [
    ("", NEW, "environments are not enabled"),
    ("environments: {database_prefix: review, storage: .reconcile/data/envs}", NEW,
     "must be a folder of its own"),
    (SETTINGS, OLD.replace("grade int", "grade int, note string"), "modifies table 'grades'"),
])
def test_an_environment_is_refused_before_anything_is_written(
        spark: SparkSession, tmp_path: Path, settings: str, program: str,
        message: str) -> None:
    project = project_with(tmp_path / "project", OLD, settings)
    reconcile(project, "apply", "--auto-approve")
    before = manifest(project, "p")
    (project / "pipelines/p/program.sql").write_text(program)
    refused = reconcile(project, "env", "create", "-p", "p", "--name", "pr_1", expect=1)
    assert message in refused and len(refused.strip().splitlines()) == 1, refused
    assert manifest(project, "p") == before
    assert not (project / "environments").exists()
    assert not (project / ".reconcile/state/p/environments.json").exists()


def test_an_environment_name_and_a_pipeline_that_is_not_deployed(
        spark: SparkSession, tmp_path: Path) -> None:
    project = project_with(tmp_path / "project", OLD)
    assert "not deployed" in reconcile(project, "env", "create", "-p", "p", "--name", "pr_1",
                                       expect=1)
    reconcile(project, "apply", "--auto-approve")
    for name in ("../x", "PR_1", "pr 1", "a" * 64):
        assert "is not a name" in reconcile(project, "env", "create", "-p", "p", "--name",
                                            name, expect=1)
    assert "no environment 'pr_2'" in reconcile(project, "env", "update", "-p", "p", "--name",
                                                "pr_2", expect=1)
    reconcile(project, "env", "create", "-p", "p", "--name", "pr_2")
    assert "already" in reconcile(project, "env", "create", "-p", "p", "--name", "pr_2",
                                  expect=1)
    refused = reconcile(project, "destroy", "-p", "p", "--auto-approve", expect=1)
    assert "has pull-request environments (pr_2): destroy them first" in refused, refused

    # A state-bucket writer points the record at production's storage: nothing is deleted.
    records = project / ".reconcile/state/p/environments.json"
    forged = json.loads(records.read_text())
    forged["pr_2"]["root"] = str(project / ".reconcile/data")
    forged["pr_2"]["relations"] = {}
    records.write_text(json.dumps(forged))
    refused = reconcile(project, "env", "destroy", "-p", "p", "--name", "pr_2", expect=1)
    assert "the settings do not give it" in refused, refused
    assert (project / ".reconcile/data/p/tables/grades/_delta_log").is_dir()


def test_an_apply_promotes_a_current_environment_and_equals_a_deployment_from_scratch(
        spark: SparkSession, tmp_path: Path) -> None:
    project = deployed_with_first_rows(tmp_path)
    (project / "pipelines/p/program.sql").write_text(NEW)
    reconcile(project, "env", "create", "-p", "p", "--name", "pr_7")
    # Production steps on: inserts, then a delete (a retraction the catch-up must carry).
    feed_grades(project, "b.json", LATER)
    reconcile(project, "run")
    reconcile(project, "execute", "-p", "p", "DELETE FROM grades WHERE student_id = 1 AND "
              "class = 'algebra'")

    applied = reconcile(project, "apply", "--auto-approve")
    assert "recomputed nothing; promoted best, class_top from environment pr_7" in applied, \
        applied
    rows = [row for row in FIRST + LATER if row[:2] != (1, "algebra")]
    for view in ("best", "class_top", "counts"):
        entry = manifest(project, "p")["relations"][view]
        assert rows_of(spark, f"{project}/.reconcile/data/{entry['path']}",
                       entry["version"]) == from_scratch(
            spark, tmp_path / f"fresh_{view}", NEW, view, rows), view
    # A step after the promotion maintains the promoted views from their adopted state.
    feed_grades(project, "c.json", [(1, "algebra", 40), (6, "music", 77)])
    reconcile(project, "run")
    rows += [(1, "algebra", 40), (6, "music", 77)]
    for view in ("best", "class_top"):
        entry = manifest(project, "p")["relations"][view]
        assert rows_of(spark, f"{project}/.reconcile/data/{entry['path']}",
                       entry["version"]) == from_scratch(
            spark, tmp_path / f"after_{view}", NEW, view, rows), view


def test_an_environment_of_another_program_is_not_promoted(spark: SparkSession,
                                                           tmp_path: Path) -> None:
    project = project_with(tmp_path / "project", OLD)
    reconcile(project, "apply", "--auto-approve")
    (project / "pipelines/p/program.sql").write_text(PUSHED)
    reconcile(project, "env", "create", "-p", "p", "--name", "pr_7")
    (project / "pipelines/p/program.sql").write_text(NEW)  # not what the environment holds
    applied = reconcile(project, "apply", "--auto-approve")
    assert "recomputed best, class_top" in applied and "promoted" not in applied, applied
