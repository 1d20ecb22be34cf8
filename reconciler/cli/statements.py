"""`reconcile execute` and `reconcile query`: SQL typed at the terminal against one
pipeline's committed state (`statements`). Registered by `cli.py`; the engine layer is
imported when a command runs."""

from __future__ import annotations

import click

from reconciler.cli.context import CliContext, console, outcomes_json, pass_cli
from reconciler.cli.options import (
    LOCK_TIMEOUT,
    backend_option,
    engine_options,
    json_option,
    lock_option,
)


@click.command()
@click.option("--pipeline", "-p", required=True, help="The pipeline whose table changes.")
@click.argument("sql")
@lock_option(LOCK_TIMEOUT)
@backend_option
@engine_options
@json_option
@pass_cli
def execute(obj: CliContext, pipeline: str, sql: str, lock_timeout: float,
            backend_url: str | None, spark_master: str | None, spark_remote: str | None) -> None:
    """Insert rows into a table (INSERT INTO t VALUES ... | SELECT ...) or delete them
    (DELETE FROM t WHERE ...), then run a step."""
    from reconciler.desired.settings.project import load_project
    from reconciler.desired.workspace import select_pipelines
    from reconciler.operations.engine import Engine
    from reconciler.operations.statements import execute_statement
    from reconciler.operations.step_failures import cleared
    from reconciler.state.reader import open_backend

    project = load_project(obj.project_dir)
    select_pipelines(project, pipeline)
    backend = open_backend(project, backend_url, lock_timeout=lock_timeout)
    engine = Engine(project, master=spark_master, remote=spark_remote,
                    report=obj.progress(), debug=obj.debug)
    outcome, _ = execute_statement(project, backend, engine, pipeline, sql)
    cleared(backend, pipeline)
    if obj.as_json:
        obj.emit(outcomes_json([outcome]))
    else:
        click.echo(outcome.message)


@click.command()
@click.option("--pipeline", "-p", required=True, help="The pipeline to query.")
@click.argument("sql")
@click.option("--format", "output_format", type=click.Choice(["table", "json", "csv"]),
              default="table", show_default=True,
              help="json: an array of row objects (decimals as strings, dates in ISO 8601).")
@backend_option
@engine_options
@pass_cli
def query(obj: CliContext, pipeline: str, sql: str, output_format: str,
          backend_url: str | None, spark_master: str | None, spark_remote: str | None) -> None:
    """Query materialized tables and views at their committed versions."""
    from reconciler.cli.query_output import print_rows
    from reconciler.desired.settings.project import load_project
    from reconciler.desired.workspace import select_pipelines
    from reconciler.engine.spark.query_rows import python_rows
    from reconciler.operations.engine import Engine
    from reconciler.operations.statements import query_pipeline
    from reconciler.state.reader import open_backend

    project = load_project(obj.project_dir)
    select_pipelines(project, pipeline)
    backend = open_backend(project, backend_url)
    engine = Engine(project, master=spark_master, remote=spark_remote,
                    report=obj.progress(), debug=obj.debug)
    with query_pipeline(backend, engine, pipeline, sql) as frame:
        # The rows are what this command prints, so they come to this process, but streamed
        # a partition at a time and never held whole. Results too large for a terminal
        # belong in a view with an output connector, which the executors write.
        print_rows(frame.columns, python_rows(frame),  # printed rows: one partition at a time
                   output_format, console)
