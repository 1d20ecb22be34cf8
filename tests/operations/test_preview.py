"""`reconcile plan --preview`: what the apply would do to the rows, counted read-only.

The seed story's change (the end date moved, a new view): the preview's counts for
`avg_grade` (keyed by its GROUP BY), its downstream view and the new view are checked
against the same queries computed from scratch on the committed tables. The preview
takes no lock, writes nothing under storage and moves no Delta version; a view whose
change removes every row, and a modified view with no key, are counted too. The
GitHub Action puts the same counts in the sticky comment with `preview: counts`, for
pull requests of the repository only (never a fork's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from reconciler.desired.settings.project import load_project
from reconciler.engine.preview.bound import GRACE_SECONDS
from reconciler.state.reader import open_backend
from tests.cli_helpers import query, reconcile, seeded_grades, versions
from tests.fake_github import FakeGitHub
from tests.github_harness import Workspace, deploy, only_sticky
from tests.projects import (
    SEED_GRADES,
    SEED_STUDENTS,
    apply_seed_modification,
    single_pipeline,
)

AVERAGES = """select student_id, class, avg(grade) as class_avg from grades
where class_date >= date '2025-09-01' and class_date <= date '{end}'
group by student_id, class"""
OLD_AVERAGES = AVERAGES.format(end="2025-12-15")  # avg_grade is not materialized: no query
NEW_AVERAGES = AVERAGES.format(end="2026-06-10")


def previewed(project: Path) -> dict[str, Any]:
    [pipeline] = json.loads(reconcile(project, "plan", "--preview", "--json"))["pipelines"]
    return pipeline["preview"]


def rows(project: Path, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(row.values()) for row in query(project, "grades", sql)]


def multiset_change(before: list[tuple[Any, ...]], after: list[tuple[Any, ...]]
                    ) -> tuple[int, int]:
    """(added, removed) between two small lists of rows, as multisets."""
    remaining = list(before)
    added = 0
    for row in after:
        if row in remaining:
            remaining.remove(row)
        else:
            added += 1
    return added, len(remaining)


def storage_snapshot(project: Path) -> dict[str, float]:
    """Every file under storage and state, with its modification time."""
    found = {}
    for folder in (project / ".reconcile").rglob("*"):
        if folder.is_file():
            found[str(folder)] = os.stat(folder).st_mtime
    return found


def test_seed_story_preview_counts_match_a_computation_from_scratch(
        spark: SparkSession, tmp_path: Path) -> None:
    project = seeded_grades(tmp_path)
    apply_seed_modification(project)
    before_files, before_versions = storage_snapshot(project), versions(project, "grades")
    backend = open_backend(load_project(project))
    with backend.locked("grades", "run"):  # a step running: the preview does not wait
        preview = previewed(project)
    assert storage_snapshot(project) == before_files, "the preview wrote under .reconcile"
    assert versions(project, "grades") == before_versions

    old, new = rows(project, OLD_AVERAGES), rows(project, NEW_AVERAGES)
    added, removed = multiset_change(old, new)
    old_by_key = {row[:2]: row[2] for row in old}
    changed = [key for key, value in {row[:2]: row[2] for row in new}.items()
               if key in old_by_key and old_by_key[key] != value]
    assert changed, "the story's change must move some averages"
    assert preview["views"]["avg_grade"] == {
        "kind": "modified", "rows_before": len(old), "rows_after": len(new),
        "added": added, "removed": removed, "key": ["student_id", "class"],
        "changed": len(changed), "changed_values": {"class_avg": len(changed)}}

    enriched = preview["views"]["avg_grade_enriched"]
    old_enriched = rows(project, "select student_name, class, class_avg "
                                 "from avg_grade_enriched")
    new_enriched = rows(project, f"select name as student_name, class, class_avg from "
                                 f"({NEW_AVERAGES}) a join students on a.student_id = students.id")
    assert enriched["kind"] == "downstream"
    assert (enriched["added"], enriched["removed"]) == multiset_change(old_enriched,
                                                                     new_enriched)
    assert (enriched["rows_before"], enriched["rows_after"]) == (len(old_enriched),
                                                                len(new_enriched))

    everyone = rows(project, f"select student_id, avg(class_avg) from ({NEW_AVERAGES}) a "
                             "group by student_id")
    assert preview["views"]["avg_grade_all_courses"] == {
        "kind": "new", "rows_before": None, "rows_after": len(everyone),
        "added": len(everyone), "removed": 0, "nulls": {"student_id": 0, "avg": 0}}

    text = reconcile(project, "plan", "--preview")
    assert "Data preview (from serial" in text
    assert (f"modified view avg_grade: rows {len(old)} → {len(new)} +{added} -{removed} "
            f"changed {len(changed)}") in text
    markdown = tmp_path / "plan.md"
    reconcile(project, "plan", "--preview", "--markdown", str(markdown))
    assert "<summary>Data preview of <code>grades</code>" in markdown.read_text()
    assert (f"| `avg_grade` | modified | {len(old)} → {len(new)} | +{added} | -{removed} | "
            f"{len(changed)} | class_avg {len(changed)} |") in markdown.read_text()


def test_a_change_that_removes_every_row_and_a_view_without_a_key(
        spark: SparkSession, tmp_path: Path) -> None:
    project = seeded_grades(tmp_path)
    program = project / "pipelines/grades/program.sql"
    program.write_text(program.read_text().replace(
        "class_date <= date '{{ end_date }}'", "class_date <= date '{{ end_date }}' and 1 = 0"))
    preview = previewed(project)
    old = rows(project, OLD_AVERAGES)
    assert preview["views"]["avg_grade"] == {
        "kind": "modified", "rows_before": len(old), "rows_after": 0, "added": 0,
        "removed": len(old), "key": ["student_id", "class"], "changed": 0,
        "changed_values": {"class_avg": 0}}

    averages = sorted(row[2] for row in old)
    low, middle = averages[0] - 1, averages[len(averages) // 2]
    program.write_text(program.read_text().replace(" and 1 = 0", "") +
                       "\ncreate materialized view good as select student_id, class_avg "
                       f"from avg_grade where class_avg > {low};\n")
    reconcile(project, "apply", "--auto-approve")
    program.write_text(program.read_text().replace(f"class_avg > {low}",
                                                   f"class_avg > {middle}"))
    good = previewed(project)["views"]["good"]
    old_good = rows(project, "select student_id, class_avg from good")
    new_good = rows(project, f"select student_id, class_avg from ({OLD_AVERAGES}) a "
                             f"where class_avg > {middle}")
    assert good["kind"] == "modified" and "changed" not in good, good
    assert (good["added"], good["removed"]) == multiset_change(old_good, new_good)
    assert good["removed"] > 0 and good["added"] == 0
    assert (good["rows_before"], good["rows_after"]) == (len(old_good), len(new_good))


@pytest.mark.spark
def test_the_action_posts_the_preview_only_for_pull_requests_of_the_repository(
        workspace: Workspace, github: FakeGitHub) -> None:
    deploy(workspace)
    reconcile(workspace.project, "execute", "-p", "grades", SEED_STUDENTS)
    reconcile(workspace.project, "execute", "-p", "grades", SEED_GRADES)
    apply_seed_modification(workspace.project)
    sha = workspace.commit("move the end date, add a view")
    expected = previewed(workspace.project)["views"]["avg_grade"]

    run = workspace.pull_request("opened", sha, preview="counts")
    assert run.exit_code == 0, run.log
    body = only_sticky(github)["body"]
    assert "<summary>Data preview of <code>grades</code>" in body, body
    assert (f"| `avg_grade` | modified | {expected['rows_before']} → {expected['rows_after']} "
            f"| +{expected['added']} | -{expected['removed']} | {expected['changed']} |") in body
    artifact = json.loads(Path(run.outputs["plan-file"]).read_text())
    assert artifact["pipelines"][0]["preview"]["views"]["avg_grade"] == expected

    github.add_pull(8, sha, head_repo="mallory/pipelines")
    fork = workspace.pull_request("opened", sha, number=8, preview="counts")
    assert fork.exit_code == 0, fork.log
    assert "data preview skipped: the pull request comes from a fork" in fork.log
    fork_body = next(c for c in github.comments_on(8) if "reconcile-plan:" in c["body"])["body"]
    assert "Data preview" not in fork_body
    off = workspace.pull_request("synchronize", sha)
    assert off.exit_code == 0 and "Data preview" not in only_sticky(github)["body"]


def test_rows_show_a_few_samples_with_masked_columns(spark: SparkSession,
                                                     tmp_path: Path) -> None:
    project = seeded_grades(tmp_path)
    settings = project / "reconcile.yaml"
    settings.write_text(settings.read_text() + "preview:\n  samples: 2\n  mask: [CLASS_AVG]\n")
    apply_seed_modification(project)
    [pipeline] = json.loads(reconcile(project, "plan", "--preview", "rows",
                                      "--json"))["pipelines"]
    samples = pipeline["preview"]["views"]["avg_grade"]["samples"]
    new_keys = {row[:2] for row in rows(project, NEW_AVERAGES)}
    assert 1 <= len(samples["changed"]) <= 2 and len(samples["added"]) <= 2
    for pair in samples["changed"]:
        assert pair["before"]["class_avg"] == pair["after"]["class_avg"] == "***"
        assert (int(pair["after"]["student_id"]), pair["after"]["class"]) in new_keys
    assert all(row["class_avg"] == "***" for row in samples["added"] + samples["removed"])
    new_view = pipeline["preview"]["views"]["avg_grade_all_courses"]["samples"]["added"]
    assert len(new_view) == 2 and all(set(row) == {"student_id", "avg"} for row in new_view)

    markdown = tmp_path / "plan.md"
    terminal = reconcile(project, "plan", "--preview", "rows", "--markdown", str(markdown))
    # The terminal shows the same samples under the counts: changed rows before and after.
    lines = terminal.split("sample rows of avg_grade (student_id, class, class_avg):\n")[1]
    lines = lines.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("      ~ "))
    assert lines[first + 1].startswith("      → "), lines
    assert lines[first].endswith("| ***") and lines[first + 1].endswith("| ***")
    assert "sample rows of avg_grade_all_courses (student_id, avg):" in terminal
    text = markdown.read_text()
    assert ("Sample rows of `avg_grade`:\n\n| | student_id | class | class_avg |\n"
            "|---|---|---|---|\n") in text, text
    assert "| before | " in text and "| *** |" in text
    assert "samples" not in json.loads(reconcile(project, "plan", "--preview", "--json")
                                       )["pipelines"][0]["preview"]["views"]["avg_grade"]


DISGUISED = """
create materialized view disguised as
select id as ref, concat('n:', name) as label, id * 2 as doubled from students;
create materialized view relabelled as select label as tag, doubled from disguised;
create materialized view filtered as
select class from grades where student_id in (select id from students where name > '');
"""


def with_settings(project: Path, preview: str) -> None:
    """`preview:` of the project's reconcile.yaml, as YAML text indented under it."""
    settings = project / "reconcile.yaml"
    settings.write_text(settings.read_text() + "preview:\n" + preview)


