"""Files under a storage location, local or object storage, through `pyarrow.fs`.

The writer lists what Spark wrote and reads row counts from Parquet footers;
retention lists and deletes. Both are metadata operations on files the driver (or
Spark Connect client) can reach, as it must anyway to commit with delta-rs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from reconciler.engine.delta.log import default_storage_options, table_uri


@dataclass
class Collected:
    """What a pass removed (or, on a dry run, would remove)."""

    files: list[str] = field(default_factory=list)
    bytes: int = 0

    def add(self, path: str, size: int) -> None:
        self.files.append(path)
        self.bytes += size


class FileStore:
    """Listing, reading footers and deleting under a storage location (pyarrow.fs).

    The driver (or Spark Connect client) reaches the storage anyway, to commit with
    delta-rs; these are metadata operations on a handful of files, never table rows.
    """

    def __init__(self, filesystem: pafs.FileSystem, prefixes: tuple[str, ...]):
        self.filesystem = filesystem
        # What turns a storage URI into the filesystem's own path: on S3 both spellings,
        # since Spark names files `s3a://` and delta-rs `s3://`.
        self.prefixes = prefixes

    @classmethod
    def for_root(cls, root: str) -> FileStore:
        parsed = urlparse(root)
        if parsed.scheme in ("s3", "s3a"):
            options = default_storage_options("s3://" + root.split("://", 1)[1])
            kwargs: dict[str, Any] = {}
            if options.get("AWS_ENDPOINT_URL"):
                endpoint = urlparse(options["AWS_ENDPOINT_URL"])
                kwargs["endpoint_override"] = endpoint.netloc or options["AWS_ENDPOINT_URL"]
                kwargs["scheme"] = endpoint.scheme or "https"
            if options.get("AWS_REGION"):
                kwargs["region"] = options["AWS_REGION"]
            return cls(pafs.S3FileSystem(**kwargs), ("s3://", "s3a://"))
        return cls(pafs.LocalFileSystem(), ())

    def _native(self, uri: str) -> str:
        if not self.prefixes:
            return table_uri(uri)
        prefix = next((p for p in self.prefixes if uri.startswith(p)), "")
        return uri[len(prefix):]

    def _infos(self, folder: str, recursive: bool) -> Iterable[pafs.FileInfo]:
        try:
            found: list[pafs.FileInfo] = self.filesystem.get_file_info(
                pafs.FileSelector(self._native(folder), recursive=recursive,
                                  allow_not_found=True))
            return found
        except FileNotFoundError:
            return []

    def files(self, folder: str) -> list[tuple[str, int, float]]:
        """(path relative to `folder`, size, modified as epoch seconds) of every file below."""
        base = self._native(folder).rstrip("/") + "/"
        return [(info.path[len(base):], int(info.size or 0),
                 info.mtime.timestamp() if info.mtime else 0.0)
                for info in self._infos(folder, recursive=True)
                if info.type == pafs.FileType.File and info.path.startswith(base)]

    def children(self, folder: str) -> list[str]:
        """Sub-folders of `folder`, as URIs like the layout's."""
        return [f"{folder.rstrip('/')}/{info.base_name}" for info in self._infos(folder, False)
                if info.type == pafs.FileType.Directory]

    def exists(self, uri: str) -> bool:
        """Whether a file is there (one metadata request on an object store)."""
        return bool(self.filesystem.get_file_info(self._native(uri)).type == pafs.FileType.File)

    def parquet_footer(self, uri: str) -> pq.FileMetaData:
        """A Parquet file's footer: its rows and per-row-group statistics (one small read)."""
        return pq.read_metadata(self._native(uri), filesystem=self.filesystem)

    def read_bytes(self, uri: str) -> bytes:
        """A whole (small) file: a Delta log commit."""
        with self.filesystem.open_input_stream(self._native(uri)) as stream:
            return bytes(stream.read())

    def write_bytes(self, uri: str, data: bytes) -> None:
        """A whole small file, replaced at once where the file system can (a local rename;
        an object store's PUT is atomic by itself)."""
        native = self._native(uri)
        parent = native.rsplit("/", 1)[0]
        self.filesystem.create_dir(parent, recursive=True)
        temporary = native if self.prefixes else f"{parent}/.{native.rsplit('/', 1)[1]}.tmp"
        with self.filesystem.open_output_stream(temporary) as stream:
            stream.write(data)
        if temporary != native:
            self.filesystem.move(temporary, native)

    def read_parquet(self, uri: str, columns: list[str]) -> Any:
        """Some columns of a (small) Parquet file, as an Arrow table: a Delta log checkpoint.
        A nested column (`a.b`) comes under its last name (`b`), null where its parent is; a
        column the file does not have is left out. One file, so no `pyarrow.dataset` (whose
        import is most of a warm `reconcile query`'s reading of the log)."""
        with self.filesystem.open_input_file(self._native(uri)) as source:
            parquet = pq.ParquetFile(source)
            wanted = [column.split(".") for column in columns
                      if _has_column(parquet.schema_arrow, column.split("."))]
            table = parquet.read(columns=[".".join(path) for path in wanted])
        return pa.table({path[-1]: _nested(table.column(path[0]), path[1:]) for path in wanted})

    def newest(self, folder: str) -> float:
        times = [modified for _, _, modified in self.files(folder)]
        return max(times, default=0.0)

    def remove(self, uri: str, size: int, dry_run: bool, done: Collected) -> None:
        done.add(uri, size)
        if not dry_run:
            with contextlib.suppress(FileNotFoundError):
                self.filesystem.delete_file(self._native(uri))

    def remove_tree(self, folder: str, dry_run: bool, done: Collected) -> None:
        for relative, size, _ in self.files(folder):
            done.add(f"{folder}/{relative}", size)
        if not dry_run:
            with contextlib.suppress(FileNotFoundError):
                self.filesystem.delete_dir(self._native(folder))


def _nested(column: Any, path: list[str]) -> Any:
    """The field at `path` inside a struct column (a chunked array), null where a struct
    holding it is (`flatten` carries the parent's nulls down)."""
    for name in path:
        kind = column.type.field(name).type
        column = pa.chunked_array([chunk.flatten()[chunk.type.get_field_index(name)]
                                   for chunk in column.chunks], type=kind)
    return column


def _has_column(schema: Any, path: list[str]) -> bool:
    """Whether a (nested, `a.b`) column is in an Arrow schema."""
    fields = schema
    for name in path:
        index = fields.get_field_index(name)
        if index < 0:
            return False
        field_type = fields.field(index).type
        fields = field_type if hasattr(field_type, "get_field_index") else None
        if fields is None and name != path[-1]:
            return False
    return True
