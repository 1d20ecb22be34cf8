"""Where a location from the project's files points: a local folder or a URL.

Kept in `support/` so `desired/` (which resolves the storage root and connector paths as
it reads a project) needs nothing from the layers above it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", re.DOTALL)


def resolve_path(path: str, base_dir: Path) -> str:
    """A location from the project's files (storage root, connector path) as read later.

    A URL keeps its place with its scheme in lower case: schemes are case-insensitive
    (`S3://b` is `s3://b`), and the engine compares them in lower case (`s3://` gets the
    S3 credentials, storage paths are held against the layout's). `file://` and plain
    paths are local folders: absolute as given, relative ones against `base_dir` (the
    project folder), `file://rel` too as the state backend reads it, never against the
    working directory and never by dropping `rel` as a URL's host.
    """
    match = _URL.fullmatch(path)
    if match is not None and match[1].lower() != "file":
        return f"{match[1].lower()}://{match[2]}"
    local = match[2] if match is not None else path
    if os.path.isabs(local):
        return local
    return str((base_dir / local).resolve())


def is_url(location: str) -> bool:
    """Whether a location `resolve_path` gave is on another file system than the local one
    (it writes `file://` locations as plain paths)."""
    return _URL.fullmatch(location) is not None