def sampled(project: Path) -> dict[str, list[dict[str, str]]]:
    """Each new view's sample rows from `plan --preview rows --json`."""
    views = previewed_rows(project)["views"]
    return {view: entry["samples"]["added"] for view, entry in views.items()
            if "samples" in entry}


def previewed_rows(project: Path) -> dict[str, Any]:
    [pipeline] = json.loads(reconcile(project, "plan", "--preview", "rows",
                                      "--json"))["pipelines"]
    return pipeline["preview"]


def test_the_mask_follows_lineage_whatever_the_output_is_called(
        spark: SparkSession, tmp_path: Path) -> None:
    project = seeded_grades(tmp_path)
    names = [str(row["name"]) for row in query(project, "grades", "select name from students")]
    ids = {str(row["id"]) for row in query(project, "grades", "select id from students")}
    assert names and ids
    program = project / "pipelines/grades/program.sql"
    program.write_text(program.read_text() + DISGUISED)
    for mask in ("[name]", "[students.name]", "[STUDENTS.Name]"):
        settings = project / "reconcile.yaml"
        settings.write_text(settings.read_text().split("preview:")[0])
        with_settings(project, f"  samples: 50\n  mask: {mask}\n")
        samples = sampled(project)
        assert samples["disguised"] and samples["relabelled"] and samples["filtered"], samples
        assert all(row["label"] == "***" and row["ref"] in ids for row in samples["disguised"])
        assert {row["doubled"] for row in samples["disguised"]} == {
            str(int(i) * 2) for i in ids}, "a column that reads no masked column is shown"
        assert all(row["tag"] == "***" and row["doubled"] != "***"
                   for row in samples["relabelled"]), "masked through an upstream view"
        assert all(row["class"] == "***" for row in samples["filtered"]), (
            "a subquery reads the masked column: lineage cannot separate, so masked")
        markdown = tmp_path / "plan.md"
        reconcile(project, "plan", "--preview", "rows", "--markdown", str(markdown))
        shown = json.dumps(samples) + markdown.read_text()
        assert not [name for name in names if name in shown], "a masked value reached the plan"

    settings = project / "reconcile.yaml"
    settings.write_text(settings.read_text().split("preview:")[0])
    with_settings(project, "  samples: 50\n  mask: [grades.name]\n")  # another table's column
    assert any(row["label"] != "***" for row in sampled(project)["disguised"])


