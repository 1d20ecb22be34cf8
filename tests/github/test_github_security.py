"""Attacks on the GitHub Action, each run through `reconcile github` and refused.

A pull request's author controls every file of the checkout; a commenter controls
only the comment's text; only writers approve, and only the plan they saw. Real
parts: the CLI, the fake GitHub REST server (its contents API reads the real git
repository, so "the base branch" is a real commit), moto's S3 and local Spark.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli_helpers import reconcile
from tests.fake_github import FakeGitHub
from tests.github_harness import (
    PR,
    Workspace,
    approve,
    assert_reject_refuses_the_apply,
    deploy,
    marker,
    only_sticky,
)
from tests.projects import apply_seed_modification

HOSTILE_VIEW = ("\ncreate view exfiltrate as select reflect('java.lang.System', 'getenv', "
                "'AWS_SECRET_ACCESS_KEY') as s from students;\n")


def program_sql(workspace: Workspace) -> Path:
    return workspace.project / "pipelines/grades/program.sql"


def everything_shown(github: FakeGitHub, *runs: Any) -> str:
    """Every comment, output, summary, plan artifact and log line of ours the runs produced
    (Spark's own log lines are issue 18's: they go to a log file, not the run log)."""
    comments = "\n".join(c["body"] for c in github.state.comments.values())
    ours = "\n".join(line for run in runs for line in run.log.splitlines()
                     if line.startswith(("reconcile:", "::", "error:")))
    artifacts = "".join(Path(run.outputs[name]).read_text() for run in runs
                        for name in ("plan-file", "plan-markdown-file") if name in run.outputs)
    return comments + ours + artifacts + "".join(json.dumps(run.outputs) + run.summary
                                                 for run in runs)


# -- 3: an approval is bound to the plan the approver saw ------------------------------------


def test_a_push_after_the_approval_is_never_applied(workspace: Workspace,
                                                    github: FakeGitHub, spark: Any) -> None:
    """A writer approves plan A; the author pushes B (with a changed view) and B's plan
    run updates the sticky comment before the apply job runs: nothing is applied."""
    deploy(workspace)
    apply_seed_modification(workspace.project)
    sha_a = workspace.commit("plan A")
    assert workspace.pull_request("opened", sha_a).exit_code == 0
    plan_a = marker(only_sticky(github)["body"], "plan-id")
    comment = github.add_comment(PR, "alice", f"/reconcile apply {plan_a[:12]}")

    sql = program_sql(workspace)
    sql.write_text(sql.read_text().replace("avg(grade)", "max(grade)"))
    sha_b = workspace.commit("plan B, pushed after the approval")
    assert workspace.pull_request("synchronize", sha_b).exit_code == 0
    assert marker(only_sticky(github)["body"], "plan-id") != plan_a

    run = workspace.run_comment(comment)

    assert run.exit_code == 1 and run.outputs["result"] == "refused", run.log
    assert "changed after this command was written" in run.outputs["failure-reason"]
    assert workspace.manifest()["serial"] == 1  # still the deployment: nothing bootstrapped
    assert "approved plan" not in github.replies(PR)[-1]["body"]


def test_a_comment_must_name_the_plan_shown(workspace: Workspace, github: FakeGitHub) -> None:
    apply_seed_modification(workspace.project)
    workspace.commit("a change")
    assert workspace.pull_request("opened").exit_code == 0

    bare, _ = workspace.comment("alice", "/reconcile apply")
    other, _ = workspace.comment("alice", "/reconcile apply " + "ab" * 6)

    assert bare.exit_code == 1 and "name the plan you approve" in bare.outputs["failure-reason"]
    assert other.exit_code == 1
    assert "this comment approves plan `abababababab`" in other.outputs["failure-reason"]
    assert workspace.manifest() is None


def test_require_review_needs_another_persons_approval_of_the_head(
        workspace: Workspace, github: FakeGitHub, spark: Any) -> None:
    sha = workspace.head
    assert workspace.pull_request("opened", sha).exit_code == 0
    github.add_review(PR, "carol", "APPROVED", sha)  # the author approving their own PR
    github.add_review(PR, "dave", "APPROVED", "1" * 40)  # an older commit

    refused, _ = approve(workspace, "alice", require_review="true")

    assert refused.exit_code == 1
    assert "approving review of the head commit" in refused.outputs["failure-reason"]
    assert workspace.manifest() is None

    github.add_review(PR, "dave", "APPROVED", sha)  # a sock puppet: no access at all
    github.add_review(PR, "rita", "APPROVED", sha)  # read access only
    puppets, _ = approve(workspace, "alice", require_review="true")

    assert puppets.exit_code == 1, puppets.log
    assert "by someone with write access" in puppets.outputs["failure-reason"]
    assert workspace.manifest() is None
    assert github.calls("GET", "/collaborators/dave/permission")  # asked, not assumed

    github.set_permission("dave", "write")
    applied, _ = approve(workspace, "alice", require_review="true")

    assert applied.exit_code == 0, applied.log
    assert "approved by @dave" in applied.log
    assert workspace.manifest()["serial"] == 1


# -- 4 and 11: settings and policy come from the base branch or the inputs ---------------------


def test_the_pull_request_cannot_choose_the_backend_storage_or_spark(
        workspace: Workspace, github: FakeGitHub, spark: Any, tmp_path: Path) -> None:
    """The head's reconcile.yaml points at a folder holding a crafted manifest, storage at a
    victim folder and Spark at a cluster of its own: the plan and the apply use the base
    branch's settings, and the plan says what the pull request asked for."""
    victim = tmp_path / "victim"
    (victim / "grades/views/old_view").mkdir(parents=True)
    (victim / "grades/views/old_view/precious.txt").write_text("keep me")
    settings = yaml.safe_load((workspace.project / "reconcile.yaml").read_text())
    settings.update(backend="pr-state", storage=str(victim),
                    spark={"master": "spark://attacker.example:7077"})
    (workspace.project / "reconcile.yaml").write_text(yaml.safe_dump(settings))
    crafted = workspace.project / "pr-state/grades/manifest.json"
    crafted.parent.mkdir(parents=True)
    crafted.write_text(json.dumps({"format_version": 1, "pipeline": "grades", "lineage": "x",
                                   "serial": 9, "status": "Running", "program": {},
                                   "relations": {"old_view": {
                                       "kind": "view", "version": 0,
                                       "path": str(victim / "grades/views/old_view")}}}))
    sha = workspace.commit("point the Action elsewhere")

    planned = workspace.pull_request("opened", sha)

    assert planned.exit_code == 0, planned.log
    body = only_sticky(github)["body"]
    assert "sets backend to pr-state; the Action uses s3://" in body
    assert f"sets storage to {victim}; the Action uses .reconcile/data" in body
    assert "sets spark.master to spark://attacker.example:7077; the Action uses local[2]" in body
    artifact = json.loads(Path(planned.outputs["plan-file"]).read_text())
    assert artifact["pipelines"][0]["base"] is None  # planned against S3, not the crafted file

    applied, _ = approve(workspace, "alice")

    assert applied.exit_code == 0, applied.log
    assert workspace.manifest()["serial"] == 1  # deployed to the base branch's S3 backend
    assert (victim / "grades/views/old_view/precious.txt").read_text() == "keep me"
    assert not (victim / "grades/tables").exists()
    assert json.loads(crafted.read_text())["serial"] == 9


