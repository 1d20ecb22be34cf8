"""The apply run: a `/reconcile apply [pipeline]` comment on a pull request.

Acknowledge the comment, run the approval guard, plan again at the pull
request's head, apply the selected pipelines with approval given (each re-checks
the plan against its backend under its lock), refresh the sticky comment and
reply. Comment text is only matched against the apply command and a pipeline
name pattern; it never reaches a shell, a subprocess, a log line or a reply.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.github.client import GitHubError
from reconciler.github.comment import (
    PlanView,
    fenced,
    find_sticky,
    own_login,
    project_key,
    upsert_sticky,
)
from reconciler.github.comment_run import CommentRun
from reconciler.github.event import (
    ApplyRequest,
    Context,
    Inputs,
    Refused,
    RollbackRequest,
    parse_command,
    parse_rollback,
)
from reconciler.github.guard import (
    check_approver,
    check_backend,
    check_base_branch,
    check_checkout,
    check_named_plan,
    check_policies,
    check_pull_request,
    check_review,
    check_sticky,
    safe_login,
    select_changed,
)
from reconciler.github.replies import ApplyFailed, failure_reply, success_reply
from reconciler.github.rollback import rollback
from reconciler.github.trusted import (
    Trusted,
    TrustedTree,
    trusted_branch,
    trusted_project,
)
from reconciler.github.view_test_gate import add_view_tests, failing_tests
from reconciler.github.workflow_commands import (
    Outputs,
    annotate,
    log,
    log_traceback,
    workflow_commands_off,
)
from reconciler.operations.apply import ApplyOptions, apply_pipeline
from reconciler.operations.engine import Engine
from reconciler.operations.outcome import Outcome
from reconciler.plan.artifact import Plan
from reconciler.plan.markdown import render_markdown
from reconciler.state.reader import open_backend
from reconciler.support.errors import ReconcileError, public_message
from state_backends import StateBackendError


def apply_on_comment(project_dir: Path, context: Context, inputs: Inputs,
                     outputs: Outputs) -> int:
    """Handle a comment: ignore it unless it is the apply command on a pull request."""
    event = context.event
    issue, comment = event.get("issue") or {}, event.get("comment") or {}
    if event.get("action") != "created":
        log("comment edited or deleted: nothing to do (only new comments are commands)")
    elif not issue.get("pull_request"):
        log("comment on an issue, not a pull request: nothing to do")
    else:
        try:
            request = parse_command(str(comment.get("body") or ""), inputs.apply_command)
        except Refused as invalid:
            return _handle_apply(project_dir, inputs, _comment_run(context, issue, comment,
                                                                   outputs), None, invalid)
        if request is not None:
            return _handle_apply(project_dir, inputs, _comment_run(context, issue, comment,
                                                                   outputs), request, None)
        try:
            rollback_request = parse_rollback(str(comment.get("body") or ""),
                                              inputs.apply_command)
        except Refused as invalid:
            return _handle_rollback(project_dir, inputs, _comment_run(
                context, issue, comment, outputs), None, invalid)
        if rollback_request is not None:
            return _handle_rollback(project_dir, inputs, _comment_run(
                context, issue, comment, outputs), rollback_request, None)
        log("the comment's first line is not the apply command: nothing to do")
    outputs.set("result", "ignored")
    return 0


def _comment_run(context: Context, issue: dict[str, Any], comment: dict[str, Any],
                 outputs: Outputs) -> CommentRun:
    login = str((comment.get("user") or {}).get("login", ""))
    return CommentRun(context, context.client(), int(issue["number"]), int(comment["id"]),
                      login, outputs, str(comment.get("created_at") or ""))


def _handle_apply(project_dir: Path, inputs: Inputs, run: CommentRun,
                  request: ApplyRequest | None, invalid: Refused | None) -> int:
    """Acknowledge, check, apply, reply; every way out reacts and sets `result`."""
    run.react("eyes")
    try:
        if invalid is not None:
            raise invalid
        assert request is not None
        outcomes, plan = approve_and_apply(project_dir, inputs, run, request)
    except Refused as refusal:
        return _finish(run, "refused", str(refusal),
                       f"### Not applied\n\n{refusal}\n\n<sub>`{inputs.apply_command}` "
                       f"by @{safe_login(run.login)}</sub>\n")
    except ApplyFailed as failure:
        return _finish(run, "failed", str(failure), failure_reply(run.login, failure))
    except (ReconcileError, StateBackendError) as error:
        return _finish(run, "failed", public_message(error),
                       f"### Apply failed\n\n{fenced(public_message(error))}\n")
    run.outputs.set("plan-id", plan.plan_id)
    run.outputs.set("has-changes", bool(outcomes))
    result = "applied" if outcomes else "no-changes"
    run.outputs.set("result", result)  # before replying: the apply is done whatever happens
    log(f"{result}: " + "; ".join(o.message for o in outcomes))
    run.reply(success_reply(run.login, plan, outcomes))
    run.react("rocket")
    return 0


def _handle_rollback(project_dir: Path, inputs: Inputs, run: CommentRun,
                     request: RollbackRequest | None, invalid: Refused | None) -> int:
    """As `_handle_apply`, for a rollback's plan or its approval (`github.rollback`)."""
    run.react("eyes")
    try:
        if invalid is not None:
            raise invalid
        assert request is not None
        reply, plan, outcomes = rollback(project_dir, inputs, run, request)
    except Refused as refusal:
        return _finish(run, "refused", str(refusal), f"### Not rolled back\n\n{refusal}\n")
    except Exception as error:  # Spark errors too: reported on the pull request
        if not isinstance(error, (ReconcileError, StateBackendError)):
            log_traceback(error)
        return _finish(run, "failed", public_message(error),
                       f"### Rollback failed\n\n{fenced(public_message(error))}\n")
    run.outputs.set("plan-id", plan.plan_id)
    result = "rolled-back" if outcomes else "planned"
    run.outputs.set("result", result)
    log(f"{result}: plan {plan.plan_id[:12]}" + "".join(f"; {o.message}" for o in outcomes))
    run.reply(reply)
    run.react("rocket" if outcomes else "+1")
    return 0


