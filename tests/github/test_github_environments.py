"""A pull request's environment through `reconcile github` (issue 81), against the fake GitHub
REST server and moto's S3 state: the trusted branch enables environments; a pull request
modifies one view and adds one; its plan builds `pr_7` and the comment says where it is,
what it holds and at which production serial, production's manifest untouched; a push
updates it; `/reconcile apply` promotes it, and after a step the promoted view equals its
query from scratch; a fork's pull request gets none; closing the pull request removes it.

The shared Spark session's catalog is in memory, so the database itself is
`tests/engine/test_environment_catalog.py`'s (a Derby metastore, each reader a process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli.main import cli
from tests.cli_helpers import query
from tests.fake_github import FakeGitHub
from tests.github_harness import PR, Workspace, approve, only_sticky
from tests.projects import SEED_GRADES, SEED_STUDENTS, apply_seed_modification

pytestmark = pytest.mark.spark

ALL_COURSES = """
    SELECT student_id, max(class_avg) AS avg FROM (
      SELECT student_id, class, avg(grade) AS class_avg FROM grades
      WHERE class_date >= DATE '2025-09-01' AND class_date <= DATE '2026-06-10'
      GROUP BY student_id, class)
    GROUP BY student_id ORDER BY student_id"""
"""`avg_grade_all_courses` as the pull request defines it, from scratch over `grades`."""


def cli_in(workspace: Workspace, *args: str) -> str:
    result = CliRunner().invoke(cli, ["-C", str(workspace.project), *args],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def environments(workspace: Workspace) -> dict[str, Any]:
    return {row["name"]: row for row in json.loads(cli_in(
        workspace, "env", "list", "-p", "grades", "--json"))["environments"]}


def enable_environments(workspace: Workspace) -> None:
    """The trusted branch's reconcile.yaml turns environments on."""
    settings_file = workspace.project / "reconcile.yaml"
    settings = yaml.safe_load(settings_file.read_text())
    settings["environments"] = {"database_prefix": "review", "storage": "environments"}
    settings_file.write_text(yaml.safe_dump(settings))
    workspace.base_sha = workspace.commit("environments on")


def test_a_pull_request_gets_an_environment_until_it_closes(
        workspace: Workspace, github: FakeGitHub, spark: Any) -> None:
    enable_environments(workspace)
    cli_in(workspace, "apply", "--auto-approve")
    cli_in(workspace, "execute", "-p", "grades", SEED_STUDENTS)
    cli_in(workspace, "execute", "-p", "grades", SEED_GRADES)
    production = workspace.manifest()
    assert production is not None

    apply_seed_modification(workspace.project)  # one view modified, one added
    workspace.commit("end date moved, a new view")
    run = workspace.pull_request("opened")
    assert run.exit_code == 0, run.log
    body = only_sticky(github)["body"]
    assert "### Environment `pr_7`" in body and "`review_pr_7`" in body, body
    assert f"at production serial {production['serial']}" in body
    held = environments(workspace)["pr_7"]
    assert held["relations"] == ["avg_grade", "avg_grade_all_courses",
                                 "avg_grade_enriched"], held
    assert held["base_serial"] == production["serial"]
    assert workspace.manifest() == production  # nothing of production written

    fork = github.add_pull(8, workspace.head, head_repo="mallory/pipelines",
                           base_sha=workspace.base_sha)
    run = workspace.run("pull_request", {
        "action": "opened", "number": 8,
        "pull_request": {"number": 8, "head": fork["head"], "base": fork["base"]},
        "repository": {"full_name": "octo/pipelines", "default_branch": "main"}})
    assert run.exit_code == 0, run.log
    assert "comes from a fork" in github.sticky(8)[0]["body"]
    assert set(environments(workspace)) == {"pr_7"}

    sql = workspace.project / "pipelines/grades/program.sql"  # a push: one view again
    sql.write_text(sql.read_text().replace("avg(class_avg) as avg", "max(class_avg) as avg"))
    workspace.commit("all courses: the best")
    run = workspace.pull_request("synchronize")
    assert run.exit_code == 0, run.log
    body = only_sticky(github)["body"]
    assert "this push computed `avg_grade_all_courses`)" in body, body
    assert environments(workspace)["pr_7"]["base_serial"] == production["serial"]

    # A writer applies the plan shown: the environment's views are promoted, not recomputed.
    run, _ = approve(workspace, "alice")
    assert run.exit_code == 0, run.log
    reply = github.comments_on(PR)[-1]["body"]
    assert "promoted from its environment `avg_grade`, `avg_grade_all_courses`, " \
           "`avg_grade_enriched`" in reply and "recomputed" not in reply, reply
    cli_in(workspace, "execute", "-p", "grades",  # a step after it: maintained from there
           "INSERT INTO grades VALUES (1, 'algebra', 10, '2026-01-05'), "
           "(3, 'art', 70, '2025-10-01')")
    assert query(workspace.project, "grades", "SELECT * FROM avg_grade_all_courses ORDER BY "
                 "student_id") == query(workspace.project, "grades", ALL_COURSES)
    assert environments(workspace)["pr_7"]["base_serial"] == production["serial"]

    run = workspace.pull_request("closed")
    assert run.exit_code == 0 and run.outputs["result"] == "environments-removed", run.log
    assert environments(workspace) == {}
    assert not (workspace.project / "environments" / "pr_7").exists()
    assert workspace.pull_request("closed", number=PR).outputs["result"] == "ignored"


def test_environments_stay_off_unless_the_trusted_branch_turns_them_on(
        workspace: Workspace, github: FakeGitHub, spark: Any, tmp_path: Path) -> None:
    cli_in(workspace, "apply", "--auto-approve")
    settings_file = workspace.project / "reconcile.yaml"  # only the pull request's file
    settings = yaml.safe_load(settings_file.read_text())
    settings["environments"] = {"database_prefix": "review", "storage": "environments"}
    settings_file.write_text(yaml.safe_dump(settings))
    apply_seed_modification(workspace.project)
    workspace.commit("a change that turns environments on for itself")
    run = workspace.pull_request("opened")
    assert run.exit_code == 0, run.log
    assert "Environment" not in only_sticky(github)["body"]
    assert not (workspace.project / "environments").exists()
