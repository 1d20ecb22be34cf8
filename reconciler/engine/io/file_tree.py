"""Where a `files` connector's input and checkpoint live, as the client reaches them: a local
(or mounted) folder, or S3 (`s3a://`, `s3://`) through `pyarrow.fs`.

The listed batches (`engine.io.listed_ingest`) and the question "is there new input?"
(`engine.io.input_files`, asked with no JVM) need only four things of a file system: list
a folder's files with their sizes, read a small text file, write one so a reader sees all
of it or none, and whether a path exists. Behind this one seam local folders and object
storage share that logic instead of each having its own; Spark still reads the data files
themselves through its own file system (S3A for object storage).

On S3 the client is `pyarrow.fs.S3FileSystem`, made by the helper that deletes and copies
remote tables (`engine.delta.log.remote_filesystem`) with the options the AWS variables of
the operator's environment give (`default_storage_options`: `AWS_ENDPOINT_URL`, the region;
credentials the AWS SDK reads from the environment itself). Nothing from `pipeline.yaml`
or a manifest reaches it. Other schemes (`gs://`, `hdfs://`, ...) have no tree here: only
Spark lists those.
"""

from __future__ import annotations

import contextlib
import functools
import os
from urllib.parse import unquote, urlparse

from pyarrow import fs as pafs

from reconciler.engine.delta.log import default_storage_options, remote_filesystem

OBJECT_SCHEMES = frozenset({"s3", "s3a"})
"""Object stores the client lists: S3, whichever of Hadoop's two names the path uses."""


def local_path(path: str) -> str | None:
    """`path` as a local file path, or None when it is on another file system."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return unquote(parsed.path) if parsed.scheme else path
    return None


def object_file(uri: str) -> str:
    """One spelling of an object's name: `s3a://bucket/key` (`s3://` is S3A too, as the
    session maps it), the key as stored. Names Spark wrote (its source log,
    `_metadata.file_path`) are percent-encoded: `input_files.file_name` decodes them."""
    return "s3a://" + uri.split("://", 1)[1].rstrip("/")


class FileTree:
    """A file system the client reaches, addressed by the locations the layout and the
    program use (local paths, `s3a://bucket/key` URIs)."""

    def __init__(self, filesystem: pafs.FileSystem, local: bool):
        self.filesystem = filesystem
        self.local = local

    def _native(self, location: str) -> str:
        if self.local:
            return os.path.abspath(local_path(location) or location)
        return location.split("://", 1)[1].rstrip("/")

    def kind(self, location: str) -> str | None:
        """What is at `location`: `file`, `folder` (on S3: a bucket, or a prefix with
        objects under it), or None when nothing is (it does not exist)."""
        kind = self.filesystem.get_file_info(self._native(location)).type
        return {pafs.FileType.File: "file", pafs.FileType.Directory: "folder"}.get(kind)

    def files(self, folder: str) -> dict[str, int]:
        """Every file under `folder`, at any depth: its path relative to `folder` ('/'
        between names) -> its size. Empty when there is no such folder."""
        native = self._native(folder)
        base = native.rstrip("/") + "/"
        try:
            infos = self.filesystem.get_file_info(
                pafs.FileSelector(native, recursive=True, allow_not_found=True))
        except (FileNotFoundError, NotADirectoryError):
            return {}
        return {info.path[len(base):]: int(info.size or 0) for info in infos
                if info.type == pafs.FileType.File and info.path.startswith(base)}

    def read_text(self, location: str) -> str:
        """A whole small file (a batch's record): the engine's own, in its storage."""
        with self.filesystem.open_input_stream(self._native(location)) as stream:
            text: str = stream.read().decode("utf-8")
            return text

    def write_text(self, location: str, text: str) -> None:
        """Write a small file that readers see whole or not at all: an object store's PUT is
        atomic by itself; a local file is written under a hidden name (which listings skip)
        and renamed over."""
        native = self._native(location)
        if not self.local:
            with self.filesystem.open_output_stream(native) as stream:
                stream.write(text.encode("utf-8"))
            return
        folder, name = os.path.split(native)
        os.makedirs(folder, exist_ok=True)
        temporary = os.path.join(folder, f".{name}.tmp")
        with self.filesystem.open_output_stream(temporary) as stream:
            stream.write(text.encode("utf-8"))
        os.replace(temporary, native)

    def remove(self, location: str) -> None:
        """Delete a file; one already gone is no error."""
        with contextlib.suppress(FileNotFoundError):
            self.filesystem.delete_file(self._native(location))


def file_tree(location: str) -> FileTree | None:
    """The tree `location` lies in, or None when the client cannot list it (only Spark can)."""
    scheme = urlparse(location).scheme.lower()
    if scheme in ("", "file"):
        return FileTree(pafs.LocalFileSystem(), local=True)
    if scheme in OBJECT_SCHEMES:
        options = default_storage_options(f"s3://{location.split('://', 1)[1]}")
        return FileTree(_object_store(tuple(sorted(options.items()))), local=False)
    return None


@functools.lru_cache(maxsize=8)
def _object_store(options: tuple[tuple[str, str], ...]) -> pafs.FileSystem:
    """One S3 client per endpoint and region in a process (a step lists several paths)."""
    filesystem, _ = remote_filesystem("s3://", dict(options))
    return filesystem
