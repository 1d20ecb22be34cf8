"""`reconcile state`: the state backend read and repaired by hand (show, history, gc,
force-unlock, rm). Registered by `cli.py`; what it loads, it loads when a command runs."""

from __future__ import annotations

import json

import click

from reconciler.cli.context import CliContext, pass_cli
from reconciler.cli.options import LOCK_TIMEOUT, backend_option, json_option, lock_option
from reconciler.support.errors import ReconcileError
from state_backends import StateBackend, VersionedDocument


@click.group()
def state() -> None:
    """Inspect the state backend, release stuck locks, forget objects."""


def _backend(obj: CliContext, backend_url: str | None) -> StateBackend:
    """The project's state backend (`--backend` over reconcile.yaml), loaded when asked."""
    from reconciler.desired.settings.project import load_project
    from reconciler.state.reader import open_backend

    return open_backend(load_project(obj.project_dir), backend_url)


def _deployed(backend: StateBackend, pipeline: str) -> VersionedDocument:
    """The pipeline's committed manifest; an unknown pipeline is an error, as everywhere."""
    stored = backend.read_manifest(pipeline)
    if stored is None:
        raise ReconcileError(f"pipeline '{pipeline}' has no manifest in {backend.url}")
    return stored


@state.command("show")
@click.option("--pipeline", "-p", required=True, help="The pipeline.")
@backend_option
@pass_cli
def state_show(obj: CliContext, pipeline: str, backend_url: str | None) -> None:
    """Print the committed manifest."""
    click.echo(json.dumps(_deployed(_backend(obj, backend_url), pipeline).document, indent=2,
                          sort_keys=True))


@state.command("history")
@click.option("--pipeline", "-p", required=True, help="The pipeline.")
@backend_option
@json_option
@pass_cli
def state_history(obj: CliContext, pipeline: str, backend_url: str | None) -> None:
    """List the committed serials with their status and time."""
    from reconciler.cli.status import history_expectations

    backend = _backend(obj, backend_url)
    _deployed(backend, pipeline)
    documents = {serial: backend.read_history(pipeline, serial)
                 for serial in backend.list_history(pipeline)}
    if obj.as_json:
        obj.emit({"pipeline": pipeline, "history": [
            {"serial": serial, "status": document.get("status"),
             "updated_at": document.get("updated_at"), "git_sha": document.get("git_sha"),
             "expectations": (document.get("last_step") or {}).get("expectations") or {}}
            for serial, document in documents.items()]})
        return
    for serial, document in documents.items():
        click.echo(f"{serial:>6}  {document.get('status', '?'):<17} "
                   f"{document.get('updated_at', '')}  {document.get('git_sha') or ''}"
                   f"{history_expectations(document)}")


@state.command("gc")
@click.option("--pipeline", "-p", help="Only this pipeline (default: all deployed).")
@click.option("--dry-run", is_flag=True, help="Print what would be removed; remove nothing.")
@backend_option
@json_option
@pass_cli
def state_gc(obj: CliContext, pipeline: str | None, dry_run: bool,
             backend_url: str | None) -> None:
    """Delete files no retained manifest can read (the pass every commit runs)."""
    from reconciler.desired.settings.project import load_project
    from reconciler.state.reader import open_backend

    project = load_project(obj.project_dir)
    backend = open_backend(project, backend_url)
    if pipeline:
        _deployed(backend, pipeline)
    names = [pipeline] if pipeline else backend.list_pipelines()
    from reconciler.operations.commit import collect_garbage  # the engine layer: pyspark

    removed = {}
    for name in names:
        with backend.locked(name, "gc"):
            done = collect_garbage(project, backend, name, dry_run=dry_run, strict=True)
        files, size = (list(done.files), done.bytes) if done else ([], 0)
        removed[name] = {"files": files, "bytes": size}
        if obj.as_json:
            continue
        for path in (done.files if done and dry_run else []):
            click.echo(f"  {path}")
        verb = "would remove" if dry_run else "removed"
        click.echo(f"{name}: {verb} {len(files)} file(s), {size:,} bytes")
    if obj.as_json:
        obj.emit({"dry_run": dry_run, "pipelines": removed})


@state.command("force-unlock")
@click.argument("lock_id")
@click.option("--pipeline", "-p", required=True, help="The locked pipeline.")
@backend_option
@pass_cli
def state_force_unlock(obj: CliContext, lock_id: str, pipeline: str,
                       backend_url: str | None) -> None:
    """Release a stuck lock, given the id its holder reported."""
    backend = _backend(obj, backend_url)
    backend.force_unlock(pipeline, lock_id)
    click.echo(f"{pipeline}: lock {lock_id} released")


@state.command("rm")
@click.argument("objects", nargs=-1, required=True)
@click.option("--pipeline", "-p", required=True, help="The pipeline whose manifest forgets them.")
@lock_option(LOCK_TIMEOUT)
@backend_option
@json_option
@pass_cli
def state_rm(obj: CliContext, objects: tuple[str, ...], pipeline: str, lock_timeout: float,
             backend_url: str | None) -> None:
    """Forget objects of the committed manifest, their data untouched: plan adds them again.

    OBJECTS are tables, views or connectors: NAME, or table.NAME, view.NAME, connector.NAME.
    Committed as a new serial under the pipeline's lock; a forgotten table's or view's
    connectors are forgotten with it."""
    from reconciler.desired.settings.project import load_project
    from reconciler.operations.destroy import forget_objects
    from reconciler.state.reader import open_backend

    project = load_project(obj.project_dir)
    backend = open_backend(project, backend_url, lock_timeout=lock_timeout)
    committed, forgotten = forget_objects(project, backend, pipeline, objects)
    if obj.as_json:
        obj.emit({"pipeline": pipeline, "serial": committed.serial, "forgotten": forgotten})
        return
    click.echo(f"{pipeline}: forgot {', '.join(forgotten)} (serial {committed.serial}); "
               "their data is untouched")
