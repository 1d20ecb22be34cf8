"""Drift (issue 82): a view's table changed by a hand-run DELETE, an input table appended to
outside the reconciler, a pinned data file vacuumed away. Each is shown by `plan` and
`status`, a step refuses to build on it by default, `on_drift` adopts or repairs it, and
`refresh --select` recomputes a view; every view then equals its query. Real Delta tables
written by the CLI on the shared Spark session; the foreign writes are Spark SQL run by
the test, as a notebook would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.cli_helpers import in_storage, manifest, query, reconcile
from tests.projects import GRADES_INPUT, feed_grades, write_files

pytestmark = pytest.mark.spark

PIPELINE = """
    name: p
    bootstrap_policy: allow
    on_drift: {policy}
    connectors:
    """ + GRADES_INPUT + """
    """
PROGRAM = """
    create table grades (student_id bigint, class string, grade int);
    create materialized view avg_grade as
    select student_id, class, avg(grade) as class_avg from grades group by student_id, class;
    """
AVERAGES = "SELECT student_id, class, class_avg FROM avg_grade ORDER BY student_id, class"
RECOMPUTED = """SELECT student_id, class, avg(grade) AS class_avg FROM grades
GROUP BY student_id, class ORDER BY student_id, class"""


def deployed(root: Path, policy: str = "refuse") -> Path:
    """The pipeline applied and stepped once over four grades."""
    project = write_files(root, {"reconcile.yaml": "", "pipelines/p/program.sql": PROGRAM,
                                 "pipelines/p/pipeline.yaml": PIPELINE.format(policy=policy)})
    reconcile(project, "apply", "--auto-approve")
    feed_grades(project, "a.json", [(1, "algebra", 90), (1, "algebra", 70), (2, "physics", 80),
                             (3, "art", 60)])
    assert "step committed" in reconcile(project, "run")
    return project



def set_policy(project: Path, policy: str) -> None:
    (project / "pipelines/p/pipeline.yaml").write_text(PIPELINE.format(policy=policy))


def drift_of(project: Path) -> list[dict[str, object]]:
    status = json.loads(reconcile(project, "status", "-p", "p", "--json"))
    plan = json.loads(reconcile(project, "plan", "--json"))
    assert [{key: entry[key] for key in ("relation", "version", "reason")}
            for entry in plan["drift"]] == status["drift"]
    return status["drift"]


def test_an_engine_only_history_has_no_drift(spark: SparkSession, tmp_path: Path) -> None:
    """Every commit the engine makes is its own: creates, appends, merges, the restore an
    interrupted insert is undone with, compaction."""
    project = deployed(tmp_path)
    reconcile(project, "execute", "-p", "p", "INSERT INTO grades VALUES (4, 'art', 50)")
    reconcile(project, "execute", "-p", "p", "DELETE FROM grades WHERE student_id = 3")
    feed_grades(project, "b.json", [(2, "physics", 90)])
    reconcile(project, "run")
    assert drift_of(project) == []
    assert "drift" not in reconcile(project, "status")


def test_a_hand_delete_on_a_view_is_shown_refused_then_repaired(spark: SparkSession,
                                                                tmp_path: Path) -> None:
    project = deployed(tmp_path)
    view = in_storage(project, "p/views/avg_grade")
    spark.sql(f"DELETE FROM delta.`{view}` WHERE student_id = 2")  # by hand, in a notebook
    pinned = manifest(project, "p")["relations"]["avg_grade"]["version"]
    [drift] = drift_of(project)
    assert drift == {"relation": "avg_grade", "version": pinned + 1, "reason":
                     f"version {pinned + 1} (DELETE) was written outside the reconciler"}
    assert f"drift: avg_grade: version {pinned + 1} (DELETE)" in reconcile(project, "status")
    assert "Drift in p: avg_grade" in reconcile(project, "plan")

    feed_grades(project, "b.json", [(2, "physics", 100)])
    refused = reconcile(project, "run", expect=1)
    assert refused.strip() == (
        f"error: pipeline 'p': view avg_grade: version {pinned + 1} (DELETE) was written "
        "outside the reconciler; nothing was built on it. Set on_drift: adopt (a table's "
        "rows become input) or repair (restore the pinned version) in pipeline.yaml, or "
        "recompute a view with `reconcile refresh -p p --select avg_grade`"), refused
    serial = manifest(project, "p")["serial"]

    set_policy(project, "repair")
    assert "step committed" in reconcile(project, "run")
    assert manifest(project, "p")["serial"] == serial + 2  # the repair, then the step
    assert query(project, "p", AVERAGES) == query(project, "p", RECOMPUTED)
    assert {r["student_id"] for r in query(project, "p", AVERAGES)} == {1, 2, 3}
    assert drift_of(project) == []


def test_an_append_to_an_input_table_is_adopted_as_input(spark: SparkSession,
                                                         tmp_path: Path) -> None:
    project = deployed(tmp_path)
    table = in_storage(project, "p/tables/grades")
    spark.sql(f"INSERT INTO delta.`{table}` VALUES (5, 'algebra', 40)")  # from a notebook
    [drift] = drift_of(project)
    assert drift["relation"] == "grades" and "(WRITE)" in str(drift["reason"])
    assert reconcile(project, "run", expect=1).startswith(
        f"error: pipeline 'p': table grades: version {drift['version']} (WRITE) was written "
        "outside the reconciler; nothing was built on it")
    set_policy(project, "adopt")
    assert "step committed" in reconcile(project, "run")  # no new file: the rows are input
    averages = query(project, "p", AVERAGES)
    assert averages == query(project, "p", RECOMPUTED)
    assert {r["student_id"] for r in averages} == {1, 2, 3, 5}
    assert drift_of(project) == []
    assert "no new input" in reconcile(project, "run")


def test_a_vacuumed_pinned_file_is_shown_and_a_refresh_recomputes_the_view(
        spark: SparkSession, tmp_path: Path) -> None:
    project = deployed(tmp_path)
    view = Path(in_storage(project, "p/views/avg_grade"))
    pinned = manifest(project, "p")["relations"]["avg_grade"]["version"]
    files = spark.sql(f"SELECT input_file_name() AS f FROM delta.`{view}` VERSION AS OF "
                      f"{pinned}").distinct().collect()  # small: the view's few files
    for row in files:
        Path(row["f"].removeprefix("file:")).unlink()
    [drift] = drift_of(project)
    assert drift["relation"] == "avg_grade" and drift["version"] is None
    assert f"data file(s) of the pinned version {pinned} are gone" in str(drift["reason"])
    reconcile(project, "refresh", "-p", "p", "--select", "avg_grade", "--auto-approve")
    assert query(project, "p", AVERAGES) == query(project, "p", RECOMPUTED)
    assert drift_of(project) == []
