"""`reconcile destroy`: a pipeline's data and state removed, after a plan and a confirmation.

Flags in, calls out: what goes, in which order and under which checks is
`reconciler.operations.destroy`. Registered by `cli.py`; it loads what it uses when it runs.
"""

from __future__ import annotations

import sys

import click

from reconciler.cli.context import CliContext, pass_cli
from reconciler.cli.options import (
    LOCK_TIMEOUT,
    POLICY_CHOICE,
    backend_option,
    engine_options,
    json_option,
    lock_option,
)
from reconciler.support.errors import ReconcileError


@click.command("destroy")
@click.option("--pipeline", "-p", required=True,
              help="The pipeline to remove (in the project, or only in the backend).")
@click.option("--auto-approve", is_flag=True, help="Destroy without asking.")
@click.option("--bootstrap-policy", type=POLICY_CHOICE,
              help="Override the pipeline's bootstrap_policy (reject refuses a destroy); the "
              "only policy a pipeline whose folder is gone has.")
@json_option
@lock_option(LOCK_TIMEOUT)
@backend_option
@engine_options
@pass_cli
def destroy_command(obj: CliContext, pipeline: str, auto_approve: bool,
                    bootstrap_policy: str | None, lock_timeout: float,
                    backend_url: str | None, spark_master: str | None,
                    spark_remote: str | None) -> None:
    """Remove a pipeline: its tables', views' and checkpoints' data, then its state.

    Shows what goes and asks first, like terraform destroy (off a terminal it needs
    --auto-approve). Works from the committed manifest, so a pipeline whose folder was
    deleted can be removed; one still in the project is deployed again by the next apply.
    Never deletes outside the pipeline's folder of the storage root. Interrupted, it is
    finished by running it again. With --json, the plan it asks about goes to stderr.
    A pipeline in the project with `publish:` has its catalog views dropped too (Spark
    starts for that alone; the --spark flags say where)."""
    from reconciler.desired.settings.project import load_project
    from reconciler.operations.destroy import (
        check_policy,
        destroy_pipeline,
        finish_destroyed,
        plan_destroy,
    )
    from reconciler.state.reader import open_backend

    as_json = obj.as_json
    project = load_project(obj.project_dir)
    check_policy(project, pipeline, bootstrap_policy)
    backend = open_backend(project, backend_url, lock_timeout=lock_timeout)
    plan = plan_destroy(project, backend, pipeline)
    if plan is None:
        said = finish_destroyed(backend, pipeline)
        _report(obj, {"pipeline": pipeline, "result": "nothing to destroy"}, said)
        return
    # With --json the object says it all (its `warnings` too); the question is still asked
    # about the plan it shows, on stderr.
    if not as_json or (not auto_approve and _on_terminal()):
        for line in plan.lines():
            click.echo(line, err=as_json)
    if not auto_approve:
        if not _on_terminal():
            raise ReconcileError(f"destroy deletes the data and state of pipeline "
                                 f"'{pipeline}': confirm on a terminal or add --auto-approve")
        if not click.confirm(f"Destroy '{pipeline}' and delete its data?", default=False,
                             err=as_json):
            _report(obj, plan.document() | {"result": "cancelled"},
                    f"{pipeline}: destroy cancelled")
            return
    engine = None
    if plan.published is not None:
        from reconciler.operations.engine import Engine  # PySpark: only to drop views

        engine = Engine(project, master=spark_master, remote=spark_remote,
                        report=obj.progress(), debug=obj.debug)
    destroy_pipeline(project, backend, plan, engine)
    _report(obj, plan.document() | {"result": "destroyed"},
            f"{pipeline}: destroyed ({len(plan.doomed)} location(s) and its state removed)")


def _on_terminal() -> bool:
    """Whether a person can answer the question (stdin is a terminal)."""
    return sys.stdin.isatty()


def _report(obj: CliContext, document: dict[str, object], message: str) -> None:
    if obj.as_json:
        obj.emit(document)
    else:
        click.echo(message)