def test_a_local_backend_in_the_checkout_is_refused_for_apply(
        workspace: Workspace, github: FakeGitHub) -> None:
    settings = yaml.safe_load((workspace.project / "reconcile.yaml").read_text())
    del settings["backend"]  # the default: .reconcile/state inside the checkout
    (workspace.project / "reconcile.yaml").write_text(yaml.safe_dump(settings))
    workspace.base_sha = workspace.commit("no backend on the default branch")
    github.state.pulls.clear()
    assert workspace.pull_request("opened").exit_code == 0

    run, _ = approve(workspace, "alice")

    assert run.exit_code == 1
    assert "state backend is a folder inside the checkout" in run.outputs["failure-reason"]
    assert not (workspace.project / ".reconcile").exists()


def test_the_pull_request_cannot_lift_a_reject_policy(
        workspace: Workspace, github: FakeGitHub, spark: Any) -> None:
    spec = workspace.project / "pipelines/grades/pipeline.yaml"
    spec.write_text(spec.read_text().replace("bootstrap_policy: await_approval",
                                             "bootstrap_policy: reject"))
    workspace.base_sha = workspace.commit("reject on the default branch")
    github.state.pulls.clear()
    deploy(workspace)
    spec.write_text(spec.read_text().replace("bootstrap_policy: reject", "bootstrap_policy: allow"))
    apply_seed_modification(workspace.project)
    sha = workspace.commit("flip the policy and change a view")

    assert workspace.pull_request("opened", sha).exit_code == 0
    body = only_sticky(github)["body"]
    assert "sets bootstrap_policy to allow; the Action uses reject (the main branch)" in body

    assert_reject_refuses_the_apply(workspace)


