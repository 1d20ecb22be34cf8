"""Which files a `files` input connector has taken, and which wait, read without Spark.

A connector's checkpoint folder can hold two logs: a Structured Streaming query's own
(`sources/0` lists the files of each planned batch, `offsets/N` and `commits/N` bracket
batch N), and the listed-batch log of `engine.io.listed_ingest` (`listed/N.json` holds the
files of batch N, `listed/N.done` marks it appended, `listed/N.compact` every file of the
batches up to N), which every connector whose input and checkpoint the client reaches uses
(one that streamed before moves over with its stream's log kept). A file is taken if
either lists it; a batch is pending if either planned it and did not finish it.

Local folders and S3 are read through the same seam (`engine.io.file_tree`), so an idle
step decides there is nothing to do with no JVM wherever its files are: the checkpoint is
one listing (`CheckpointLog`), the input another. Files are named one way: local ones by
their real path, objects as `s3a://bucket/key` (`file_name`).
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from reconciler.engine.io.file_tree import (
    OBJECT_SCHEMES,
    FileTree,
    file_tree,
    local_path,
    object_file,
)
from reconciler.support.errors import ReconcileError

LISTED = "listed"
STREAM_SOURCE_LOG = "sources/0/"


def file_name(path: str) -> str:
    """One spelling of an input file Spark named (its source log, `_metadata.file_path`,
    its errors) and listings name alike: a local file's real path, an object's
    `s3a://bucket/key` (Spark percent-encodes both, a listing neither)."""
    local = local_path(path)
    if local is not None:
        return os.path.realpath(local)
    scheme = urlparse(path).scheme.lower()
    return object_file(unquote(path)) if scheme in OBJECT_SCHEMES else path


@dataclass
class CheckpointLog:
    """A connector's checkpoint folder as one listing (one request on S3), and the listed
    batches' records read from it once."""

    tree: FileTree
    folder: str
    names: dict[str, int]
    _batches: dict[int, list[str]] | None = field(default=None, repr=False)
    _seen: set[str] | None = field(default=None, repr=False)

    @classmethod
    def read(cls, checkpoint: str) -> CheckpointLog | None:
        """The log, or None when the client cannot reach the checkpoint (only Spark can)."""
        tree = file_tree(checkpoint)
        return None if tree is None else cls(tree, checkpoint, tree.files(checkpoint))

    def path(self, relative: str) -> str:
        return f"{self.folder.rstrip('/')}/{relative}"

    def _ids(self, folder: str, suffix: str = "") -> set[int]:
        """N of every `folder/N<suffix>` (names only Spark or we write: digits)."""
        prefix = folder + "/"
        return {int(name[len(prefix):len(name) - len(suffix)]) for name in self.names
                if name.startswith(prefix) and name.endswith(suffix)
                and name[len(prefix):len(name) - len(suffix)].isdigit()}

    @property
    def has_listed(self) -> bool:
        """Whether the connector has a listed-batch log (then it keeps it)."""
        return any(name.startswith(LISTED + "/") for name in self.names)

    def compacted(self) -> int | None:
        """The last batch the newest `listed/N.compact` holds: every batch up to it is done."""
        return max(self._ids(LISTED, ".compact"), default=None)

    def batches(self) -> dict[int, list[str]]:
        """The listed batches after the newest compaction: batch id -> its files."""
        if self._batches is None:
            after = self.compacted()
            self._batches = {
                batch: json.loads(self.tree.read_text(self.path(f"{LISTED}/{batch}.json")))
                ["files"] for batch in self._ids(LISTED, ".json")
                if after is None or batch > after}
        return self._batches

    def unfinished(self) -> list[int]:
        """Listed batches recorded and never marked done, in order: each is redone first."""
        return sorted(set(self.batches()) - self._ids(LISTED, ".done"))

    def last_batch(self) -> int | None:
        """The highest listed batch id, recorded or compacted."""
        compacted = self.compacted()
        return max([*self.batches(), *([] if compacted is None else [compacted])],
                   default=None)

    def pending_stream_batch(self) -> bool:
        """Whether the stream planned a batch it never committed (a failed or killed run).

        Spark writes `offsets/N` before running batch N and `commits/N` after it; the
        files of such a batch are already in the source log, so only this tells that a
        restart has work to redo.
        """
        return bool(self._ids("offsets") - self._ids("commits"))

    def compacted_files(self) -> list[str]:
        """The files of every batch the newest compaction holds."""
        compacted = self.compacted()
        if compacted is None:
            return []
        files: list[str] = json.loads(self.tree.read_text(
            self.path(f"{LISTED}/{compacted}.compact")))["files"]
        return files

    def seen(self) -> set[str]:
        """Files the connector has already taken, from both logs (named by `file_name`),
        as they were when the log was read."""
        if self._seen is None:
            seen = set(self.compacted_files())
            for name in self.names:
                entry = name[len(STREAM_SOURCE_LOG):]
                if name.startswith(STREAM_SOURCE_LOG) and "/" not in entry \
                        and not entry.startswith("."):
                    for line in self.tree.read_text(self.path(name)).splitlines()[1:]:
                        if line.strip():
                            seen.add(file_name(json.loads(line)["path"]))
            for files in self.batches().values():
                seen.update(files)
            self._seen = seen
        return self._seen


def _hidden(name: str) -> bool:
    """Names Spark's file index skips: `.x`, `_x` (but not `_k=v` partitions), `x._COPYING_`."""
    return (name.startswith(".") or (name.startswith("_") and "=" not in name)
            or name.endswith("._COPYING_"))


