"""`reconcile spark start|stop|status`: a warm local Spark the project's commands share.

Kept apart from `cli.py` (which registers it); the server itself is
`engine.spark.warm`, imported when a command runs so `reconcile --help` stays light.
`start` waits until the server answers; `execute`, `query`, `run`, `apply`, `approve`
and `plan --preview` then connect to it instead of starting a JVM each.
"""

from __future__ import annotations

import click

from reconciler.cli.context import CliContext, pass_cli
from reconciler.cli.options import Duration, json_flag


@click.group("spark")
def spark_group() -> None:
    """A warm local Spark (a Spark Connect server on 127.0.0.1) that this project's
    commands use instead of starting a JVM each."""


@spark_group.command()
@click.option("--timeout", type=Duration(), default="180s", show_default=True,
              help="How long to wait for the server to answer.")
@pass_cli
def start(obj: CliContext, timeout: float) -> None:
    """Start the project's warm Spark in the background (nothing to do if it runs)."""
    from reconciler.desired.settings.project import load_project
    from reconciler.engine.spark.warm import start_server
    from reconciler.operations.engine import reaches_kafka, reaches_s3

    project = load_project(obj.project_dir)
    server, already = start_server(project.root, project.settings.spark,
                                   s3a=reaches_s3(project), kafka=reaches_kafka(project),
                                   timeout=timeout)
    said = "already running" if already else "started"
    click.echo(f"warm Spark {said} at {server.url} (pid {server.pid}; log {server.log})")


@spark_group.command()
@pass_cli
def stop(obj: CliContext) -> None:
    """Stop the project's warm Spark (SIGTERM, then SIGKILL after a grace period)."""
    from reconciler.engine.spark.warm import stop_server

    server = stop_server(obj.project_dir.resolve())
    click.echo(f"warm Spark stopped (pid {server.pid})" if server else
               "no warm Spark was running")


@spark_group.command()
@json_flag("running; pid, url, uptime_seconds and log when it runs")
@pass_cli
def status(obj: CliContext) -> None:
    """Whether the project's warm Spark runs: its pid, URL and uptime."""
    from reconciler.engine.spark.warm import describe, running_server

    shown = describe(running_server(obj.project_dir.resolve()))
    if obj.as_json:
        obj.emit(shown)
    elif not shown["running"]:
        click.echo("warm Spark: not running")
    else:
        minutes, seconds = divmod(int(shown["uptime_seconds"]), 60)
        up = f"{minutes // 60}h {minutes % 60:02d}m {seconds:02d}s"
        click.echo(f"warm Spark: running at {shown['url']} (pid {shown['pid']}, up {up}; "
                   f"log {shown['log']})")