def _finish(run: CommentRun, result: str, reason: str, reply: str) -> int:
    annotate("error", f"{result}: {reason}")
    run.outputs.set("result", result)
    run.outputs.set("failure-reason", reason)
    try:
        run.reply(reply)
    finally:
        run.react("confused")
    return 1




def approve_and_apply(project_dir: Path, inputs: Inputs, run: CommentRun,
                      request: ApplyRequest) -> tuple[list[Outcome], Plan]:
    """Every check in order of cost, then apply the named plan with approval given."""
    repo, key = run.context.repository, project_key(project_dir, run.context.workspace)
    how = check_approver(run.client, repo, run.login, inputs.approvers)
    pull = run.client.pull_request(repo, run.number)
    head_sha = check_pull_request(pull, inputs.allow_fork_prs)
    if inputs.require_review:
        how += "; " + check_review(run.client, repo, run.number, pull, head_sha,
                                   inputs.approvers)
    sticky = find_sticky(run.client, repo, run.number, key, own_login(run.client))
    shown = check_sticky(sticky, key, head_sha, inputs.apply_command, run.created_at)
    check_named_plan(request.plan_id, shown)
    branch = trusted_branch(inputs, run.context.event, run.client, repo)
    check_base_branch(pull, branch)
    check_checkout(project_dir, head_sha)
    tree = TrustedTree.resolve(run.client, repo, branch, project_dir)
    trusted = trusted_project(project_dir, inputs.pipeline, inputs, tree,
                              str(pull["base"]["ref"]))
    check_backend(trusted.project, run.context.workspace)
    plan = trusted.plan()
    if plan.plan_id != shown.plan_id:
        _refresh_sticky(run, key, plan, head_sha, inputs.apply_command,
                        notice="> **The plan changed** since it was last shown (the state or "
                               "the specs moved). Review this plan and comment again.")
        raise Refused(f"the plan changed since it was posted (plan_id `{shown.plan_id[:12]}` "
                      f"-> `{plan.plan_id[:12]}`); the plan comment now shows the "
                      "current plan: review it and comment again")
    selected = select_changed(plan, request.pipeline)
    check_policies(plan, selected)
    if trusted.project.settings.tests.required:
        plan = add_view_tests(plan, project_dir, only=selected,
                              timeout=trusted.project.settings.tests.timeout_seconds)
        failing = failing_tests(plan, selected)
        if failing:
            raise Refused("view tests fail: " + "; ".join(failing) + " (fix them, or set "
                          "`tests: {required: false}` in the trusted branch's reconcile.yaml)")
    log(f"@{run.login} may apply ({how}); applying {', '.join(selected) or 'nothing'} "
        f"of plan {plan.plan_id[:12]} at {head_sha}")
    try:
        outcomes = apply_selected(trusted, plan, selected, head_sha)
    except ApplyFailed as failure:
        _refresh_after_apply(run, trusted, inputs, key, head_sha, plan, failure.done,
                             failed=failure.pipeline)
        raise
    _refresh_after_apply(run, trusted, inputs, key, head_sha, plan, outcomes)
    return outcomes, plan


