"""Compaction of the delta-rs writer's small files.

A step every few seconds appends a small file each time, and many small files
slow every read. Delta's own `OPTIMIZE` is the tool where delta-spark writes;
this is its counterpart for tables the delta-rs writer keeps.
"""

from __future__ import annotations

import uuid
from urllib.parse import unquote

from reconciler.engine.delta.commit import CommitOf, clustered, commit_files, write_files
from reconciler.engine.delta.log import (
    PathLike,
)
from reconciler.engine.delta.storage import DeltaStorage

SMALL_FILE_BYTES = 8 * 1024 * 1024
COMPACT_AFTER = 16
TARGET_FILE_BYTES = 128 * 1024 * 1024
"""More than 16 files under 8 MiB are rewritten into ~128 MiB files."""


def compact(storage: DeltaStorage, path: PathLike) -> int | None:
    """Rewrite many small files into few, same rows, in one `dataChange=false` commit.

    Many small appends (a step every few seconds) leave many small files, which
    slow every read. Once more than `COMPACT_AFTER` files are under
    `SMALL_FILE_BYTES`, Spark rewrites them into files of about `TARGET_FILE_BYTES`,
    each a sorted range of the first column (usually the key): a scan filtered on the
    keys a step touched skips the other files, and deleting old keys rewrites few.
    Returns the new version, or None when there was nothing to do (or delta-spark
    writes this table: Delta's own OPTIMIZE is the tool there).
    """
    if not storage.writer.compacts:
        return None
    latest = storage.at(path)
    if latest.needs_delta_reader or latest.deletion_vectors:  # files are not the rows
        return None
    actions = latest.add_actions()
    small = [(file, size) for file, size in zip(actions.column("path").to_pylist(),
                                                actions.column("size_bytes").to_pylist(),
                                                strict=True) if size < SMALL_FILE_BYTES]
    if len(small) <= COMPACT_AFTER:
        return None
    uri, schema = latest.uri, storage.stored_schema(latest)
    root = uri.rstrip("/")
    frame = storage.scan([f"{root}/{unquote(file)}" for file, _ in small], schema)
    pieces = max(1, -(-sum(size for _, size in small) // TARGET_FILE_BYTES))
    files = write_files(storage.spark, clustered(frame, pieces), uri, schema)
    tag, before = uuid.uuid4().hex, latest.version
    commit_files(uri, files, schema, CommitOf(tag, replaces=small),
                 table=latest.table, storage_options=storage.storage_options(uri))
    return storage.rs_commit_version(uri, tag, before)
