"""Where pipeline state lives: manifests (the commit point), history and run locks.

``backend_from_url`` is the one place that maps a configured location to a
backend, so every command interprets ``state: ...`` the same way.
"""

from __future__ import annotations

import re
from pathlib import Path

from state_backends.base import (
    ConcurrentModificationError,
    CorruptStateError,
    LockHeldError,
    LockInfo,
    LockMismatchError,
    StateBackend,
    StateBackendError,
    VersionedDocument,
)
from state_backends.local import LocalBackend

__all__ = [
    "ConcurrentModificationError",
    "CorruptStateError",
    "LocalBackend",
    "LockHeldError",
    "LockInfo",
    "LockMismatchError",
    "StateBackend",
    "StateBackendError",
    "VersionedDocument",
    "backend_from_url",
]

_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)


def backend_from_url(url: str, base_dir: Path) -> StateBackend:
    """Build a backend from ``s3://bucket/prefix``, ``file:///abs``, ``file://rel``
    or a plain path; relative paths resolve against ``base_dir`` (the project
    directory), not the current directory, so results do not depend on where
    the command was started."""
    if not url or not url.strip():
        raise StateBackendError("empty state backend URL")
    match = _SCHEME_RE.match(url)
    if match is None:
        return LocalBackend(_resolve(url, base_dir))
    scheme, rest = match.group(1).lower(), match.group(2)
    if scheme == "file":
        if not rest:
            raise StateBackendError(f"state backend URL {url!r} has no path")
        return LocalBackend(_resolve(rest, base_dir))
    if scheme == "s3":
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise StateBackendError(f"state backend URL {url!r} has no bucket")
        # Imported here: boto3 costs ~0.15 s, which local-backend commands never pay.
        from state_backends.s3 import S3Backend

        return S3Backend(bucket, prefix)
    raise StateBackendError(
        f"unsupported state backend URL {url!r}: scheme {scheme!r} is not one of "
        "s3://, file:// or a plain path"
    )


def _resolve(path: str, base_dir: Path) -> Path:
    candidate = Path(path).expanduser()
    if candidate.is_absolute():
        return candidate
    return Path(base_dir).absolute() / candidate
