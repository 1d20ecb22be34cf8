"""Retention: storage that does not grow with the number of steps.

Every step writes new files (appends, view rewrites) and nothing else ever
deletes the old ones, so without this pass a pipeline stepped every few
seconds grows without end. After each commit (and by hand with
`reconcile state gc`), under the pipeline's lock:

* a data file of a table or view is kept when a retained manifest can still
  read it: the version pinned by any of the last `retention.serials` manifests,
  or the table's newest version; so are those versions' deletion vectors and the
  change-data files of the commits after the oldest of them (`deletion_vectors`);
  anything younger than `retention.min_age` is kept too, so a reader that pinned
  an older manifest a moment ago, or a write still on its way to a commit, keeps
  its files. Everything else in the table's folder (files of replaced versions,
  of writes that never committed, Spark's `.crc` and `_SUCCESS` files) is deleted;
* the Delta log is expired up to the newest checkpoint at or before the oldest
  pinned version (a checkpoint is written when ten commits have none), so every
  retained version stays readable and app transactions live on in checkpoints;
* connector checkpoint folders of generations no retained manifest uses, and
  folders of relations no retained manifest has, are deleted.

Quarantine folders and output connectors' files are the user's and are never
touched. Nothing here starts Spark: delta-rs reads the logs, `pyarrow.fs` lists
and deletes, so an idle step stays JVM-free.
"""

from __future__ import annotations

import re
import time
from typing import Any

from reconciler.engine.delta.deletion_vectors import change_data_files, live_files
from reconciler.engine.delta.files import Collected, FileStore
from reconciler.engine.delta.log import open_delta_rs, relative_file, table_uri
from reconciler.engine.delta.versions import DeltaVersion
from reconciler.state.layout import Layout

CHECKPOINT_EVERY = 10
"""Commits after the last checkpoint before this pass writes one."""

_LOG_FILE = re.compile(r"(\d{20})\.(json|crc|checkpoint\.parquet|checkpoint\.\d+\.\d+\.parquet)$")


def collect_garbage(layout: Layout, manifests: list[dict[str, Any]], *, min_age_seconds: float,
                    dry_run: bool = False, now: float | None = None) -> Collected:
    """Delete what none of `manifests` (the retained ones, newest first) can read."""
    cutoff = (time.time() if now is None else now) - min_age_seconds
    done = Collected()
    store = FileStore.for_root(layout.root)
    pinned: dict[str, set[int]] = {}
    generations: dict[str, set[str]] = {}
    for manifest in manifests:
        for state in (manifest.get("relations") or {}).values():
            for table in (state, state.get("state")):
                if isinstance(table, dict):
                    pinned.setdefault(table["path"], set()).add(int(table["version"]))
        for name, state in (manifest.get("connectors") or {}).items():
            if "generation" in state:
                generations.setdefault(name, set()).add(str(state["generation"]))
    for path, versions in pinned.items():
        _collect_table(store, path, versions, cutoff, dry_run, done)
    for kind in ("tables", "views", "state"):
        folder = layout.folder(kind)
        for child in store.children(folder):
            if child not in pinned and store.newest(child) < cutoff:
                store.remove_tree(child, dry_run, done)
    for connector_folder in store.children(layout.folder("connectors")):
        keep = generations.get(connector_folder.rsplit("/", 1)[-1], set())
        for generation in store.children(connector_folder):
            if generation.rsplit("/", 1)[-1] not in keep and store.newest(generation) < cutoff:
                store.remove_tree(generation, dry_run, done)
    return done


def _collect_table(store: FileStore, path: str, versions: set[int], cutoff: float, dry_run: bool,
                   done: Collected) -> None:
    uri = table_uri(path)
    latest_table = open_delta_rs(uri.replace("s3a://", "s3://", 1))
    if latest_table is None:
        return
    latest = latest_table.version()
    live: set[str] = set()
    for version in sorted({*versions, latest}):
        table = latest_table if version == latest else open_delta_rs(
            uri.replace("s3a://", "s3://", 1), version)
        if table is not None:
            live.update(relative_file(uri, file) for file in table.file_uris())
            if DeltaVersion(uri, table).deletion_vectors:
                live.update(live_files(uri, version).vector_files())
    if DeltaVersion(uri, latest_table).change_feed:
        live.update(change_data_files(uri, min(versions | {latest}), latest))
    emptied: set[str] = set()
    for relative, size, modified in store.files(uri):
        if relative.startswith("_delta_log/") or relative in live or modified >= cutoff:
            continue
        store.remove(f"{uri.rstrip('/')}/{relative}", size, dry_run, done)
        if "/" in relative:
            emptied.add(f"{uri.rstrip('/')}/{relative.split('/', 1)[0]}")
    for folder in sorted(emptied):  # a write's folder whose files are all gone
        if not dry_run and not store.files(folder):
            store.remove_tree(folder, dry_run, Collected())
    _expire_log(store, latest_table, min(versions | {latest}), cutoff, dry_run, done)


def _expire_log(store: FileStore, table: Any, oldest_pinned: int, cutoff: float, dry_run: bool,
                done: Collected) -> None:
    """Drop log entries older than the newest checkpoint every retained version can start from."""
    uri = table_uri(table.table_uri)
    log = f"{uri.rstrip('/')}/_delta_log"
    entries = [(int(match.group(1)), match.group(2), relative, size, modified)
               for relative, size, modified in store.files(log)
               if (match := _LOG_FILE.search(relative))]
    checkpoints = sorted({version for version, kind, *_ in entries if "checkpoint" in kind})
    latest = table.version()
    due = not checkpoints or latest - checkpoints[-1] >= CHECKPOINT_EVERY
    if due and not dry_run and latest > 0:
        table.create_checkpoint()
    start = max((version for version in checkpoints if version <= oldest_pinned), default=None)
    if start is None:
        return
    for version, _kind, relative, size, modified in entries:
        if version < start and modified < cutoff:
            store.remove(f"{log}/{relative}", size, dry_run, done)