RUNAWAY = """
create materialized view runaway as
select a.x, b.y from (select explode(sequence(1, 100000000)) as x) a
cross join (select explode(sequence(1, 100000000)) as y) b;
"""


@pytest.mark.spark
def test_a_runaway_view_is_stopped_at_the_time_limit_and_the_plan_stands(
        tmp_path: Path) -> None:
    """In a process of its own (`python -m reconciler`, as a user runs it): Spark cancels
    the runaway's job at once, but a task inside one giant generator row checks for
    cancellation only between rows and would keep the test run's shared JVM busy."""
    project = seeded_grades(tmp_path)
    with_settings(project, "  timeout_seconds: 5\n")
    program = project / "pipelines/grades/program.sql"
    program.write_text(program.read_text() + RUNAWAY)
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-P", "-m", "reconciler", "-C", str(project),
                             "plan", "--preview", "--json"], capture_output=True, text=True,
                            timeout=300, cwd=tmp_path, check=False)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    [pipeline] = json.loads(result.stdout)["pipelines"]
    assert [a["name"] for a in pipeline["actions"] if a["action"] == "create"] == ["runaway"]
    assert pipeline["preview"]["views"]["runaway"] == {
        "kind": "new", "unavailable": "the preview ran out of time (5 s, "
                                      "preview.timeout_seconds in reconcile.yaml)"}
    # A JVM's start (about 20 s here) and the plan, then 5 s of preview: never the hours
    # the cross join of 10^16 rows would take.
    assert elapsed < 5 + GRACE_SECONDS + 90, f"the plan took {elapsed:.0f} s"


