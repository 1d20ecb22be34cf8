"""A pipeline's end: `reconcile destroy` (its data and state go) and `reconcile state rm`
(objects forgotten by its manifest, their data left alone).

A destroy works from the committed manifest alone, so it removes a pipeline whose folder
left the project as well as one still in it, and it removes only what lies under the
pipeline's own folder of the storage root: every path is checked against the layout when
the manifest is read (`Manifest.resolved`), and again here against that folder, before
anything is deleted. A manifest that names a path anywhere else (a hostile or hand-edited
one) stops it before the first deletion.

The order makes an interrupted destroy one that running it again finishes. Under the
pipeline's lock, a manifest marked as being destroyed is committed first (status
`Failed`, so no step runs on half-deleted tables and `status` says what to do); then the
Delta folders and checkpoints go, each deletion idempotent; then the backend's objects,
the manifest last but the lock (`StateBackend.delete_state`). Until the manifest goes,
`destroy` finds the pipeline again, and its deletions of what is already gone do nothing.

A pipeline still in the project whose pipeline.yaml says `publish:` also has its catalog
views dropped, right after the mark: those carrying its manifest's lineage, never another
project's of the same pipeline name (`engine/publish.py`); only then does Spark start.

`state rm` commits a new manifest serial without the objects named: the manifest is the
only commit point, so they are forgotten at once and entirely, and the next plan shows
them as added again (an apply then makes them anew where the layout puts them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from reconciler.desired.settings.project import Project, load_pipeline_spec
from reconciler.state.layout import Layout
from reconciler.state.manifest import Manifest, Status, utc_now
from reconciler.state.reader import pipeline_layout, read_manifest
from reconciler.support.errors import ReconcileError
from reconciler.support.locations import is_url
from state_backends import StateBackend, StateBackendError


@dataclass(frozen=True)
class Doomed:
    """One location a destroy deletes: a table's or view's Delta folder, a maintained
    view's state table, an input connector's checkpoint, or the pipeline's whole folder."""

    kind: str  # table | view | state | connector | folder
    name: str
    path: str

    def document(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name, "path": self.path}


@dataclass(frozen=True)
class DestroyPlan:
    """What a destroy of one pipeline removes, and what it leaves, shown before it asks."""

    pipeline: str
    lineage: str
    serial: int
    status: str
    folder: str | None  # the pipeline's folder in the project; None when it is gone
    storage: str  # the pipeline's own folder under the storage root
    state: str  # where the backend keeps its manifest, history and lock
    history: int  # committed serials kept in the backend's history
    doomed: tuple[Doomed, ...]
    kept: tuple[str, ...]  # locations outside the storage root a connector reads or writes
    published: str | None = None  # the catalog database its views are dropped from

    @property
    def in_project(self) -> bool:
        return self.folder is not None

    def warnings(self) -> list[str]:
        if not self.in_project:
            return []
        return [f"pipeline '{self.pipeline}' is still in the project ({self.folder}): the "
                "next `reconcile apply` deploys it again, empty; delete its folder to keep "
                "it gone"]

    def document(self) -> dict[str, Any]:
        return {"pipeline": self.pipeline, "lineage": self.lineage, "serial": self.serial,
                "status": self.status, "in_project": self.in_project,
                "storage": self.storage, "state": self.state, "history": self.history,
                "remove": [doomed.document() for doomed in self.doomed],
                "published": self.published,
                "kept": list(self.kept), "warnings": self.warnings()}

    def lines(self) -> list[str]:
        """The plan as a person reads it before confirming, Terraform's `-` per object."""
        where = ("its folder is still in the project" if self.in_project
                 else "its folder is gone from the project")
        shown = [f"Destroy pipeline {self.pipeline} (serial {self.serial}, status "
                 f"{self.status}; {where})"]
        for doomed in self.doomed:
            label = "everything under" if doomed.kind == "folder" else \
                f"{doomed.kind} {doomed.name}"
            shown.append(f"  - {label}  {doomed.path}")
        if self.published is not None:
            shown.append(f"  - its views in catalog database {self.published} (those "
                         "carrying its lineage)")
        shown.append(f"  - state: the manifest, {self.history} history entries and the lock "
                     f"in {self.state}")
        shown += [f"  kept: {kept}" for kept in self.kept]
        shown += [f"  warning: {warning}" for warning in self.warnings()]
        shown.append(f"Plan: destroy {self.pipeline}: {len(self.doomed)} location(s) and its "
                     "state.")
        return shown


