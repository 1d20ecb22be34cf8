"""Finding Delta tables and reading their logs, without writing anything.

Where a table lives (``table_uri``: local folders absolute, ``file://`` to a
path, object stores as given), its delta-rs handle and newest version (read
from the log alone, so a step can decide there is nothing to do before starting
a JVM), the app-transaction versions Spark reads from the log on a cluster, and
deleting a table's folder on local or object storage.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from reconciler.support.errors import ReconcileError

PathLike = str | os.PathLike[str]


def table_uri(path: PathLike) -> str:
    """Normalise a table location: local paths become absolute, ``file://`` becomes a path.

    Other URIs (``s3://``, ``s3a://``, ``abfss://``...) are kept as given, but for their
    scheme, in lower case as ``urlparse`` reads it (``S3://b`` is ``s3://b``), since what
    follows compares schemes in lower case.
    """
    text = os.fspath(path)
    parsed = urlparse(text)
    if parsed.scheme == "file":
        return str(Path(parsed.path).resolve())
    if len(parsed.scheme) > 1 and "://" in text:
        return (parsed.scheme + text[len(parsed.scheme):]).rstrip("/")
    return str(Path(text).expanduser().resolve())


def is_local(uri: str) -> bool:
    """Whether a normalised location is a local folder."""
    return "://" not in uri


_DELTA_RS_BAD_CHARS = "[]^|"


def check_delta_rs_location(uri: str) -> None:
    """delta-rs 1.x panics (not raises) on local paths with these characters; say so clearly."""
    if is_local(uri):
        bad = sorted({char for char in uri if char in _DELTA_RS_BAD_CHARS})
        if bad:
            raise ReconcileError(
                f"{uri}: delta-rs cannot use a local path containing {' '.join(bad)}; "
                "choose another storage folder"
            )


def default_storage_options(uri: str) -> dict[str, str]:
    """delta-rs storage options for ``uri`` taken from the usual AWS variables.

    delta-rs reads credentials from the environment itself; what it needs spelt
    out is a custom endpoint (``AWS_ENDPOINT_URL``, e.g. MinIO or moto), plain
    HTTP for such an endpoint, and a region when only ``AWS_DEFAULT_REGION`` is set.
    """
    if urlparse(uri).scheme not in ("s3", "s3a"):
        return {}
    options: dict[str, str] = {}
    endpoint, region = _aws_endpoint_and_region()
    if endpoint:
        options["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.lower().startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    if region:
        options["AWS_REGION"] = region
    return options


def _aws_endpoint_and_region() -> tuple[str | None, str | None]:
    """The S3 endpoint and region the usual AWS variables name (both clients honour them)."""
    return (os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
            os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"))


def s3a_settings() -> dict[str, str]:
    """Spark's S3A connector settings from the same AWS variables as `default_storage_options`:
    a custom endpoint (path-style, plain HTTP when it says so) and the region. Set on the
    session at run time, they reach the Hadoop configuration of every read and write;
    credentials S3A takes from the environment itself."""
    settings: dict[str, str] = {}
    endpoint, region = _aws_endpoint_and_region()
    if endpoint:
        settings |= {"fs.s3a.endpoint": endpoint, "fs.s3a.path.style.access": "true",
                     "fs.s3a.connection.ssl.enabled":
                         "false" if endpoint.lower().startswith("http://") else "true"}
    if region:
        settings["fs.s3a.endpoint.region"] = region
    return settings


def open_delta_rs(uri: str, version: int | None = None,
                  storage_options: Mapping[str, str] | None = None) -> DeltaTable | None:
    """The delta-rs handle of a table (at ``version``), or None when there is no table."""
    check_delta_rs_location(uri)
    options = default_storage_options(uri) | dict(storage_options or {})
    try:
        return DeltaTable(uri, version=version, storage_options=options)
    except TableNotFoundError:
        return None


def probe_latest_version(path: PathLike) -> int | None:
    """A table's newest version read from its Delta log by delta-rs, without Spark.

    Lets a step find out that there is nothing to do before starting a JVM.
    """
    uri = table_uri(path)
    table = open_delta_rs(uri.replace("s3a://", "s3://", 1))
    return None if table is None else table.version()


_HADOOP_GLOB_CHARS = re.compile(r"([\\\[\]{}*?])")


def spark_local_path(file: str) -> str:
    """A local data file as delta-rs reports it (percent-encoded) made safe for Spark.

    delta-rs encodes the path (``with%20space``); Hadoop wants the real name, and
    treats ``[]{}*?`` as glob patterns unless escaped.
    """
    return _HADOOP_GLOB_CHARS.sub(r"\\\1", unquote(file))


def hadoop_uri(uri: str) -> str:
    """Spark's Hadoop S3 connector is ``s3a://``; delta-rs reports ``s3://``."""
    return "s3a://" + uri[len("s3://") :] if uri.startswith("s3://") else uri


def delete_remote(uri: str, options: Mapping[str, str]) -> None:
    """Delete a table folder on object storage through ``pyarrow.fs``."""
    from pyarrow import fs as pafs

    filesystem, folder = remote_filesystem(uri, options)
    info = filesystem.get_file_info(folder)
    if info.type == pafs.FileType.NotFound:
        return
    filesystem.delete_dir(folder)


def copy_remote(source: str, target: str, options: Mapping[str, str]) -> None:
    """Copy a table folder within one object store, object by object (server-side copies:
    no data passes through this process)."""
    from pyarrow import fs as pafs

    filesystem, source_folder = remote_filesystem(source, options)
    _, target_folder = remote_filesystem(target, options)
    for info in filesystem.get_file_info(pafs.FileSelector(source_folder, recursive=True)):
        if info.type == pafs.FileType.File:
            filesystem.copy_file(info.path, target_folder + info.path[len(source_folder):])


def remote_filesystem(uri: str, options: Mapping[str, str]) -> tuple[Any, str]:
    """A ``pyarrow.fs`` filesystem for an object-store URI, and the folder's path in it."""
    from pyarrow import fs as pafs

    parsed = urlparse(uri)
    if parsed.scheme not in ("s3", "s3a"):
        filesystem, folder = pafs.FileSystem.from_uri(uri)
        return filesystem, folder
    endpoint = options.get("AWS_ENDPOINT_URL")
    kwargs: dict[str, Any] = {}
    if endpoint:
        endpoint_parts = urlparse(endpoint)
        kwargs["endpoint_override"] = endpoint_parts.netloc or endpoint
        kwargs["scheme"] = endpoint_parts.scheme or "https"
    if options.get("AWS_REGION"):
        kwargs["region"] = options["AWS_REGION"]
    return pafs.S3FileSystem(**kwargs), f"{parsed.netloc}{parsed.path}"


def relative_file(uri: str, file: str) -> str:
    """A data file, as delta-rs (absolute, percent-encoded) or Spark (`file:` URI) names it,
    relative to the table's root: the form of its add action's path."""
    root = (urlparse(uri).path if urlparse(uri).scheme else uri).rstrip("/") + "/"
    path = unquote(urlparse(file).path if urlparse(file).scheme else file)  # `file:/tmp/...`
    return path[len(root):] if path.startswith(root) else path
