"""The `reconcile` command line (click).

Every command catches the product's own errors and prints them as one line on
stderr with exit code 1; `--debug` shows the traceback instead.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from reconciler import __version__
from reconciler.cli.context import CliContext, ReconcileGroup, console, outcomes_json, pass_cli
from reconciler.cli.destroy import destroy_command
from reconciler.cli.doctor import doctor_command
from reconciler.cli.environments import env_group
from reconciler.cli.options import (
    LOCK_TIMEOUT,
    POLICY_CHOICE,
    backend_option,
    bootstrap_options,
    engine_options,
    json_flag,
    json_option,
    lock_option,
    select_option,
)
from reconciler.cli.refresh import apply_pipelines, apply_selection, refresh_command
from reconciler.cli.rollback import rollback_command
from reconciler.cli.spark import spark_group
from reconciler.cli.state import state
from reconciler.cli.statements import execute, query
from reconciler.cli.view_tests import test_command
from reconciler.desired.settings.setting_values import duration_seconds
from reconciler.runner.loop import MAX_FAILURES
from reconciler.support.errors import ReconcileError
from reconciler.support.process import (
    end_without_teardown,
    ending_with,
    one_shot_process,
    raise_on_sigterm,
)
from reconciler.support.progress import LOG_LEVELS, set_log_level

if TYPE_CHECKING:
    from reconciler.desired.model.program import Program


@click.group(cls=ReconcileGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "--project-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("."), show_default=True, help="Project folder (holds reconcile.yaml).")
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.option("--quiet", "-q", is_flag=True,
              help="No progress on stderr (off a terminal: a timestamped line per stage).")
@click.option("--log-level", type=click.Choice(LOG_LEVELS), help="error and warn: no "
              "progress; info (default): progress; debug: also log records, tracebacks and "
              "Spark's warnings.")
@click.version_option(__version__, prog_name="reconcile")
@click.pass_context
def cli(ctx: click.Context, project_dir: Path, debug: bool, quiet: bool,
        log_level: str | None) -> None:
    """Plan and apply changes to continuous Spark SQL pipelines, bootstrapping only what changed."""
    level = log_level or ("warn" if quiet else "info")
    set_log_level(level)
    ctx.obj = CliContext(project_dir=project_dir, debug=debug or level == "debug", context=ctx,
                         quiet=level in ("error", "warn"))


@cli.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--pipeline-name", default="events", show_default=True,
              help="Name of the first pipeline.")
@pass_cli
def init(obj: CliContext, directory: Path | None, pipeline_name: str) -> None:
    """Create a new project: reconcile.yaml, one pipeline, and the GitHub workflow."""
    from reconciler.cli.scaffold import scaffold
    from reconciler.desired.settings.project import display

    target = directory or obj.project_dir
    for path in scaffold(target, pipeline_name):
        click.echo(f"created {display(path)}")
    click.echo(f"next: reconcile -C {display(target)} plan")


@cli.command()
@click.option("--pipeline", "-p", help="Only this pipeline.")
@json_option
@pass_cli
def validate(obj: CliContext, pipeline: str | None) -> None:
    """Parse and check every pipeline; print a short summary of each."""
    from reconciler.desired.workspace import check_input_folders, load_programs

    project, programs = load_programs(obj.project_dir, pipeline)
    for program in programs:
        check_input_folders(program, project.root)
    summaries = [validation_summary(program) for program in programs]
    if obj.as_json:
        obj.emit({"pipelines": summaries})
        return
    for summary in summaries:
        click.echo(f"{summary['pipeline']}: {summary['tables']} tables, {summary['views']} views, "
                   f"{summary['input_connectors']} input and {summary['output_connectors']} "
                   "output connectors: ok")
        for name, refresh in summary["refresh"].items():
            click.echo(f"  view {name}: {refresh}")


def validation_summary(program: Program) -> dict[str, Any]:
    """What `validate` says of a pipeline (its text and its `--json` share these keys)."""
    inputs = sum(1 for c in program.connectors.values() if c.direction == "input")
    return {"pipeline": program.pipeline, "tables": len(program.tables),
            "views": len(program.views), "input_connectors": inputs,
            "output_connectors": len(program.connectors) - inputs, "ok": True,
            "refresh": {name: program.views[name].describe_refresh()
                        for name in program.order if name in program.views}}


@cli.command()
@click.option("--pipeline", "-p", help="Only this pipeline.")
@select_option
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the plan artifact (JSON) here, for `apply PLAN` or review.")
@click.option("--markdown", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the plan as Markdown (for PR comments) here.")
@json_flag("the plan artifact")
@click.option("--detailed-exitcode", is_flag=True,
              help="Exit 2 when there are changes, 0 when there are none.")
@click.option("--preview", type=click.Choice(["counts", "rows"]), is_flag=False,
              flag_value="counts", help="Also count on Spark what the apply would do to each "
              "computed view's rows (read-only; starts Spark); rows: with sample rows.")
@backend_option
@pass_cli
def plan(obj: CliContext, pipeline: str | None, select: tuple[str, ...], out: Path | None,
         markdown: Path | None, detailed_exitcode: bool, preview: str | None,
         backend_url: str | None) -> None:
    """Show what apply would change: added, modified and removed tables, views, connectors."""
    from reconciler.plan.markdown import render_markdown
    from reconciler.plan.planner import compute_plan
    from reconciler.plan.terminal import render_plan

    if preview and select:
        raise ReconcileError("--preview counts the whole plan's views: it takes no --select")
    planned = compute_plan(obj.project_dir, pipeline, backend_url, apply_selection(select, None))
    from reconciler.desired.settings.project import load_project
    from reconciler.operations.drift import plan_with_drift  # delta-rs: no JVM

    planned = plan_with_drift(planned, load_project(obj.project_dir), backend_url)
    if preview:
        from reconciler.operations.preview import preview_checkout  # the engine layer: Spark
        planned = preview_checkout(planned, obj.project_dir, pipeline, backend_url, preview,
                                   obj.debug)
    if out:
        out.write_text(json.dumps(planned.document(), indent=2, sort_keys=True) + "\n",
                       encoding="utf-8")
    if markdown:
        markdown.write_text(render_markdown(planned), encoding="utf-8")
    if obj.as_json:
        obj.emit(planned.document())
    else:
        render_plan(planned, console())
    if detailed_exitcode and planned.changed:
        sys.exit(2)


@cli.command()
@click.argument("plan_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "output_format", type=click.Choice(["terminal", "markdown", "json"]),
              default="terminal", show_default=True, help="How to render the plan.")
def show(plan_file: Path, output_format: str) -> None:
    """Render a saved plan artifact."""
    from reconciler.plan.artifact import load_plan_file
    from reconciler.plan.markdown import render_markdown
    from reconciler.plan.terminal import render_plan

    saved = load_plan_file(plan_file)
    if output_format == "markdown":
        click.echo(render_markdown(saved), nl=False)
    elif output_format == "json":
        click.echo(json.dumps(saved.document(), indent=2, sort_keys=True))
    else:
        render_plan(saved, console())


@cli.command()
@click.argument("plan_file", required=False,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--pipeline", "-p", help="Only this pipeline.")
@select_option
@click.option("--bootstrap-policy", type=POLICY_CHOICE,
              help="Override each pipeline's bootstrap_policy.")
@click.option("--auto-approve", is_flag=True, help="Approve without asking.")
@click.option("--full-refresh", is_flag=True,
              help="Drop all state, reset every connector and rebuild from the sources.")
@bootstrap_options
@pass_cli
def apply(obj: CliContext, plan_file: Path | None, pipeline: str | None, select: tuple[str, ...],
          bootstrap_policy: str | None, auto_approve: bool, silent: bool, full_refresh: bool,
          lock_timeout: float, backend_url: str | None, spark_master: str | None,
          spark_remote: str | None) -> None:
    """Deploy new pipelines and bootstrap changed ones (asks first, like terraform apply).

    Exits 3 when a change was only recorded, awaiting approval (`bootstrap_policy:
    await_approval` off a terminal): `reconcile approve` bootstraps it."""
    from reconciler.plan.artifact import load_plan_file

    if full_refresh and not auto_approve and not (sys.stdin.isatty() and click.confirm(
            "Drop all state and re-ingest every input?", default=False)):
        raise ReconcileError("--full-refresh drops all state: confirm on a terminal or add "
                             "--auto-approve")
    saved = load_plan_file(plan_file) if plan_file else None
    apply_pipelines(obj, pipeline, apply_selection(select, saved), saved=saved,
                    bootstrap_policy=bootstrap_policy, auto_approve=auto_approve, silent=silent,
                    full_refresh=full_refresh, lock_timeout=lock_timeout,
                    backend_url=backend_url, engine=(spark_master, spark_remote))


@cli.command()
@click.option("--pipeline", "-p", help="Only this pipeline.")
@bootstrap_options
@pass_cli
def approve(obj: CliContext, pipeline: str | None, silent: bool, lock_timeout: float,
            backend_url: str | None, spark_master: str | None, spark_remote: str | None) -> None:
    """Approve changes recorded as AwaitingApproval, then bootstrap them."""
    from reconciler.desired.workspace import load_programs

    # The engine layer imports PySpark (~0.5 s): only the commands that run Spark import it.
    from reconciler.operations.apply import approve_pipeline
    from reconciler.operations.engine import Engine
    from reconciler.state.manifest import Status
    from reconciler.state.reader import open_backend, read_manifest

    project, programs = load_programs(obj.project_dir, pipeline)
    backend = open_backend(project, backend_url, lock_timeout=lock_timeout)
    engine = Engine(project, master=spark_master, remote=spark_remote,
                    report=obj.progress(), debug=obj.debug)
    outcomes = []
    for program in programs:
        manifest, _ = read_manifest(backend, program.pipeline)
        if pipeline is None and (manifest is None or manifest.status != Status.AWAITING_APPROVAL):
            continue
        outcomes.append(approve_pipeline(project, program, backend, engine, silent=silent))
        if not obj.as_json:
            click.echo(outcomes[-1].message)
    if obj.as_json:
        obj.emit(outcomes_json(outcomes))


@cli.command()
@click.option("--pipeline", "-p", help="Only this pipeline.")
@click.option("--continuous", is_flag=True, help="Keep running steps until interrupted.")
@click.option("--interval", type=float, default=10.0, show_default=True,
              help="Seconds between steps with --continuous.")
@click.option("--max-failures", type=click.IntRange(min=1), default=MAX_FAILURES,
              show_default=True, help="With --continuous: give up after this many failed "
              "rounds in a row.")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="With --continuous: serve "
              "Prometheus metrics on this port (127.0.0.1 unless --metrics-address).")
@click.option("--metrics-address", default="127.0.0.1", show_default=True,
              help="The address --metrics-port listens on (0.0.0.0: every interface).")
@lock_option(None)
@backend_option
@engine_options
@json_option
@pass_cli
def run(obj: CliContext, pipeline: str | None, continuous: bool, interval: float,
        max_failures: int, metrics_port: int | None, metrics_address: str,
        lock_timeout: float | None, backend_url: str | None, spark_master: str | None,
        spark_remote: str | None) -> None:
    """Run a step: ingest new input, refresh affected views, emit changes, commit.

    A single step refuses a locked pipeline at once unless --lock-timeout says to wait; a
    continuous run waits 5m by default, pauses a pipeline awaiting approval, retries
    failed steps with backoff and stops after the current step on SIGTERM or Ctrl-C."""
    from reconciler.desired.settings.project import load_project
    from reconciler.desired.workspace import select_pipelines
    from reconciler.operations.engine import Engine  # PySpark: see `approve`
    from reconciler.operations.outcome import OutcomeKind
    from reconciler.operations.step import run_pipeline
    from reconciler.operations.step_failures import recorded
    from reconciler.runner.loop import RunnerReports, run_continuously
    from reconciler.state.reader import open_backend

    if continuous and obj.as_json:
        raise ReconcileError("--json reports one step; a continuous run's state is in "
                             "`reconcile status --json` and its --metrics-port")
    project = load_project(obj.project_dir)
    if lock_timeout is None:
        lock_timeout = (duration_seconds(LOCK_TIMEOUT) or 0.0) if continuous else 0.0
    backend = open_backend(project, backend_url, lock_timeout=lock_timeout)
    engine = Engine(project, master=spark_master, remote=spark_remote,
                    report=obj.progress(), debug=obj.debug)
    names = select_pipelines(project, pipeline)
    if continuous:
        metrics = None
        if metrics_port:
            from reconciler.cli.status import pipeline_input_lags
            from reconciler.runner.metrics import RunnerMetrics  # prometheus_client: runners only

            metrics = RunnerMetrics(lags=lambda name: pipeline_input_lags(project, backend, name))
            metrics.serve(metrics_port, metrics_address)
        reports = RunnerReports(backend.write_runner_report, interval)
        backend.on_lock_wait = lambda name, holder: reports.say(
            name, "waiting_for_lock", f"held by {holder.who} ({holder.operation})")
        run_continuously(lambda name: recorded(backend, name, lambda: run_pipeline(
                             project, backend, engine, name)[0]),
                         names, interval, echo=click.echo, release=backend.release_if_held,
                         max_failures=max_failures, metrics=metrics, reports=reports)
        return
    held: list[str] = []  # bad input files: the other pipelines and connectors still step
    outcomes = []
    for name in names:
        def step(name: str = name) -> Any:  # (a def: mypy infers no lambda with a default)
            return run_pipeline(project, backend, engine, name)[0]
        outcome = recorded(backend, name, step)
        held.extend(outcome.details.get("bad_input", {}).values())
        outcomes.append(outcome)
        if outcome.result != OutcomeKind.INPUT_FAILED and not obj.as_json:
            click.echo(outcome.message)
    if obj.as_json:
        obj.emit(outcomes_json(outcomes))  # the held files' errors are in `details` too
    if held:
        raise ReconcileError("; ".join(held))


@cli.command()
@click.option("--pipeline", "-p", help="Only this pipeline.")
@json_flag("one pipeline's status with -p, else a list of them")
@backend_option
@pass_cli
def status(obj: CliContext, pipeline: str | None, backend_url: str | None) -> None:
    """Status, serial, last step, row counts, connectors, environments and lock holder of
    each pipeline."""
    from reconciler.cli.status import print_status, status_reports
    from reconciler.desired.settings.project import load_project
    from reconciler.desired.workspace import select_pipelines
    from reconciler.state.reader import open_backend

    project = load_project(obj.project_dir)
    # With every pipeline folder gone, the backend's orphans are still worth a status.
    names = select_pipelines(project, pipeline) if pipeline or project.pipeline_dirs else []
    reports = status_reports(project, open_backend(project, backend_url), names)
    if not reports:
        select_pipelines(project, pipeline)  # says no pipeline was found, and where
    if obj.as_json:
        obj.emit(reports if pipeline is None else reports[0])
        return
    print_status(reports)


@cli.command()
@pass_cli
def github(obj: CliContext) -> None:
    """The GitHub Action's entry point: plan on pull requests, apply on `/reconcile apply`.

    Reads the GITHUB_* variables of the run and the action's inputs as INPUT_* variables
    (see action.yml); never takes text from the event on its command line.
    """
    from reconciler.github.action import run_action

    sys.exit(run_action(obj.project_dir, os.environ))


cli.add_command(test_command)
cli.add_command(execute)
cli.add_command(query)
cli.add_command(state)
cli.add_command(doctor_command)
cli.add_command(refresh_command)
cli.add_command(destroy_command)
cli.add_command(rollback_command)
cli.add_command(spark_group)
cli.add_command(env_group)


def main() -> None:
    one_shot_process()  # this process ends with its command (`plan.planner`)
    raise_on_sigterm()
    end_without_teardown()
    try:
        cli(prog_name="reconcile")
    except SystemExit as ended:  # click ends every command so, a success too
        ending_with(ended.code)
        raise
