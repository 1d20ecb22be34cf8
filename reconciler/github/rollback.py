"""The rollback run: `/reconcile rollback <serial> [<plan id>] [pipeline]` on a pull request.

A writer first asks for the plan of going back to serial N (no plan id): the Action builds
that serial's program from the history (`operations.rollback.program_at`, through a pull
request's checks), plans it under the trusted settings and replies with the plan and its
id. Commenting the command again with that id approves exactly that plan: it is planned
again, refused if it changed, and applied as an approved apply is, from the current state
(`operations.apply.apply_pipeline`, the plan checked again under the pipeline's lock).
The pull request's own changes play no part: the program is the history's, and where state
lives and the policy come from the trusted tree.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from reconciler.github.comment import fenced
from reconciler.github.comment_run import CommentRun
from reconciler.github.event import Inputs, Refused, RollbackRequest, rollback_command
from reconciler.github.guard import check_approver, check_backend, check_policies
from reconciler.github.trusted import TrustedTree, trusted_branch, trusted_project
from reconciler.github.workflow_commands import workflow_commands_off
from reconciler.operations.apply import ApplyOptions, apply_pipeline
from reconciler.operations.engine import Engine
from reconciler.operations.outcome import Outcome
from reconciler.operations.rollback import program_at
from reconciler.plan.artifact import Plan
from reconciler.plan.markdown import render_markdown
from reconciler.plan.planner import plan_project
from reconciler.state.reader import open_backend
from reconciler.support.errors import ReconcileError


def rollback(project_dir: Path, inputs: Inputs, run: CommentRun, request: RollbackRequest
             ) -> tuple[str, Plan, list[Outcome]]:
    """Check the writer, plan the rollback, and apply it when the comment named that plan;
    returns what to reply, the plan, and what was applied (nothing for a plan request)."""
    repo = run.context.repository
    check_approver(run.client, repo, run.login, inputs.approvers)
    pull = run.client.pull_request(repo, run.number)
    branch = trusted_branch(inputs, run.context.event, run.client, repo)
    tree = TrustedTree.resolve(run.client, repo, branch, project_dir)
    trusted = trusted_project(project_dir, request.pipeline or inputs.pipeline, inputs, tree,
                              str(pull["base"]["ref"]))
    check_backend(trusted.project, run.context.workspace)
    if len(trusted.programs) != 1:
        raise Refused("name the pipeline to roll back: `" + rollback_command(
            inputs.apply_command) + " <serial> [<plan id>] <pipeline>`; nothing was rolled back")
    current = trusted.programs[0]
    backend = open_backend(trusted.project)
    try:
        program = replace(program_at(trusted.project, backend, current.pipeline,
                                     request.serial),
                          bootstrap_policy=current.bootstrap_policy, publish=current.publish)
    except ReconcileError as error:
        raise Refused(str(error)) from None
    plan = plan_project(trusted.project, [program], None)
    command = f"{rollback_command(inputs.apply_command)} {request.serial}"
    if request.plan_id is None:
        return (f"### Rollback plan: `{current.pipeline}` to serial {request.serial}\n\n"
                + render_markdown(plan) + f"\n\nTo apply it, comment `{command} "
                f"{plan.plan_id[:12]} {current.pipeline}`.\n", plan, [])
    if not plan.plan_id.startswith(request.plan_id):
        raise Refused(f"the rollback plan changed (plan_id `{request.plan_id[:12]}` -> "
                      f"`{plan.plan_id[:12]}`): comment `{command}` to see it again")
    check_policies(plan, [current.pipeline])
    with workflow_commands_off():
        outcome = apply_pipeline(trusted.project, program, backend, Engine(trusted.project),
                                 ApplyOptions(policy="allow", saved_plan=plan))
    return (f"### Rolled back\n\n`{current.pipeline}` to the program of serial "
            f"{request.serial}: {fenced(outcome.message)}\nRevert the change in git as well: "
            "the next apply brings the branch's program back.\n", plan, [outcome])
