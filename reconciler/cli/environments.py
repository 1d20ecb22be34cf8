"""`reconcile env create|update|destroy|list`: pull-request environments from a laptop.

Flags in, calls out: what an environment is and how it is built is
`operations.environments`. Registered by `cli.py`; it loads what it uses when it runs, and
`list` starts no Spark.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import click

from reconciler.cli.context import CliContext, pass_cli
from reconciler.cli.options import (
    LOCK_TIMEOUT,
    Command,
    backend_option,
    engine_options,
    json_option,
    lock_option,
)
from reconciler.support.errors import ReconcileError

name_option = click.option("--name", required=True,
                           help="The environment (lower-case letters, digits, _: pr_42).")
pipeline_option = click.option("--pipeline", "-p", required=True, help="The pipeline.")


@click.group("env")
def env_group() -> None:
    """Pull-request environments: a change's views, queryable by name (docs/environments.md)."""


def _build(obj: CliContext, pipeline: str, name: str, existing: bool, lock_timeout: float,
           backend_url: str | None, spark_master: str | None, spark_remote: str | None) -> None:
    from reconciler.desired.workspace import load_programs
    from reconciler.operations.engine import Engine
    from reconciler.operations.environments import build_environment
    from reconciler.state.reader import open_backend

    project, programs = load_programs(obj.project_dir, pipeline)
    backend = open_backend(project, backend_url, lock_timeout=lock_timeout)
    engine = Engine(project, master=spark_master, remote=spark_remote, report=obj.progress(),
                    debug=obj.debug)
    built = build_environment(project, backend, programs[0], name, engine, existing=existing)
    if obj.as_json:
        obj.emit({"pipeline": pipeline, **_described(built.environment),
                  "computed": list(built.computed), "published": built.published})
        return
    click.echo(f"{pipeline}: {built.summary()}")


def build_options(function: Command) -> Command:
    """The options of every command that builds or removes an environment."""
    for option in reversed((pipeline_option, name_option, json_option, lock_option(LOCK_TIMEOUT),
                            backend_option, engine_options, pass_cli)):
        function = option(function)
    return function


@env_group.command("create")
@build_options
def env_create(obj: CliContext, pipeline: str, name: str, lock_timeout: float,
               backend_url: str | None, spark_master: str | None,
               spark_remote: str | None) -> None:
    """Build an environment of the checkout's program: its new and modified views computed
    from production's committed state, every relation a view of `<prefix>_<name>`."""
    _build(obj, pipeline, name, False, lock_timeout, backend_url, spark_master, spark_remote)


@env_group.command("update")
@build_options
def env_update(obj: CliContext, pipeline: str, name: str, lock_timeout: float,
               backend_url: str | None, spark_master: str | None,
               spark_remote: str | None) -> None:
    """Bring an environment to the checkout's program: only what changed since its last build
    is computed, over the same production serial."""
    _build(obj, pipeline, name, True, lock_timeout, backend_url, spark_master, spark_remote)


@env_group.command("destroy")
@build_options
def env_destroy(obj: CliContext, pipeline: str, name: str, lock_timeout: float,
                backend_url: str | None, spark_master: str | None,
                spark_remote: str | None) -> None:
    """Drop an environment's catalog views and database and delete its files (production is
    not touched); none is not an error."""
    from reconciler.desired.settings.project import load_project
    from reconciler.operations.engine import Engine
    from reconciler.operations.environments import destroy_environment
    from reconciler.state.reader import open_backend

    project = load_project(obj.project_dir)
    backend = open_backend(project, backend_url, lock_timeout=lock_timeout)
    engine = Engine(project, master=spark_master, remote=spark_remote, report=obj.progress(),
                    debug=obj.debug)
    gone = destroy_environment(project, backend, pipeline, name, engine)
    if obj.as_json:
        obj.emit({"pipeline": pipeline, "name": name, "destroyed": gone is not None})
        return
    click.echo(f"{pipeline}: environment {name} " + (
        "destroyed" if gone else "does not exist: nothing to do"))


@env_group.command("list")
@click.option("--pipeline", "-p", help="Only this pipeline (default: all deployed).")
@json_option
@backend_option
@pass_cli
def env_list(obj: CliContext, pipeline: str | None, backend_url: str | None) -> None:
    """The environments: database, production serial, relations held, size and age (no
    Spark)."""
    from reconciler.desired.settings.project import load_project
    from reconciler.engine.delta.files import FileStore  # pyarrow, no JVM
    from reconciler.operations.environments import recorded_environments
    from reconciler.state.reader import open_backend

    project = load_project(obj.project_dir)
    backend = open_backend(project, backend_url)
    if pipeline and backend.read_manifest(pipeline) is None:
        raise ReconcileError(f"pipeline '{pipeline}' has no manifest in {backend.url}")
    rows = []
    for name in [pipeline] if pipeline else backend.list_pipelines():
        for environment in recorded_environments(backend, name).values():
            size = sum(size for _, size, _ in FileStore.for_root(environment.root).files(
                environment.root))
            rows.append({"pipeline": name, **_described(environment), "bytes": size,
                         "age_seconds": _age(environment.created)})
    if obj.as_json:
        obj.emit({"environments": rows})
        return
    if not rows:
        click.echo("no environments")
    for row in rows:
        click.echo(f"{row['pipeline']}/{row['name']}: {row['database']}, production serial "
                   f"{row['base_serial']}, holds {', '.join(row['relations']) or 'nothing'}; "
                   f"{row['bytes']:,} bytes, {_shown_age(row['age_seconds'])} old")


def _described(environment: Any) -> dict[str, Any]:
    return {"name": environment.name, "database": environment.database,
            "base_serial": environment.base_serial, "root": environment.root,
            "relations": sorted(environment.relations), "created": environment.created,
            "updated": environment.updated}


def _age(created: str) -> float:
    try:
        return max(0.0, time.time() - datetime.fromisoformat(created).timestamp())
    except ValueError:
        return 0.0


def _shown_age(seconds: float) -> str:
    from state_backends.locks import format_age

    return format_age(seconds)
