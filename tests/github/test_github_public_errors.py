"""What a failure shows on a pull request: the relation, the rule and the counts, never a
row's values (issue 51, finding 3).

Through `reconcile github` with the fake GitHub REST server, moto's S3 and local Spark:
an apply whose bootstrap trips a FAIL UPDATE expectation, on a row that holds a canary.
"""

from __future__ import annotations

import json
from typing import Any

from tests.cli_helpers import reconcile
from tests.fake_github import FakeGitHub
from tests.github_harness import PR, Workspace, approve, deploy, only_sticky

CANARY = "canary-9b7c-row-value"
STRICT_VIEW = ("\ncreate materialized view strict (constraint short_name expect "
               "(length(name) < 10) on violation fail update) as select name, id "
               "from students;\n")
PUBLIC = ("view 'strict': expectation 'short_name' (ON VIOLATION FAIL UPDATE) failed on 1 of "
          "1 new row(s); the step stopped and nothing was committed")


def test_an_expectation_failure_on_the_apply_shows_no_row_values(
        workspace: Workspace, github: FakeGitHub, spark: Any) -> None:
    deploy(workspace)
    reconcile(workspace.project, "execute", "-p", "grades",
              f"INSERT INTO students VALUES (1, '{CANARY}')")
    sql = workspace.project / "pipelines/grades/program.sql"
    sql.write_text(sql.read_text() + STRICT_VIEW)
    assert workspace.pull_request("opened", workspace.commit("a strict view")).exit_code == 0

    run, _ = approve(workspace, "alice")

    assert run.exit_code == 1 and run.outputs["result"] == "failed", run.log
    reply = github.replies(PR)[-1]["body"]
    assert PUBLIC in reply and PUBLIC in run.outputs["failure-reason"]
    manifest = workspace.manifest()
    assert manifest is not None and manifest["status"] == "Failed"
    assert manifest["status_details"]["error"] == PUBLIC
    # The plan shown again after the failure, and on the next push, says why, in public.
    assert f"last apply failed: {PUBLIC}" in only_sticky(github)["body"]
    sql.write_text(sql.read_text() + "-- a later push\n")
    again = workspace.pull_request("synchronize", workspace.commit("a later push"))
    assert again.exit_code == 0, again.log
    assert f"last apply failed: {PUBLIC}" in only_sticky(github)["body"]
    shown = [json.dumps(list(github.state.comments.values())), json.dumps(manifest)]
    for each in (run, again):
        shown += [each.log, each.summary, json.dumps(each.outputs)]
    assert not [text for text in shown if CANARY in text]
