"""Drift: a pipeline's Delta table changed by someone other than the reconciler, or a file
of the version its manifest pins gone, found from the Delta log alone (delta-rs, no JVM:
`plan` and `status` ask too).

Every commit the engine makes is tagged: delta-rs commits carry `COMMIT_TAG` in their
commit info, Delta's Spark writer's a `userMetadata` of one write id (32 hexadecimal
digits, `own_commit`). Past the version a manifest pins, a table may hold commits of a run
that stopped before its manifest (the engine's own: the next run discards or adopts them,
as it always did) and anything else: a `DELETE` run by hand on a view's table, an append
from a notebook, an `ALTER`. Those are drift. So is a data file of the pinned version that
is gone (a `VACUUM` with a short retention, a deleted folder): the pinned version cannot be
read any more.

Terraform shows drift in every plan; so do `plan` and `status` here, per relation, and a
step does what the pipeline's `on_drift` says (`operations.drift`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from reconciler.engine.delta.files import FileStore
from reconciler.engine.delta.log import open_delta_rs, relative_file, table_uri
from reconciler.engine.delta.tables import COMMIT_TAG

_WRITE_ID = re.compile(r"[0-9a-f]{32}")
"""A write id (`uuid4().hex`), as the engine's Spark commits carry it in `userMetadata`."""


@dataclass(frozen=True)
class Drift:
    """What is wrong with one relation's table, for a line of `plan` or `status`."""

    relation: str
    version: int | None  # the first foreign commit; None: the table or its files are gone
    reason: str

    def document(self) -> dict[str, Any]:
        return {"relation": self.relation, "version": self.version, "reason": self.reason}


def own_commit(entry: Mapping[str, Any]) -> bool:
    """Whether a commit's info (its log entry's `commitInfo`) says the engine made it."""
    metadata = entry.get("userMetadata")
    return COMMIT_TAG in entry or (isinstance(metadata, str)
                                   and _WRITE_ID.fullmatch(metadata) is not None)


def committed_past(pinned: Mapping[str, tuple[str, int]]) -> list[str]:
    """The relations (name: (path, pinned version)) whose log has a commit past the pinned
    version: one existence check each, side by side (on an object store, a request each:
    the step's usual answer is none, and then no log is read)."""
    if not pinned:
        return []
    store = FileStore.for_root(table_uri(next(iter(pinned.values()))[0]))

    def probe(item: tuple[str, tuple[str, int]]) -> str | None:
        name, (path, version) = item
        return name if store.exists(f"{table_uri(path)}/_delta_log/{version + 1:020d}.json") \
            else None

    with ThreadPoolExecutor(max_workers=min(16, len(pinned))) as pool:
        return [name for name in pool.map(probe, pinned.items()) if name is not None]


def table_drift(relation: str, path: str, pinned: int, *, files: bool = True,
                storage_options: Mapping[str, str] | None = None) -> Drift | None:
    """The drift of one relation's table from its pinned version, or None; with `files`,
    the pinned version's files are looked for too (one listing of the table's folder)."""
    uri = table_uri(path)
    table = open_delta_rs(uri, None, storage_options)
    if table is None:
        return Drift(relation, None, "its Delta table is gone")
    latest = table.version()
    if latest < pinned:
        return Drift(relation, None, f"its Delta log ends at version {latest}, before the "
                     f"pinned {pinned} (the table was replaced)")
    store = FileStore.for_root(uri) if latest > pinned else None
    for version in range(pinned + 1, latest + 1):
        assert store is not None
        entry = _commit_info(store, uri, version)
        if not own_commit(entry):
            operation = entry.get("operation") or "a commit"
            return Drift(relation, version, f"version {version} ({operation}) was written "
                         "outside the reconciler")
    missing = _missing_files(uri, pinned, storage_options) if files else 0
    if missing:
        return Drift(relation, None, f"{missing} data file(s) of the pinned version {pinned} "
                     "are gone (vacuumed or deleted)")
    return None


def _commit_info(store: FileStore, uri: str, version: int) -> Mapping[str, Any]:
    """The commit info of one version, read from its log entry by the file store (not
    delta-rs's `history`, whose Python binding keeps the interpreter's lock while it lists
    the log: an S3 endpoint served by the same process, as in tests, could never answer)."""
    text = store.read_bytes(f"{uri}/_delta_log/{version:020d}.json").decode()
    for line in text.splitlines():
        action = json.loads(line) if line.strip() else {}
        if "commitInfo" in action:
            info: Mapping[str, Any] = action["commitInfo"]
            return info
    return {}


def _missing_files(uri: str, pinned: int, storage_options: Mapping[str, str] | None) -> int:
    """How many data files of version `pinned` are not in the table's folder (one listing)."""
    table = open_delta_rs(uri, pinned, storage_options)
    assert table is not None  # the latest version opened: so does an earlier one
    wanted = {relative_file(uri, file) for file in table.file_uris()}
    if not wanted:
        return 0
    present = {relative for relative, _, _ in FileStore.for_root(uri).files(uri)}
    return len(wanted - present)
