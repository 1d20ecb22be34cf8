"""`reconcile github`: the GitHub Action's entry point and its plan run.

Routes the event: on a pull request it plans and keeps ONE sticky comment per
project up to date (``comment``); on a `/reconcile apply [pipeline]` comment it
hands over to the apply run (``apply``), which checks who asked, that the pull
request is not from a fork, that the commit and the plan are still the ones the
sticky comment shows (``guard``), then applies with approval given and replies.
See docs/github-action.md and docs/security.md.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconciler.desired.settings.project import load_project
from reconciler.github.apply import apply_on_comment
from reconciler.github.client import GitHubError
from reconciler.github.comment import PlanView, failed_plan_comment, project_key, upsert_sticky
from reconciler.github.environments import (
    destroy_pull_request_environments,
    environment_section,
    same_repository,
)
from reconciler.github.event import Context, Inputs, credentials_from_inputs
from reconciler.github.trusted import (
    Trusted,
    TrustedTree,
    trusted_branch,
    trusted_project,
    trusted_settings_project,
)
from reconciler.github.view_test_gate import add_view_tests
from reconciler.github.workflow_commands import (
    Outputs,
    annotate,
    log,
    mask,
    mask_url_parameters,
    write_summary,
)
from reconciler.operations.drift import plan_with_drift
from reconciler.plan.artifact import Plan
from reconciler.plan.document import git_info
from reconciler.plan.markdown import render_markdown
from reconciler.plan.planner import compute_plan
from reconciler.plan.preview_report import PipelinePreview
from reconciler.support.errors import ReconcileError, public_message
from state_backends import StateBackendError

PLAN_ACTIONS = frozenset({"opened", "synchronize", "reopened"})


def run_action(project_dir: Path, env: Mapping[str, str]) -> int:
    """Entry point of `reconcile github`: route the event, return the exit code."""
    context = Context.from_env(env)
    inputs = Inputs.from_env(env)
    mask(context.token)  # a token from an input is not a secret GitHub already masks
    mask_url_parameters(inputs.spark_remote)  # Spark Connect URLs may carry ;token=...
    for variable, value in credentials_from_inputs(env).items():
        if variable != "AWS_REGION":
            mask(value)
        os.environ[variable] = value
    outputs = Outputs(context.output)
    route, why = choose_route(context, inputs)
    log(why)
    if route == "refused":
        annotate("error", why)
        outputs.set("result", "refused")
        outputs.set("failure-reason", why)
        return 1
    if route == "plan":
        return plan_on_pull_request(project_dir, context, inputs, outputs)
    if route == "apply":
        return apply_on_comment(project_dir, context, inputs, outputs)
    if route == "closed":
        return close_pull_request(project_dir, context, inputs, outputs)
    outputs.set("result", "ignored")
    return 0


def choose_route(context: Context, inputs: Inputs) -> tuple[str | None, str]:
    """Which flow this event asks for, with a log line saying why."""
    name, event = context.event_name, context.event
    action = str(event.get("action", ""))
    if name == "pull_request_target" and not inputs.allow_pull_request_target:
        return "refused", ("pull_request_target is refused: it runs with the base "
                           "repository's secrets and write token on a pull request's files, "
                           "forks included; trigger the workflow on pull_request (or set the "
                           "input allow-pull-request-target: true, see the README)")
    if inputs.command == "plan":
        return "plan", f"event {name}: planning (command: plan)"
    if name == "pull_request" and inputs.command == "auto":
        if action in PLAN_ACTIONS:
            return "plan", f"pull_request {action}: planning"
        if action == "closed":
            return "closed", "pull_request closed: removing its environments"
        return None, f"pull_request {action}: nothing to do"
    if name == "issue_comment" and inputs.command in ("auto", "apply"):
        return "apply", f"issue_comment {action}: checking for the apply command"
    return None, f"event {name or '(none)'} with command {inputs.command}: nothing to do"


def plan_on_pull_request(project_dir: Path, context: Context, inputs: Inputs,
                         outputs: Outputs) -> int:
    """Plan, save the artifact, write the summary and the outputs, update the sticky comment."""
    key = project_key(project_dir, context.workspace)
    pull = context.event.get("pull_request") or {}
    number = pull.get("number")
    head_sha = str((pull.get("head") or {}).get("sha") or "")
    try:
        git = git_info(project_dir)
        head_sha = head_sha or str((git or {}).get("sha") or "")
        plan, environments = _plan(project_dir, context, inputs, pull)
    except (ReconcileError, StateBackendError) as error:
        return _plan_failed(context, outputs, key, number, head_sha, public_message(error))
    view = PlanView(key, plan, render_markdown(plan) + environments, head_sha,
                    inputs.apply_command,
                    notice=_checkout_notice(git, head_sha))
    save_plan(view, context.temp_dir, outputs)
    write_summary(context.step_summary, view.summary())
    outputs.set("plan-id", plan.plan_id)
    outputs.set("has-changes", bool(view.changed))
    log(f"plan {plan.plan_id}: {len(view.changed)} pipeline(s) with changes")
    if number is not None:
        _post_plan(context, outputs, key, int(number), view.comment())
    outputs.set("result", "planned")
    return 0


def _plan(project_dir: Path, context: Context, inputs: Inputs,
          pull: dict[str, Any]) -> tuple[Plan, str]:
    """On a pull request, under the trusted branch's settings (see `trusted`); on any other
    event (`command: plan` on a push, say) the checkout is the repository's own code. With
    the `tests` input, the changed pipelines' view tests, bounded by the settings in force.
    With the trusted settings' `environments:`, the pull request's environment, built, and
    the comment's section about it."""
    if not pull:
        plan = plan_with_drift(compute_plan(project_dir, inputs.pipeline, inputs.backend),
                               load_project(project_dir), inputs.backend)
        if inputs.tests:
            plan = add_view_tests(
                plan, project_dir, timeout=load_project(project_dir).settings.tests.timeout_seconds)
        return plan, ""
    client = context.client()
    branch = trusted_branch(inputs, context.event, client, context.repository)
    tree = TrustedTree.resolve(client, context.repository, branch, project_dir)
    base_ref = str((pull.get("base") or {}).get("ref") or "")
    trusted = trusted_project(project_dir, inputs.pipeline, inputs, tree, base_ref)
    plan = plan_with_drift(trusted.plan(), trusted.project)  # the trusted backend
    if inputs.preview != "off":
        plan = _preview(plan, trusted, inputs, pull)
    if inputs.tests:
        plan = add_view_tests(plan, project_dir,
                              timeout=trusted.project.settings.tests.timeout_seconds)
    return plan, environment_section(plan, trusted, pull)


