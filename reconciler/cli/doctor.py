"""`reconcile doctor`: what this machine and project need to run, checked one line each.

Kept apart from `cli.py` (which registers it). It starts no JVM and writes nothing: Java
is asked its version, the jar cache is looked at, the state backend is read (its list of
pipelines) and the storage is looked up (a local folder's nearest existing parent is
writable; an S3 bucket answers). Each check prints `ok` or `fix` with what to do; any
`fix` makes the exit code 1, so a set-up script can stop on it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import click

from reconciler.cli.context import CliContext, pass_cli
from reconciler.cli.options import json_option
from reconciler.support.errors import ReconcileError, private_message
from state_backends import StateBackendError

if TYPE_CHECKING:  # the CLI's `--help` imports this module: project files load when asked
    from reconciler.desired.settings.project import Project

Check = Callable[["Project"], str]
"""A check returns what it found, or raises `NeedsFix` with what to do."""


class NeedsFix(Exception):
    """A check's one line saying what is wrong and how to fix it."""


def check_java(project: Project) -> str:
    from reconciler.engine.spark.java import require_java

    if project.settings.spark.remote:
        return "not needed: Spark runs behind Spark Connect"
    try:
        return f"Java {require_java()}"
    except ReconcileError as error:
        raise NeedsFix(str(error)) from None


def check_writer(project: Project) -> str:
    """Which Delta writer embedded Spark would use, from the jar cache (no JVM started)."""
    from reconciler.engine.spark.jars import delta_jars, needs_s3a, s3a_jars

    settings = project.settings.spark
    if settings.remote or (settings.master and not settings.master.startswith("local")):
        return "the cluster's own Delta Lake (its set-up gives the jars)"
    fetch = "run `python -m reconciler.engine.spark.jars --project .` (needs Maven: `mvn`)"
    forced = os.environ.get("RECONCILE_DELTA_WRITER", "auto")
    if needs_s3a(project.settings.storage) and s3a_jars() is None:
        raise NeedsFix(f"storage {project.settings.storage} needs S3A's jars: {fetch}")
    if forced == "delta-rs":
        return "delta-rs (RECONCILE_DELTA_WRITER=delta-rs)"
    if delta_jars() is None:
        raise NeedsFix(f"Delta Lake's jars are not fetched, so the delta-rs fallback would "
                       f"write the tables: {fetch}" + ("" if shutil.which("mvn") else
                                                       "; Maven is not installed"))
    return "Delta Lake's own writer (its jars are fetched)"


def check_backend(project: Project) -> str:
    from reconciler.state.reader import open_backend

    try:
        backend = open_backend(project)
        pipelines = backend.list_pipelines()
    except (ReconcileError, StateBackendError) as error:
        raise NeedsFix(f"{project.settings.backend}: {private_message(error)}") from None
    return f"{project.settings.backend} answers ({len(pipelines)} pipeline(s) deployed)"


def check_storage(project: Project) -> str:
    storage = project.settings.storage
    parsed = urlparse(storage)
    if parsed.scheme in ("s3", "s3a"):
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            boto3.client("s3").head_bucket(Bucket=parsed.netloc)
        except (BotoCoreError, ClientError) as error:
            raise NeedsFix(f"{storage}: bucket {parsed.netloc} does not answer "
                           f"({type(error).__name__}); check the AWS_* variables") from None
        return f"{storage}: bucket {parsed.netloc} answers"
    if parsed.scheme and len(parsed.scheme) > 1:
        return f"{storage}: reached by Spark's own file system (not checked here)"
    folder = Path(project.resolve(storage))
    existing = next(parent for parent in (folder, *folder.parents) if parent.exists())
    if not os.access(existing, os.W_OK):
        raise NeedsFix(f"{folder}: {existing} is not writable")
    return f"{folder} (writable)"


CHECKS: dict[str, Check] = {"java": check_java, "writer": check_writer,
                            "backend": check_backend, "storage": check_storage}


@click.command("doctor")
@json_option
@pass_cli
def doctor_command(obj: CliContext) -> None:
    """Check Java, Delta's jars and writer, the state backend and the storage."""
    from reconciler.desired.settings.project import load_project

    project = load_project(obj.project_dir)
    checks: dict[str, dict[str, Any]] = {}
    for name, check in CHECKS.items():
        try:
            checks[name] = {"ok": True, "detail": check(project)}
        except NeedsFix as fix:
            checks[name] = {"ok": False, "detail": str(fix)}
        if not obj.as_json:
            click.echo(f"{'ok ' if checks[name]['ok'] else 'fix'}  {name}: "
                       f"{checks[name]['detail']}")
    if obj.as_json:
        obj.emit({"ok": all(c["ok"] for c in checks.values()), "checks": checks})
    if not all(c["ok"] for c in checks.values()):
        raise SystemExit(1)