def check_policy(project: Project, pipeline: str, override: str | None) -> None:
    """Refuse a destroy that the pipeline's `bootstrap_policy: reject` forbids (a pipeline
    held to no change is held to this one too); `override` is `--bootstrap-policy`. A
    pipeline whose folder is gone has no policy but the override."""
    policy = override
    folder = project.pipeline_dirs.get(pipeline)
    if policy is None and folder is not None:
        policy = load_pipeline_spec(folder)[0].bootstrap_policy
    if policy == "reject":
        raise ReconcileError(f"pipeline '{pipeline}' has bootstrap_policy 'reject': refusing "
                             "to destroy it")


def plan_destroy(project: Project, backend: StateBackend, pipeline: str) -> DestroyPlan | None:
    """What destroying `pipeline` removes, from its committed manifest (paths checked); None
    when it has none (`finish_destroyed`)."""
    layout = pipeline_layout(project, pipeline)
    manifest, _ = read_manifest(backend, pipeline, layout)
    if manifest is None:
        return None
    environments = sorted(backend.read_environments(pipeline))
    if environments:  # they read its state, and only their own records find their files
        raise ReconcileError(f"pipeline '{pipeline}' has pull-request environments "
                             f"({', '.join(environments)}): destroy them first (reconcile "
                             f"env destroy -p {pipeline} --name {environments[0]})")
    return _plan(project, backend, manifest, layout)


def finish_destroyed(backend: StateBackend, pipeline: str) -> str:
    """A pipeline without a manifest (destroyed already, or never deployed): nothing to
    destroy, so a cleanup script may run destroy twice. A lock a destroy stopped at its last
    step left is removed, through the lock itself (one whose run still works is waited for
    or refused, and a manifest committed meanwhile is left alone)."""
    nothing = f"{pipeline}: nothing to destroy (no committed state in {backend.url})"
    if backend.read_lock(pipeline) is None:
        return nothing
    lock = backend.acquire_lock_waiting(pipeline, "destroy")
    if backend.read_manifest(pipeline) is not None:
        backend.release_lock(pipeline, lock.id)
        raise ReconcileError(f"pipeline '{pipeline}' was deployed meanwhile: run destroy "
                             "again to see what it would remove")
    backend.delete_state(pipeline, lock.id)
    return f"{nothing}; the lock a stopped destroy left is removed"


def _plan(project: Project, backend: StateBackend, manifest: Manifest,
          layout: Layout) -> DestroyPlan:
    home = pipeline_folder(layout)
    doomed: list[Doomed] = []
    for name, record in sorted(manifest.relations.items()):
        doomed.append(Doomed(record.kind, name, record.path))
        if record.state is not None:
            doomed.append(Doomed("state", name, record.state.path))
    for name, connector in sorted(manifest.connectors.items()):
        if connector.checkpoint is not None:
            doomed.append(Doomed("connector", name, connector.checkpoint))
    doomed.append(Doomed("folder", manifest.pipeline, home))
    for each in doomed:  # the layout held them already; a second look costs nothing
        if each.path != home and not each.path.startswith(home + "/"):
            raise ReconcileError(f"pipeline '{manifest.pipeline}': {each.kind} '{each.name}' "
                                 f"is at {each.path!r}, outside {home!r}: refusing to destroy")
        _refuse_links(layout.root, each.path, manifest.pipeline)
    kept = tuple(f"{entry.get('direction', '')} connector {name}'s "
                 f"{'source' if entry.get('direction') == 'input' else 'sink'} "
                 f"{entry.get('path') or 'on Kafka'} (outside the storage)"
                 for name, entry in sorted((manifest.program.get("connectors") or {}).items())
                 if isinstance(entry, dict))
    folder = project.pipeline_dirs.get(manifest.pipeline)
    publish = None if folder is None else load_pipeline_spec(folder)[0].publish
    database = manifest.published if publish is None else publish.database
    if publish is not None:
        _check_lineage(layout, manifest, publish.database)
    elif database is not None and not _lineage_recorded(layout, manifest):
        # Only the manifest names this database, and a forged lineage makes it untrusted:
        # the destroy goes on without the views, as its refusal above advises.
        kept += (f"views in catalog database {database} (the manifest's lineage is not the "
                 "one recorded in storage: none are dropped by it)",)
        database = None
    return DestroyPlan(
        pipeline=manifest.pipeline, lineage=manifest.lineage, serial=manifest.serial,
        status=manifest.status, folder=None if folder is None else str(folder),
        storage=home, state=f"{backend.url}/{manifest.pipeline}",
        history=len(backend.list_history(manifest.pipeline)), doomed=tuple(doomed),
        kept=kept, published=database)


