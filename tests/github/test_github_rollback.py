"""`/reconcile rollback` through `reconcile github` (issue 82), against the fake GitHub REST
server and moto's S3: a view changed by an approved pull request, stepped, then rolled back
by a writer to the serial before the change. Its plan comes first; the comment naming that
plan's id applies it; the views then equal the old program over the same rows, and no input
is read again. A reader cannot, and the command's words are checked."""

from __future__ import annotations

import re
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli.main import cli
from reconciler.github.event import Refused, parse_rollback, rollback_command
from tests.e2e.test_seed_story import enriched
from tests.fake_github import FakeGitHub
from tests.github_harness import PR, Workspace, approve, deploy
from tests.projects import SEED_GRADES, SEED_STUDENTS, apply_seed_modification

OLD = [("Alice", "algebra", 97), ("Alice", "physics", 89), ("Bob", "algebra", 85),
       ("Bob", "physics", 93)]


def cli_in(workspace: Workspace, *args: str) -> str:
    result = CliRunner().invoke(cli, ["-C", str(workspace.project), *args],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_a_writer_rolls_a_change_back_by_its_plan(workspace: Workspace, github: FakeGitHub,
                                                  spark: Any) -> None:
    deploy(workspace)
    cli_in(workspace, "execute", "-p", "grades", SEED_STUDENTS)
    cli_in(workspace, "execute", "-p", "grades", SEED_GRADES)
    before = workspace.manifest()
    assert before is not None and enriched(workspace.project) == OLD
    apply_seed_modification(workspace.project)
    workspace.commit("move the end date, add a view")
    assert workspace.pull_request("opened").exit_code == 0
    applied, _ = approve(workspace, "alice", "grades")
    assert applied.outputs["result"] == "applied", applied.log
    assert enriched(workspace.project) != OLD
    changed = workspace.manifest()
    assert changed is not None

    reader, _ = workspace.comment("rita", f"/reconcile rollback {before['serial']}")
    assert reader.exit_code == 1 and reader.outputs["result"] == "refused"

    planned, _ = workspace.comment("bob", f"/reconcile rollback {before['serial']}")
    assert planned.exit_code == 0, planned.log
    assert planned.outputs["result"] == "planned"
    reply = github.replies(PR)[-1]["body"]
    assert f"Rollback plan: `grades` to serial {before['serial']}" in reply
    assert "avg_grade_all_courses" in reply  # the view the rollback removes
    command = re.search(r"comment `(/reconcile rollback \d+ [0-9a-f]{12} grades)`", reply)
    assert command, reply
    assert workspace.manifest() == changed  # a plan only

    rolled, _ = workspace.comment("bob", command.group(1))
    assert rolled.exit_code == 0, rolled.log
    assert rolled.outputs["result"] == "rolled-back"
    assert "Rolled back" in github.replies(PR)[-1]["body"]
    after = workspace.manifest()
    assert after is not None and after["status"] == "Running"
    assert "avg_grade_all_courses" not in after["program"]["views"]
    assert after["relations"]["grades"]["version"] == changed["relations"]["grades"]["version"]
    assert enriched(workspace.project) == OLD  # the old program over the same rows

    again, _ = workspace.comment("bob", command.group(1))  # that plan is spent
    assert again.outputs["result"] == "refused"
    assert "the rollback plan changed" in again.outputs["failure-reason"]


@pytest.mark.parametrize(("body", "expected"), [
    ("/reconcile rollback 3", (3, None, None)),
    ("/reconcile rollback 3 0123456789ab", (3, "0123456789ab", None)),
    ("/Reconcile  ROLLBACK 12 0123456789AB grades\nwhy", (12, "0123456789ab", "grades")),
    ("/reconcile rollback 3 grades", (3, None, "grades")),
])
def test_parse_rollback_accepts(body: str, expected: tuple[Any, ...]) -> None:
    request = parse_rollback(body, "/reconcile apply")
    assert request is not None
    assert (request.serial, request.plan_id, request.pipeline) == expected


@pytest.mark.parametrize("body", ["/reconcile rollback", "/reconcile rollback x",
                                  "/reconcile rollback 0", "/reconcile rollback 3 a b",
                                  "/reconcile rollback 3 $(touch PWNED)"])
def test_parse_rollback_refuses(body: str) -> None:
    with pytest.raises(Refused, match="nothing was rolled back"):
        parse_rollback(body, "/reconcile apply")


def test_the_rollback_command_follows_the_apply_command() -> None:
    assert rollback_command("/reconcile apply") == "/reconcile rollback"
    assert rollback_command("/deploy") == "/deploy rollback"
    assert parse_rollback("/reconcile apply 0123456789ab", "/reconcile apply") is None
