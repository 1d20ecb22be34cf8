"""`reconcile refresh`, and the apply that it and `reconcile apply` share.

Kept apart from `cli.py` (which registers the command and calls `apply_pipelines`):
both commands take the same road, `operations.apply.apply_pipeline` under the pipeline's
lock, with the bootstrap policy, the confirmation on a terminal and the exit codes of
`apply`. A refresh is an apply of a selection (`plan.selection`) whose views are
recomputed from the state already stored although their SQL did not change; no input
is ingested, and tables, whose data is input, are never refreshed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from reconciler.cli.context import CliContext, console, outcomes_json, pass_cli
from reconciler.cli.options import (
    POLICY_CHOICE,
    bootstrap_options,
)
from reconciler.support.errors import ReconcileError

if TYPE_CHECKING:
    from reconciler.plan.artifact import Plan
    from reconciler.plan.document import PipelinePlan
    from reconciler.plan.selection import Selection

AWAITING_APPROVAL_EXIT = 3
"""`apply`'s exit code when a change was recorded and awaits approval: a script tells it
from an apply that happened (0) and from an error (1)."""


@click.command("refresh")
@click.option("--pipeline", "-p", help="The pipeline (needed when the project has several).")
@click.option("--select", "-s", "select", multiple=True, required=True, metavar="SELECTOR",
              help="The views to recompute (dbt's syntax: v, v+ adds the views that read it, "
              "+v those it reads; repeat it or separate by spaces or commas).")
@click.option("--bootstrap-policy", type=POLICY_CHOICE,
              help="Override the pipeline's bootstrap_policy.")
@click.option("--auto-approve", is_flag=True, help="Approve without asking.")
@bootstrap_options
@pass_cli
def refresh_command(obj: CliContext, pipeline: str | None, select: tuple[str, ...],
                    bootstrap_policy: str | None, auto_approve: bool, silent: bool,
                    lock_timeout: float, backend_url: str | None, spark_master: str | None,
                    spark_remote: str | None) -> None:
    """Recompute the selected views (`v+`: and what reads them) from the state already stored.

    Input is not re-ingested and tables are not refreshable. Asks, parks or refuses by
    the bootstrap policy, and exits, as `apply` does."""
    from reconciler.plan.selection import Selection

    apply_pipelines(obj, pipeline, Selection.parse(select, refresh=True), saved=None,
                    bootstrap_policy=bootstrap_policy, auto_approve=auto_approve,
                    silent=silent, full_refresh=False, lock_timeout=lock_timeout,
                    backend_url=backend_url, engine=(spark_master, spark_remote))


def apply_selection(select: tuple[str, ...], saved: Plan | None) -> Selection | None:
    """The selection of `plan` and `apply`: `--select`'s, or the one a saved plan was made
    with (a plan is applied as the reviewer saw it: a different `--select` is refused)."""
    from reconciler.plan.selection import Selection

    given = Selection.parse(select)
    if saved is None:
        return given
    chosen = saved.selection
    if given is not None and given != chosen:
        raise ReconcileError("--select differs from the saved plan's selection: apply the "
                             "plan as it was made, or plan again")
    return chosen


def apply_pipelines(obj: CliContext, pipeline: str | None, selection: Selection | None, *,
                    saved: Plan | None, bootstrap_policy: str | None,
                    auto_approve: bool, silent: bool, full_refresh: bool, lock_timeout: float,
                    backend_url: str | None, engine: tuple[str | None, str | None]) -> None:
    """Apply each chosen pipeline (`engine`: the Spark master and remote flags); exit
    `AWAITING_APPROVAL_EXIT` when one was parked for `reconcile approve`."""
    from reconciler.desired.workspace import load_programs
    from reconciler.operations.apply import ApplyOptions, apply_pipeline  # PySpark, when it runs
    from reconciler.operations.engine import Engine
    from reconciler.operations.outcome import OutcomeKind
    from reconciler.plan.document import git_info
    from reconciler.plan.selection import one_pipeline
    from reconciler.state.reader import open_backend

    if full_refresh and selection is not None:
        raise ReconcileError("--full-refresh rebuilds the whole pipeline: it takes no --select")
    project, programs = load_programs(obj.project_dir, pipeline)
    one_pipeline(programs, selection)
    backend = open_backend(project, backend_url, lock_timeout=lock_timeout)
    spark = Engine(project, master=engine[0], remote=engine[1], report=obj.progress(),
                   debug=obj.debug)
    git = git_info(project.root)
    interactive = sys.stdin.isatty() and not auto_approve and not obj.as_json
    outcomes = []
    for program in programs:
        source_policy = bootstrap_policy or program.bootstrap_policy
        outcome = apply_pipeline(project, program, backend, spark, ApplyOptions(
            policy=source_policy, auto_approve=auto_approve, silent=silent, saved_plan=saved,
            git_sha=git["sha"] if git else None, full_refresh=full_refresh, selection=selection,
            confirm=(confirm_bootstrap if interactive and source_policy == "await_approval"
                     else None)))
        outcomes.append(outcome)
        if not obj.as_json:
            click.echo(outcome.message)
    if obj.as_json:
        obj.emit(outcomes_json(outcomes))
    if any(outcome.result == OutcomeKind.AWAITING_APPROVAL for outcome in outcomes):
        sys.exit(AWAITING_APPROVAL_EXIT)


def confirm_bootstrap(plan: PipelinePlan) -> bool:
    """The plan shown on the terminal, and the person's yes or no (apply, rollback)."""
    from reconciler.plan.document import assemble_plan
    from reconciler.plan.terminal import render_plan

    render_plan(assemble_plan([plan], Path(".")), console())
    return click.confirm(f"Bootstrap these changes to '{plan.name}'?", default=False)