def test_a_job_budget_of_one_stops_after_the_first_job(spark: SparkSession,
                                                       tmp_path: Path) -> None:
    project = seeded_grades(tmp_path)
    apply_seed_modification(project)
    honest = previewed(project)["views"]
    with_settings(project, "  max_jobs: 1\n")
    views = previewed(project)["views"]
    assert list(views) == list(honest)
    reason = ("the preview ran out of its job budget (1 Spark jobs, preview.max_jobs in "
              "reconcile.yaml)")
    stopped = [view for view, entry in views.items() if entry.get("unavailable") == reason]
    counted = [view for view, entry in views.items() if "unavailable" not in entry]
    assert stopped and stopped == list(views)[len(counted):], views
    assert all(views[view] == honest[view] for view in counted), "counts are as unbounded"
    assert len(counted) <= 1


@pytest.mark.spark
def test_the_action_posts_the_plan_when_the_preview_runs_out_of_its_budget(
        workspace: Workspace, github: FakeGitHub) -> None:
    """The bound is the trusted branch's: a pull request that raises it in its own
    reconcile.yaml still gets the default branch's."""
    with_settings(workspace.project, "  max_jobs: 1\n")
    workspace.base_sha = workspace.commit("bound the preview")
    deploy(workspace)
    reconcile(workspace.project, "execute", "-p", "grades", SEED_STUDENTS)
    reconcile(workspace.project, "execute", "-p", "grades", SEED_GRADES)
    apply_seed_modification(workspace.project)
    settings = workspace.project / "reconcile.yaml"  # the pull request's own: not trusted
    settings.write_text(settings.read_text().replace("max_jobs: 1", "max_jobs: 100000"))
    sha = workspace.commit("move the end date, add a view, a larger preview budget")
    run = workspace.pull_request("opened", sha, preview="counts")
    assert run.exit_code == 0, run.log
    body = only_sticky(github)["body"]
    assert "<summary>Data preview of <code>grades</code>" in body, body
    assert ("not previewed: the preview ran out of its job budget (1 Spark jobs, "
            "preview.max_jobs in reconcile.yaml)") in body, body
    assert "create" in body and "avg_grade_all_courses" in body, "the plan is posted whole"


