"""Deletion vectors and change-data files, read from a Delta log without a JVM.

Delta Lake's Spark writer deletes rows by marking them in a *deletion vector*
(a small `deletion_vector_<uuid>.bin` file beside the data) instead of
rewriting the data file, and, on tables with the change data feed, writes the
deleted rows to `_change_data/`. delta-rs lists a version's data files but not
their deletion vectors, and three things here need them:

* a pinned read may scan a version's Parquet files directly only when none of
  them has deleted rows (`deleted_rows`);
* a row count from the log is each file's `numRecords` less its vector's
  cardinality;
* retention must keep the vector files of every retained version and the
  change-data files of the commits after the oldest one (`referenced_files`).

So this module replays the log the way the Delta protocol describes it: the
newest checkpoint at or before the version, then each JSON commit after it,
keeping the `add` actions no `remove` cancelled (an action's key is its path and
its vector's id, so a file whose vector changed is removed and added again in one
commit). Only the log is read: a checkpoint's two columns and a few small JSON
files, never table rows.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from reconciler.engine.delta.files import FileStore
from reconciler.engine.delta.log import table_uri
from reconciler.support.errors import ReconcileError

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_UUID_CHARS = 20
"""A vector file's UUID in `pathOrInlineDv`: 16 bytes in Z85 (Delta's Base85 codec)."""


@dataclass(frozen=True)
class DeletionVector:
    """One `deletionVector` descriptor of an `add` action (Delta protocol)."""

    storage_type: str  # 'u': a file named by UUID, 'p': an absolute path, 'i': inline
    path_or_inline: str
    offset: int | None
    cardinality: int

    @property
    def key(self) -> str:
        return f"{self.storage_type}{self.path_or_inline}@{self.offset}"

    def file(self) -> str | None:
        """The vector's file relative to the table root (absolute for 'p'); None inline."""
        if self.storage_type == "u":
            prefix, encoded = (self.path_or_inline[:-_UUID_CHARS],
                               self.path_or_inline[-_UUID_CHARS:])
            name = f"deletion_vector_{_z85_uuid(encoded)}.bin"
            return f"{prefix}/{name}" if prefix else name
        if self.storage_type == "p":
            return self.path_or_inline
        return None


@dataclass(frozen=True)
class LiveFiles:
    """A version's data files with their deletion vectors (None: no rows deleted)."""

    vectors: dict[str, DeletionVector | None]

    @property
    def deleted_rows(self) -> int:
        return sum(vector.cardinality for vector in self.vectors.values() if vector)

    def vector_files(self) -> set[str]:
        return {file for vector in self.vectors.values() if vector and (file := vector.file())}


def live_files(path: str, version: int) -> LiveFiles:
    """The data files of `version` and their deletion vectors, replayed from the log."""
    uri = table_uri(path)
    log = f"{uri.rstrip('/')}/_delta_log"
    store = FileStore.for_root(uri)
    names = [name for name, _, _ in store.files(log)]
    start, parts = _checkpoint_at_or_before(names, version)
    live: dict[tuple[str, str], DeletionVector | None] = {}
    for part in parts:
        table = store.read_parquet(f"{log}/{part}", ["add.path", "add.deletionVector"])
        columns = table.column_names
        paths = table.column("path").to_pylist() if "path" in columns else []
        vectors = (table.column("deletionVector").to_pylist() if "deletionVector" in columns
                   else [None] * len(paths))
        for file, vector in zip(paths, vectors, strict=True):
            if file is not None:
                descriptor = _vector(vector)
                live[(file, descriptor.key if descriptor else "")] = descriptor
    for commit in range(start + 1, version + 1):
        for action in _actions(store, f"{log}/{commit:020d}.json"):
            for kind in ("add", "remove"):
                if kind in action:
                    descriptor = _vector(action[kind].get("deletionVector"))
                    key = (action[kind]["path"], descriptor.key if descriptor else "")
                    if kind == "add":
                        live[key] = descriptor
                    else:
                        live.pop(key, None)
    return LiveFiles({file: vector for (file, _), vector in live.items()})


def change_data_files(path: str, after: int, latest: int) -> set[str]:
    """The `_change_data/` files the commits after version `after` (up to `latest`) wrote:
    what reading the change feed from `after` on needs. Relative to the table root."""
    uri = table_uri(path)
    log = f"{uri.rstrip('/')}/_delta_log"
    store = FileStore.for_root(uri)
    return {action["cdc"]["path"] for commit in range(after + 1, latest + 1)
            for action in _actions(store, f"{log}/{commit:020d}.json") if "cdc" in action}


def _checkpoint_at_or_before(names: list[str], version: int) -> tuple[int, list[str]]:
    """The newest complete checkpoint at or before `version` (its version and part files);
    (-1, []) when the replay starts from the first commit."""
    parts: dict[int, dict[int, list[str]]] = {}
    for name in names:
        if (match := _CHECKPOINT.match(name)) and int(match.group(1)) <= version:
            total = int(match.group(3) or 1)
            parts.setdefault(int(match.group(1)), {}).setdefault(total, []).append(name)
    for checkpoint in sorted(parts, reverse=True):
        for total, files in parts[checkpoint].items():
            if len(files) == total:
                return checkpoint, sorted(files)
    if f"{0:020d}.json" not in names:
        raise ReconcileError(f"Delta log {names[:1]}: no checkpoint at or before version "
                             f"{version} and no first commit: the log was expired past it")
    return -1, []


def _actions(store: FileStore, commit: str) -> list[dict[str, Any]]:
    try:
        text = store.read_bytes(commit).decode("utf-8")
    except FileNotFoundError:
        raise ReconcileError(f"{commit}: Delta commit missing (expired from the log?)") from None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _vector(descriptor: dict[str, Any] | None) -> DeletionVector | None:
    if not descriptor:
        return None
    return DeletionVector(descriptor["storageType"], descriptor["pathOrInlineDv"],
                          descriptor.get("offset"), int(descriptor.get("cardinality") or 0))


def _z85_uuid(encoded: str) -> uuid.UUID:
    """Decode Delta's Base85 (the Z85 alphabet: 5 characters per 4 bytes) into a UUID."""
    data = b""
    for start in range(0, len(encoded), 5):
        number = 0
        for char in encoded[start:start + 5]:
            number = number * 85 + _Z85.index(char)
        data += number.to_bytes(4, "big")
    return uuid.UUID(bytes=data)