def _lineage_recorded(layout: Layout, manifest: Manifest) -> bool:
    """Whether the approval record in storage holds the manifest's lineage (or holds none):
    a writer of the state prefix alone could give the manifest another project's lineage
    (which that project's views show) to have a destroy drop them."""
    from reconciler.engine.approval import approved_lineage

    recorded = approved_lineage(layout)
    return recorded is None or recorded == manifest.lineage


def _check_lineage(layout: Layout, manifest: Manifest, database: str) -> None:
    """Refuse to drop views by a lineage the approval record does not hold
    (`_lineage_recorded`)."""
    if not _lineage_recorded(layout, manifest):
        raise ReconcileError(f"pipeline '{manifest.pipeline}': the manifest's lineage is not "
                             "the one recorded in storage (the state backend was written "
                             f"outside reconcile): not dropping views in '{database}' by it; "
                             "remove `publish:` from its pipeline.yaml to destroy it without "
                             "its views")


def _refuse_links(root: str, path: str, pipeline: str) -> None:
    """Refuse a local path that goes through a symbolic link below the storage root (the
    default root is in the project's checkout, where anyone's commit can put one): a
    deletion would follow it out of the pipeline's folder. The root itself may be a link."""
    if is_url(root):
        return
    current = Path(root)
    for part in Path(path).relative_to(root).parts:
        current = current / part
        if current.is_symlink():
            raise ReconcileError(f"pipeline '{pipeline}': {current} is a symbolic link: "
                                 "refusing to destroy through it")


def pipeline_folder(layout: Layout) -> str:
    """`<storage>/<pipeline>`: the folder all of a pipeline's storage paths are under (the
    layout builds it from plain names, so it is always inside the storage root)."""
    return layout.folder("tables").rsplit("/", 1)[0]


def destroy_pipeline(project: Project, backend: StateBackend, shown: DestroyPlan,
                     engine: Any = None) -> None:
    """Carry out a destroy the person approved as `shown`, under the pipeline's lock;
    `engine` (`operations.engine.Engine`) drops its published views, if it has any.

    Refused when the manifest moved on since `shown` was made (another run committed):
    what would go is then not what was approved.
    """
    from reconciler.engine.delta.files import Collected, FileStore  # pyarrow: destroy only

    name = shown.pipeline
    lock = backend.acquire_lock_waiting(name, "destroy")
    try:
        layout = pipeline_layout(project, name)
        manifest, etag = read_manifest(backend, name, layout)
        if manifest is None or (manifest.lineage, manifest.serial) != (shown.lineage,
                                                                      shown.serial):
            found = "no manifest" if manifest is None else f"serial {manifest.serial}"
            raise ReconcileError(f"pipeline '{name}' changed since the destroy plan was made "
                                 f"(serial {shown.serial}, now {found}): run destroy again")
        plan = _plan(project, backend, manifest, layout)
        marked = manifest.next(status=Status.FAILED, status_details={
            "destroying": utc_now(),
            "error": f"being destroyed: run `reconcile destroy -p {name}` to finish"})
        commit_state(project, backend, marked, etag)
        if plan.published is not None and engine is not None:
            from reconciler.operations.publication import unpublish_committed

            unpublish_committed(engine, name, manifest.lineage, plan.published)
        store, done = FileStore.for_root(layout.root), Collected()
        for doomed in plan.doomed:  # the pipeline's folder last: it holds all the others
            try:
                store.remove_tree(doomed.path, dry_run=False, done=done)
            except OSError as error:
                raise ReconcileError(f"pipeline '{name}': cannot delete {doomed.path}: "
                                     f"{error}; run `reconcile destroy -p {name}` again to "
                                     "finish") from error
        backend.delete_state(name, lock.id)  # the manifest, then the lock: the end
    except BaseException as error:
        try:
            backend.release_if_held(name, lock.id)
        except StateBackendError as release_error:
            error.add_note(f"also failed to release the lock: {release_error}")
        raise