def _preview(plan: Plan, trusted: Trusted, inputs: Inputs, pull: dict[str, Any]) -> Plan:
    """The data preview, under the trusted settings an apply would use, for a pull request
    from this repository: a fork's SQL never runs here with the workflow's access to state.
    A preview that fails is said in the comment; the plan stands."""
    if not same_repository(pull):
        log("data preview skipped: the pull request comes from a fork")
        return plan
    from reconciler.operations.engine import Engine  # Spark: only with the preview input
    from reconciler.operations.preview import preview_plan

    try:
        return preview_plan(plan, trusted.project, trusted.programs, None,
                            Engine(trusted.project), inputs.preview)
    except Exception as error:  # the plan is still right; say why there are no counts
        failed = PipelinePreview.failed(public_message(error))
        return plan.with_previews(dict.fromkeys(plan.changed, failed))


def close_pull_request(project_dir: Path, context: Context, inputs: Inputs,
                       outputs: Outputs) -> int:
    """`pull_request: closed`: destroy its environments, under the trusted settings (the pull
    request's own files are not read: it may have left them in any state)."""
    number = (context.event.get("pull_request") or {}).get("number")
    if number is None:
        outputs.set("result", "ignored")
        return 0
    client = context.client()
    tree = TrustedTree.resolve(client, context.repository,
                               trusted_branch(inputs, context.event, client, context.repository),
                               project_dir)
    gone = destroy_pull_request_environments(
        trusted_settings_project(project_dir, inputs, tree), int(number))
    log(f"environments removed: {', '.join(gone) or 'none'}")
    outputs.set("result", "environments-removed" if gone else "ignored")
    return 0


def _checkout_notice(git: dict[str, Any] | None, head_sha: str) -> str:
    """actions/checkout defaults to the merge commit on pull_request: say what was planned."""
    if git and head_sha and git["sha"] != head_sha:
        return (f"> **Note:** planned the checked-out commit `{git['sha'][:12]}`, not the pull "
                f"request's head `{head_sha[:12]}`; check out the head SHA in the workflow, or "
                "`/reconcile apply` will refuse a plan that differs at the head.")
    return ""


def _post_plan(context: Context, outputs: Outputs, key: str, number: int, body: str) -> None:
    """Fork pull requests get a read-only token: the plan then lives in the summary only."""
    try:
        comment = upsert_sticky(context.client(), context.repository, number, key, body)
    except GitHubError as error:
        if error.status != 403:
            raise
        annotate("warning", f"cannot comment on the pull request ({error}); the plan is in the "
                            "step summary")
        return
    outputs.set("comment-url", comment.get("html_url", ""))
    log(f"plan comment: {comment.get('html_url', comment.get('id'))}")


def _plan_failed(context: Context, outputs: Outputs, key: str, number: Any, head_sha: str,
                 reason: str) -> int:
    body = failed_plan_comment(key, head_sha, reason)
    write_summary(context.step_summary, body)
    annotate("error", f"plan failed: {reason}")
    outputs.set("result", "failed")
    outputs.set("failure-reason", reason)
    if number is not None:
        _post_plan(context, outputs, key, int(number), body)
    return 1


def save_plan(view: PlanView, temp_dir: Path, outputs: Outputs) -> Path:
    """plan.json (the artifact `reconcile apply PLAN` accepts) and plan.md, for upload."""
    folder = temp_dir / f"reconcile-plan-{re.sub(r'[^A-Za-z0-9_.-]', '_', view.key)}"
    folder.mkdir(parents=True, exist_ok=True)
    plan_file = folder / "plan.json"
    plan_file.write_text(json.dumps(view.plan.document(), indent=2, sort_keys=True) + "\n",
                         encoding="utf-8")
    (folder / "plan.md").write_text(view.summary(), encoding="utf-8")
    outputs.set("plan-file", str(plan_file))
    outputs.set("plan-markdown-file", str(folder / "plan.md"))
    return plan_file
