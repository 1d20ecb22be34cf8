"""`reconcile rollback`: apply an earlier serial's program from the current state.

Flags in, calls out: which program and how it is checked is `operations.rollback`; the
plan, the policy and the bootstrap are `apply`'s own (`operations.apply.apply_pipeline`).
Registered by `cli.py`; it loads what it uses when it runs.
"""

from __future__ import annotations

import sys

import click

from reconciler.cli.context import CliContext, outcomes_json, pass_cli
from reconciler.cli.options import (
    LOCK_TIMEOUT,
    backend_option,
    engine_options,
    json_option,
    lock_option,
)
from reconciler.cli.refresh import confirm_bootstrap
from reconciler.support.errors import ReconcileError


@click.command("rollback")
@click.option("--pipeline", "-p", required=True, help="The pipeline to roll back.")
@click.option("--to", "serial", type=click.IntRange(min=1), required=True,
              help="The serial whose program to apply again (`reconcile state history`).")
@click.option("--auto-approve", is_flag=True,
              help="Bootstrap without asking (the pipeline's bootstrap_policy still applies: "
              "reject refuses).")
@json_option
@lock_option(LOCK_TIMEOUT)
@backend_option
@engine_options
@pass_cli
def rollback_command(obj: CliContext, pipeline: str, serial: int, auto_approve: bool,
                     lock_timeout: float, backend_url: str | None, spark_master: str | None,
                     spark_remote: str | None) -> None:
    """Apply the program serial N committed, bootstrapped from the current state.

    Plans it as `apply` would plan those files (which views are recomputed, which
    connectors reset), under the pipeline's bootstrap_policy; asks on a terminal (off one
    it needs --auto-approve). No input is read again: tables keep every row that arrived
    since, and each changed view is computed from them. Revert the change in git as well:
    the next apply brings the files' program back."""
    from reconciler.desired.settings.project import load_pipeline_spec, load_project
    from reconciler.operations.apply import ApplyOptions, apply_pipeline
    from reconciler.operations.engine import Engine
    from reconciler.operations.rollback import program_at
    from reconciler.state.reader import open_backend

    project = load_project(obj.project_dir)
    backend = open_backend(project, backend_url, lock_timeout=lock_timeout)
    program = program_at(project, backend, pipeline, serial)
    policy = load_pipeline_spec(project.pipeline_dirs[pipeline])[0].bootstrap_policy
    interactive = sys.stdin.isatty() and not auto_approve and not obj.as_json
    if policy == "await_approval" and not auto_approve and not interactive:
        raise ReconcileError(f"rolling '{pipeline}' back to serial {serial} bootstraps it: "
                             "confirm on a terminal or add --auto-approve")
    engine = Engine(project, master=spark_master, remote=spark_remote, report=obj.progress(),
                    debug=obj.debug)
    outcome = apply_pipeline(project, program, backend, engine, ApplyOptions(
        policy=policy, auto_approve=auto_approve,
        confirm=confirm_bootstrap if interactive else None))
    if obj.as_json:
        obj.emit(outcomes_json([outcome]))
    else:
        click.echo(outcome.message)