# -- 8: no secret or data value in what others read -------------------------------------------


def test_hostile_sql_and_templates_put_no_secret_in_any_comment(
        workspace: Workspace, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2-not-for-comments")
    sql = program_sql(workspace)
    sql.write_text(sql.read_text() + HOSTILE_VIEW)
    first = workspace.pull_request("opened", workspace.commit("read the environment"))
    assert first.exit_code == 1
    assert "function reflect() is not allowed" in only_sticky(github)["body"]

    sql.write_text(sql.read_text().replace(HOSTILE_VIEW, "\n{% include 'env.txt' %}\n"))
    (sql.parent / "env.txt").symlink_to("/proc/self/environ")
    second = workspace.pull_request("synchronize", workspace.commit("include the environment"))
    assert second.exit_code == 1
    assert "template 'env.txt' is a symbolic link" in only_sticky(github)["body"]

    refused, _ = workspace.comment("alice", "/reconcile apply 0123456789ab")
    assert refused.exit_code == 1
    assert "hunter2" not in everything_shown(github, first, second, refused)
    assert workspace.manifest() is None


def test_a_failed_apply_replies_with_the_error_class_not_the_data(
        workspace: Workspace, github: FakeGitHub, spark: Any) -> None:
    deploy(workspace)
    reconcile(workspace.project, "execute", "-p", "grades",
              "INSERT INTO students VALUES (1, 'hunter2-row-value')")
    sql = program_sql(workspace)
    sql.write_text(sql.read_text() + "\ncreate view as_numbers as select "
                                     "cast(name as int) as n from students;\n")
    assert workspace.pull_request("opened", workspace.commit("a view that fails")).exit_code == 0

    run, _ = approve(workspace, "alice")

    assert run.exit_code == 1 and run.outputs["result"] == "failed"
    reply = github.replies(PR)[-1]["body"]
    assert "view 'as_numbers'" in reply and "CAST_INVALID_INPUT" in reply
    assert "hunter2" not in everything_shown(github, run)
    assert "hunter2" not in json.dumps(workspace.manifest())


# -- 9: pull_request_target ---------------------------------------------------------------------


def test_pull_request_target_is_refused_unless_opted_in(
        workspace: Workspace, github: FakeGitHub) -> None:
    pull = github.add_pull(PR, workspace.head, base_sha=workspace.base_sha)
    payload = {"action": "opened", "number": PR,
               "pull_request": {"number": PR, "head": pull["head"], "base": pull["base"]}}

    refused = workspace.run("pull_request_target", payload, command="plan")

    assert refused.exit_code == 1 and refused.outputs["result"] == "refused"
    assert "pull_request_target is refused" in refused.log
    assert not github.writes()

    allowed = workspace.run("pull_request_target", payload, command="plan",
                            allow_pull_request_target="true")
    assert allowed.exit_code == 0 and allowed.outputs["result"] == "planned", allowed.log


# -- 1: credentials go to the reconcile step only, as inputs, and are masked ------------------


def test_credentials_from_inputs_are_used_and_masked(
        workspace: Workspace, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    """action.yml hands the AWS secrets to `reconcile github` as INPUT_AWS_* (no other step
    sees them); the program exports them to itself and asks the runner to mask them."""
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    run = workspace.pull_request("opened", aws_access_key_id="AKIAINPUTKEY0001",
                                 aws_secret_access_key="input-secret-0123456789")

    assert run.exit_code == 0, run.log  # moto was reached with the input credentials
    assert "::add-mask::input-secret-0123456789" in run.log
    assert "::add-mask::AKIAINPUTKEY0001" in run.log
    assert "input-secret" not in everything_shown(github).replace(
        "::add-mask::input-secret-0123456789", "")