def test_a_view_that_keeps_a_tables_primary_key_counts_changed_rows(
        spark: SparkSession, tmp_path: Path) -> None:
    """No GROUP BY, but the view reads one keyed table and outputs its key (renamed): its
    rows are as unique as the table's, so a changed row is counted as changed, not as one
    removed and one added. A view can also declare its key (TBLPROPERTIES ('key' = ...))."""
    project = single_pipeline(tmp_path, """
        CREATE TABLE orders (id BIGINT NOT NULL, amount INT, PRIMARY KEY (id));
        CREATE MATERIALIZED VIEW scaled AS
        SELECT id AS order_id, amount * 2 AS scaled FROM orders WHERE amount > 1;
        CREATE MATERIALIZED VIEW joined TBLPROPERTIES ('key' = 'order_id') AS
        SELECT o.id AS order_id, o.amount * 2 AS scaled FROM orders o JOIN orders p
        ON o.id = p.id WHERE o.amount > 1;
        """)
    reconcile(project, "apply", "--auto-approve")
    reconcile(project, "execute", "-p", "p", "INSERT INTO orders VALUES (1, 1), (2, 2), (3, 3)")
    program = project / "pipelines/p/program.sql"
    program.write_text(program.read_text().replace("amount * 2", "amount * 3"))
    [pipeline] = json.loads(reconcile(project, "plan", "--preview", "--json"))["pipelines"]
    assert pipeline["preview"]["views"]["scaled"] == {
        "kind": "modified", "rows_before": 2, "rows_after": 2, "added": 2, "removed": 2,
        "key": ["order_id"], "changed": 2, "changed_values": {"scaled": 2}}
    # A join could repeat a key: only the view's own declaration gives it one.
    assert pipeline["preview"]["views"]["joined"]["key"] == ["order_id"]
    assert pipeline["preview"]["views"]["joined"]["changed"] == 2
