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
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from reconciler.desired.project import load_project
from reconciler.state import open_backend
from tests.cli_helpers import query, reconcile, versions
from tests.fake_github import FakeGitHub
from tests.github_harness import Workspace, deploy, only_sticky
from tests.projects import SEED_GRADES, SEED_STUDENTS, apply_seed_modification, copy_example

AVERAGES = """select student_id, class, avg(grade) as class_avg from grades
where class_date >= date '2025-09-01' and class_date <= date '{end}'
group by student_id, class"""
OLD_AVERAGES = AVERAGES.format(end="2025-12-15")  # avg_grade is not materialized: no query
NEW_AVERAGES = AVERAGES.format(end="2026-06-10")


def seeded(tmp_path: Path) -> Path:
    project = copy_example("grades", tmp_path)
    reconcile(project, "apply", "--auto-approve")
    reconcile(project, "execute", "-p", "grades", SEED_STUDENTS)
    reconcile(project, "execute", "-p", "grades", SEED_GRADES)
    return project


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
    project = seeded(tmp_path)
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
    project = seeded(tmp_path)
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
    project = seeded(tmp_path)
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
    reconcile(project, "plan", "--preview", "rows", "--markdown", str(markdown))
    text = markdown.read_text()
    assert ("Sample rows of `avg_grade`:\n\n| | student_id | class | class_avg |\n"
            "|---|---|---|---|\n") in text, text
    assert "| before | " in text and "| *** |" in text
    assert "samples" not in json.loads(reconcile(project, "plan", "--preview", "--json")
                                       )["pipelines"][0]["preview"]["views"]["avg_grade"]