def commit_state(project: Project, backend: StateBackend, manifest: Manifest,
                 etag: str | None) -> str:
    """Commit a manifest that only the state changes in (`destroy`'s mark, `state rm`),
    as `operations.commit.commit_manifest` does for the rest: paths relative to the storage
    root, written with compare-and-swap on `etag`. No engine runs, so none is recorded."""
    layout = pipeline_layout(project, manifest.pipeline)
    return backend.write_manifest(manifest.pipeline, manifest.stored_document(layout), etag)


KINDS = ("table", "view", "connector")


def forget_objects(project: Project, backend: StateBackend, pipeline: str,
                   addresses: tuple[str, ...]) -> tuple[Manifest, list[str]]:
    """Commit `pipeline`'s manifest without the objects `addresses` name (`NAME`, or
    `table.NAME`, `view.NAME`, `connector.NAME` where a name is both a relation and a
    connector), their data untouched. A forgotten table's or view's connectors are
    forgotten with it: their offsets mean nothing without its state. Returns the committed
    manifest and what was forgotten, as `kind name`."""
    with backend.locked(pipeline, "state rm"):
        layout = pipeline_layout(project, pipeline)
        manifest, etag = read_manifest(backend, pipeline, layout)
        if manifest is None:
            raise ReconcileError(f"pipeline '{pipeline}' has no committed state in "
                                 f"{backend.url}")
        program = manifest.program
        connectors = dict(program.get("connectors") or {})
        gone: dict[tuple[str, str], None] = {}  # (kind, name), in the order they are said
        for address in addresses:
            kind, name = _address(address, program, connectors)
            gone[kind, name] = None
            if kind != "connector":
                gone.update({("connector", c): None for c, entry in connectors.items()
                             if isinstance(entry, dict) and entry.get("relation") == name})
        sections = {kind: {name: entry for name, entry in (program.get(f"{kind}s") or {})
                           .items() if (kind, name) not in gone} for kind in KINDS}
        relations = {n: r for n, r in manifest.relations.items() if (r.kind, n) not in gone}
        forgotten = replace(
            manifest,
            program={**program, "tables": sections["table"], "views": sections["view"],
                     "connectors": sections["connector"],
                     "order": [n for n in program.get("order") or []
                               if n in sections["table"] or n in sections["view"]]},
            relations=relations,
            connectors={n: c for n, c in manifest.connectors.items()
                        if ("connector", n) not in gone})
        committed = forgotten.next()
        # What is left is the program the operator approves (`engine.approval`).
        from reconciler.engine.approval import record_approval

        record_approval(layout, committed.lineage, committed.serial, committed.program)
        commit_state(project, backend, committed, etag)
    return committed, [f"{kind} {name}" for kind, name in gone]


def _address(address: str, program: dict[str, Any],
             connectors: dict[str, Any]) -> tuple[str, str]:
    """(kind, name) of one `state rm` argument, which must name an object of the program."""
    kind, dot, name = address.partition(".")
    if not dot:
        kind, name = "", address
    elif kind not in KINDS:
        raise ReconcileError(f"'{address}': say table.NAME, view.NAME or connector.NAME")
    found = [each for each in KINDS if (not kind or each == kind)
             and name in (connectors if each == "connector" else program.get(f"{each}s") or {})]
    if not found:
        raise ReconcileError(f"'{address}' is not a table, view or connector of the committed "
                             "manifest (see `reconcile state show`)")
    if len(found) > 1:
        raise ReconcileError(f"'{address}' names both a {found[0]} and a {found[1]}: say "
                             f"{found[0]}.{name} or {found[1]}.{name}")
    return found[0], name