def input_files(path: str) -> set[str]:
    """The files Spark's file index would list for an input `path` (named by `file_name`).

    Like Spark, `path` may be a glob, and folders are listed recursively (partition
    folders such as `day=2025-01-01/`), skipping hidden names. A path the client cannot
    reach has none here (callers ask `file_tree` first).
    """
    local = local_path(path)
    if local is None:
        tree = file_tree(path)
        return set() if tree is None else _object_files(tree, object_file(path))
    roots = sorted(glob.glob(local)) if glob.has_magic(local) else [local]
    files: set[str] = set()
    for root in roots:
        if os.path.isfile(root):
            if root == local or not _hidden(os.path.basename(root)):
                files.add(os.path.realpath(root))
            continue
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = [name for name in subfolders if not _hidden(name)]
            files.update(os.path.realpath(os.path.join(folder, name)) for name in names
                         if not _hidden(name))
    return {file for file in files if _nameable(file)}


def _object_files(tree: FileTree, uri: str) -> set[str]:
    """`input_files` on object storage: one listing from the part of `uri` before any glob,
    each name below it matched against the glob's parts (a name matched whole is a file,
    one below a matched folder is in it), skipping hidden names as Spark does."""
    root, pattern = _split_glob(uri)
    if not pattern and tree.kind(root) == "file":
        return {root}
    found = set()
    for relative in tree.files(root):
        names = relative.split("/")
        if len(names) < len(pattern) or any(_hidden(name) for name in names):
            continue
        if all(fnmatch.fnmatchcase(name, part) for name, part in zip(names, pattern,
                                                                     strict=False)):
            found.add(f"{root}/{relative}")
    bucket = root.split("/")[2]
    if not found and tree.kind(f"s3a://{bucket}") is None:  # asked only of an empty input
        raise ReconcileError(f"files input '{uri}': there is no bucket '{bucket}' (or these "
                             "credentials cannot see it)")
    return found


def _split_glob(uri: str) -> tuple[str, list[str]]:
    """An `s3a://` input's part before its first glob (where its listing starts; at least
    the bucket), and the glob's parts after it."""
    scheme, rest = uri.split("://", 1)
    parts = rest.split("/")
    end = max(1, next((i for i, part in enumerate(parts) if glob.has_magic(part)),
                      len(parts)))
    return f"{scheme}://{'/'.join(parts[:end])}", parts[end:]


_said: set[str] = set()


def _nameable(file: str) -> bool:
    """Whether Spark can be handed `file`: a name that is not UTF-8 (Python lists its bytes
    as surrogates) cannot cross to the JVM, and handing it over broke the session's
    connection ("the Spark JVM died"), every step (issue 78). Such a file waits, said once
    per process on stderr with its name's bytes, until it is renamed: the next step then
    ingests it."""
    try:
        file.encode("utf-8")
    except UnicodeEncodeError:
        if file not in _said:
            _said.add(file)
            print(f"reconcile: input file {os.fsencode(file)!r} waits: its name is not UTF-8, "
                  "which Spark cannot open; rename it", file=sys.stderr)
        return False
    return True


def waiting_files(path: str, checkpoint: str) -> int | None:
    """How many files of a files source the connector has not taken yet; None when the
    source or checkpoint is where the client cannot list (Spark lists those)."""
    log = CheckpointLog.read(checkpoint)
    if log is None or file_tree(path) is None:
        return None
    return len(input_files(path) - log.seen())


def has_new_files(path: str, checkpoint: str, log: CheckpointLog | None = None) -> bool:
    """Whether a files source has input its checkpoint has not taken, without a Spark job
    (`log`: the checkpoint, when the caller has read it already).

    Local folders and S3 are listed here; for other file systems Spark decides.
    """
    log = CheckpointLog.read(checkpoint) if log is None else log
    if log is None or file_tree(path) is None:
        return True
    seen = log.seen()
    check_not_moved(path, seen)
    if log.pending_stream_batch() or log.unfinished():
        return True
    return bool(input_files(path) - seen)


def input_root(path: str) -> str:
    """The folder (or file) an input `path` lists from: its part before any glob."""
    if local_path(path) is None:
        return _split_glob(object_file(path))[0]
    parts = Path(local_path(path) or path).parts
    end = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))
    return os.path.realpath(os.path.join(*parts[:end]) if end else ".")


def check_not_moved(path: str, seen: set[str]) -> None:
    """Refuse to ingest when every file the checkpoint took lies outside the input's folder.

    Spark's file source and the listed log know input files by their absolute paths, so an
    input folder that moved (the project copied elsewhere: its manifest travels, see
    `manifest`) would have every file taken again, duplicating rows. Files merely removed
    after ingestion still lie under the folder's path, so they do not count as a move.
    """
    root = input_root(path)
    separator = os.sep if local_path(path) is not None else "/"
    if not seen or any(file == root or file.startswith(root + separator) for file in seen):
        return
    if separator == os.sep:
        before = os.path.commonpath(sorted(seen))
    else:  # `s3a://bucket/...`: the names' common leading parts
        common: list[str] = []
        for parts in zip(*(file.split("/") for file in seen), strict=False):
            if len(set(parts)) > 1:
                break
            common.append(parts[0])
        before = "/".join(common)
    raise ReconcileError(f"files input '{path}': its checkpoint took files under '{before}', "
                         f"not under '{root}': the input (or the project) moved, and every file "
                         "would be read again; move it back to ingest from where it was")
