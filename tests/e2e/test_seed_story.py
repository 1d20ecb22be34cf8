"""Feldera's bootstrapping example, end to end on Spark + Delta through the CLI."""

from __future__ import annotations

import json
import os
from decimal import Decimal
from pathlib import Path

from pyspark.sql import SparkSession

from tests.cli_helpers import manifest, query, reconcile, versions
from tests.projects import SEED_GRADES, SEED_STUDENTS, apply_seed_modification, copy_example

STUDENTS = SEED_STUDENTS
GRADES = SEED_GRADES
ENRICHED = "SELECT * FROM avg_grade_enriched ORDER BY student_name, class"


def enriched(project: Path) -> list[tuple[str, str, Decimal]]:
    return [(r["student_name"], r["class"], r["class_avg"])
            for r in query(project, "grades", ENRICHED)]


def test_seed_story(spark: SparkSession, tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    assert "deployed" in reconcile(project, "apply", "--auto-approve")
    reconcile(project, "execute", "-p", "grades", STUDENTS)
    reconcile(project, "execute", "-p", "grades", GRADES)
    assert enriched(project) == [("Alice", "algebra", 97), ("Alice", "physics", 89),
                                 ("Bob", "algebra", 85), ("Bob", "physics", 93)]
    before = versions(project, "grades")

    apply_seed_modification(project)
    reconcile(project, "apply", expect=3)  # not a terminal: await_approval records it
    status = json.loads(reconcile(project, "status", "-p", "grades", "--json"))
    assert status["status"] == "AwaitingApproval"
    chosen = os.environ["RECONCILE_DELTA_WRITER"]  # the test run's (conftest), or `auto`
    assert status["delta_writer"] == ("delta-spark" if chosen == "auto" else chosen)
    # What the approver reads: each object's action, and why (issue 82).
    actions = {action["name"]: action for action in status["status_details"].pop("actions")}
    assert {name: action["action"] for name, action in actions.items()} == {
        "avg_grade": "recompute", "avg_grade_all_courses": "create",
        "avg_grade_enriched": "recompute"}
    assert all(action["reasons"] for action in actions.values())
    shown = reconcile(project, "status", "-p", "grades")
    assert f"  view avg_grade: recompute ({'; '.join(actions['avg_grade']['reasons'])})" in shown
    assert status["status_details"] == {
        "added_input_connectors": [], "added_output_connectors": [],
        "modified_input_connectors": [], "modified_output_connectors": [],
        "program_diff": {"added_tables": [], "added_views": ["avg_grade_all_courses"],
                         "modified_tables": [], "modified_views": ["avg_grade",
                                                                   "avg_grade_enriched"],
                         "removed_tables": [], "removed_views": []},
        "program_diff_error": None,
        "removed_input_connectors": [], "removed_output_connectors": []}
    assert enriched(project) == [("Alice", "algebra", 97), ("Alice", "physics", 89),
                                 ("Bob", "algebra", 85), ("Bob", "physics", 93)]

    assert "recomputed avg_grade, avg_grade_all_courses, avg_grade_enriched" in reconcile(
        project, "approve")
    assert enriched(project) == [("Alice", "algebra", 96), ("Alice", "physics", 88),
                                 ("Bob", "algebra", Decimal("91.5")), ("Bob", "physics", 92)]
    overall = query(project, "grades", "SELECT * FROM avg_grade_all_courses ORDER BY student_id")
    assert [(r["student_id"], r["avg"]) for r in overall] == [(1, 92), (2, Decimal("91.75"))]
    plain = query(project, "grades", "SELECT class, class_avg FROM avg_grade "
                                     "WHERE student_id = 2 ORDER BY class")  # a plain view
    assert [(r["class"], r["class_avg"]) for r in plain] == [("algebra", Decimal("91.5")),
                                                             ("physics", 92)]

    after = versions(project, "grades")
    assert {t: after[t] for t in ("students", "grades")} == \
        {t: before[t] for t in ("students", "grades")}, "input tables were rewritten"
    committed = manifest(project, "grades")
    assert committed["status"] == "Running" and committed["pending"] is None
    assert "no changes" in reconcile(project, "apply", "--auto-approve")


def test_reverting_a_change_awaiting_approval_returns_to_running(spark: SparkSession,
                                                                 tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    reconcile(project, "apply", "--auto-approve")
    original = (project / "pipelines/grades/program.sql").read_text()
    spec = (project / "pipelines/grades/pipeline.yaml").read_text()
    apply_seed_modification(project)
    reconcile(project, "apply", expect=3)
    assert manifest(project, "grades")["status"] == "AwaitingApproval"
    (project / "pipelines/grades/program.sql").write_text(original)
    (project / "pipelines/grades/pipeline.yaml").write_text(spec)
    assert "no changes" in reconcile(project, "apply")
    committed = manifest(project, "grades")
    assert (committed["status"], committed["pending"]) == ("Running", None)
    reconcile(project, "approve", "-p", "grades", expect=1)