def apply_selected(trusted: Trusted, plan: Plan, selected: list[str],
                   head_sha: str) -> list[Outcome]:
    """apply_pipeline with approval given, checking the plan again under each pipeline's lock."""
    if not selected:
        return []
    project = trusted.project
    by_name = {program.pipeline: program for program in trusted.programs}
    backend = open_backend(project)
    engine = Engine(project)  # where Spark runs is in the trusted settings already
    outcomes: list[Outcome] = []
    with workflow_commands_off():
        for position, name in enumerate(selected):
            try:
                outcomes.append(apply_pipeline(project, by_name[name], backend, engine,
                                               ApplyOptions(policy="allow", saved_plan=plan,
                                                            git_sha=head_sha)))
            except Exception as error:  # Spark errors too: reported on the PR, not swallowed
                if not isinstance(error, (ReconcileError, StateBackendError)):
                    log_traceback(error)
                raise ApplyFailed(name, public_message(error), outcomes, selected[position + 1:]) \
                    from error
    return outcomes


def _refresh_sticky(run: CommentRun, key: str, plan: Plan, head_sha: str,
                    apply_command: str, notice: str) -> None:
    """Show the current plan so the next approval is of what would really happen."""
    view = PlanView(key, plan, render_markdown(plan), head_sha, apply_command, notice)
    try:
        upsert_sticky(run.client, run.context.repository, run.number, key, view.comment())
    except (GitHubError, ReconcileError) as error:
        log(f"could not update the plan comment: {error}")


def _refresh_after_apply(run: CommentRun, trusted: Trusted, inputs: Inputs, key: str,
                         head_sha: str, applied: Plan, outcomes: list[Outcome],
                         failed: str | None = None) -> None:
    """After an apply (even a failed one) the state moved and the old plan_id is spent: the
    sticky comment shows what is left, so a retry approves what would really happen."""
    if not outcomes and failed is None:
        return
    try:
        plan = trusted.plan()
    except (ReconcileError, StateBackendError) as error:
        log(f"could not plan again after applying: {public_message(error)}")
        return
    user, plan_id = safe_login(run.login), applied.plan_id[:12]
    if failed is None:
        names = ", ".join(f"`{o.pipeline}`" for o in outcomes)
        notice = (f"> Plan `{plan_id}` was applied to {names} by @{user} at "
                  f"`{head_sha[:12]}`. What is left to apply:")
    else:
        notice = (f"> Applying plan `{plan_id}` failed at `{failed}` (see the reply below). "
                  "The current plan, to retry:")
    _refresh_sticky(run, key, plan, head_sha, inputs.apply_command, notice)
