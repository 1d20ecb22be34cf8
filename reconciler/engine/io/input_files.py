"""Which files a `files` input connector has taken, read from its checkpoint folder (no Spark).

Two logs can be there: a Structured Streaming query's own (`sources/0` lists the
files of each planned batch, `offsets/N` and `commits/N` bracket batch N), and
the listed-batch log of `engine.listed_ingest` (`listed/N.json` holds the files
of batch N, `listed/N.done` marks it appended), which every connector on a local
path uses (one that streamed before moves over with its stream's log kept). A file
is taken if either lists it; a batch is pending if either planned it and did not
finish it.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

from reconciler.support.errors import ReconcileError

LISTED = "listed"


def local_path(path: str) -> str | None:
    """`path` as a local file path, or None when it is on another file system."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return unquote(parsed.path) if parsed.scheme else path
    return None


def seen_files(checkpoint: str, listed: dict[int, list[str]] | None = None) -> set[str]:
    """Files the connector has already taken (real paths), from both logs (`listed`: the
    listed-batch log, when the caller has read it already)."""
    seen: set[str] = set()
    log_dir = Path(checkpoint) / "sources" / "0"
    if log_dir.is_dir():
        for entry in log_dir.iterdir():
            if entry.name.startswith("."):
                continue
            for line in entry.read_text(encoding="utf-8").splitlines()[1:]:
                if line.strip():
                    seen.add(os.path.realpath(local_path(json.loads(line)["path"]) or ""))
    for files in (listed_batches(checkpoint) if listed is None else listed).values():
        seen.update(files)
    return seen


def listed_batches(checkpoint: str) -> dict[int, list[str]]:
    """The listed-batch log: batch id -> its files."""
    folder = Path(checkpoint) / LISTED
    if not folder.is_dir():
        return {}
    return {int(entry.stem): json.loads(entry.read_text(encoding="utf-8"))["files"]
            for entry in folder.glob("*.json") if entry.stem.isdigit()}


def listed_done(checkpoint: str) -> set[int]:
    folder = Path(checkpoint) / LISTED
    return {int(entry.stem) for entry in folder.glob("*.done") if entry.stem.isdigit()} \
        if folder.is_dir() else set()


def pending_stream_batch(checkpoint: str) -> bool:
    """Whether the stream planned a batch it never committed (a failed or killed run).

    Spark writes `offsets/N` before running batch N and `commits/N` after it; the
    files of such a batch are already in the source log, so only this tells that a
    restart has work to redo.
    """
    def batch_ids(kind: str) -> set[str]:
        folder = Path(checkpoint) / kind
        if not folder.is_dir():
            return set()
        return {entry.name for entry in folder.iterdir() if entry.name.isdigit()}

    return bool(batch_ids("offsets") - batch_ids("commits"))


def _hidden(name: str) -> bool:
    """Names Spark's file index skips: `.x`, `_x` (but not `_k=v` partitions), `x._COPYING_`."""
    return (name.startswith(".") or (name.startswith("_") and "=" not in name)
            or name.endswith("._COPYING_"))


def input_files(path: str) -> set[str]:
    """The files Spark's file index would list for a local `path` (real paths).

    Like Spark, `path` may be a glob, and folders are listed recursively (partition
    folders such as `day=2025-01-01/`), skipping hidden names.
    """
    roots = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
    files: set[str] = set()
    for root in roots:
        if os.path.isfile(root):
            files.add(os.path.realpath(root))
            continue
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = [name for name in subfolders if not _hidden(name)]
            files.update(os.path.realpath(os.path.join(folder, name)) for name in names
                         if not _hidden(name))
    return {file for file in files if _nameable(file)}


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
    """How many files of a local files source the connector has not taken yet; None when
    the source or checkpoint is not a local path (Spark lists those)."""
    local_input, local_checkpoint = local_path(path), local_path(checkpoint)
    if local_input is None or local_checkpoint is None:
        return None
    return len(input_files(local_input) - seen_files(local_checkpoint))


def has_new_files(path: str, checkpoint: str) -> bool:
    """Whether a files source has input its checkpoint has not taken, without a Spark job.

    Only local paths can be listed here; for other file systems Spark decides.
    """
    local_input, local_checkpoint = local_path(path), local_path(checkpoint)
    if local_input is None or local_checkpoint is None:
        return True
    listed = listed_batches(local_checkpoint)
    seen = seen_files(local_checkpoint, listed)
    check_not_moved(local_input, seen)
    if pending_stream_batch(local_checkpoint) or set(listed) - listed_done(local_checkpoint):
        return True
    return bool(input_files(local_input) - seen)


def input_root(path: str) -> str:
    """The folder (or file) a local input `path` lists from: its part before any glob."""
    parts = Path(path).parts
    end = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))
    return os.path.realpath(os.path.join(*parts[:end]) if end else ".")


def check_not_moved(path: str, seen: set[str]) -> None:
    """Refuse to ingest when every file the checkpoint took lies outside the input's folder.

    Spark's file source and `seen_files` know input files by their absolute paths, so an
    input folder that moved (the project copied elsewhere: its manifest travels, see
    `manifest`) would have every file taken again, duplicating rows. Files merely removed
    after ingestion still lie under the folder's path, so they do not count as a move.
    """
    root = input_root(path)
    if not seen or any(file == root or file.startswith(root + os.sep) for file in seen):
        return
    before = os.path.commonpath(sorted(seen))
    raise ReconcileError(f"files input '{path}': its checkpoint took files under '{before}', "
                         f"not under '{root}': the input (or the project) moved, and every file "
                         "would be read again; move it back to ingest from where it was")
