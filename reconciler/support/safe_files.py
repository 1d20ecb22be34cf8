"""The one reader of a checkout's files: regular files inside a folder, never through a
symbolic link, never waiting on a pipe, never more bytes than a limit.

A project's files arrive in pull requests, and git stores symbolic links: whoever reads
one of them (the commands loading a project in `desired/`, the session choosing its jars in
`operations/engine.py`, the Action's set-up step choosing which jars to fetch in
`engine/spark/project_jars.py`) reads it here, and `tests/test_safe_reads.py` fails on any other
read of a file in the package that its allow-list does not name with a reason.

It lives in `support/`, not in `desired/settings/documents.py` where it began, because it knows
nothing of YAML or of projects and its readers are in several folders: `support/` is the
one folder every layer may import, so no reader needs an arrow into `desired/` just to
open a file safely, and the YAML loader there (`load_yaml`) builds on it like any other
caller. `desired.settings.documents` still exports these names for its callers.

`outside_reason(path, folder)` says why a path may not be read as part of a folder (a
link on the way, `..`, outside it); `read_bytes`/`read_text` open the file itself with
`O_NOFOLLOW | O_NONBLOCK`, check on the opened descriptor that it is a regular file, and
read at most the limit + 1 bytes; `read_inside` does both. Each refusal is one
`ReconcileError` line naming the file as shown to the user.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from reconciler.support.errors import ReconcileError


def outside_reason(path: Path, folder: Path) -> str | None:
    """Why `path` may not be read as part of `folder`, or None when it may.

    A project's files come from pull requests, and git stores symbolic links: a
    committed `env.sql -> /proc/self/environ` or `sql: [../../etc/hostname]` must not
    pull text from outside the project into the rendered SQL, the plan or a comment.
    So `path` is named from inside `folder` without `..`, every step to it is a real
    file or folder (no symbolic link), and it resolves inside `folder`.
    """
    base = folder.resolve()
    relative = path
    for root in (folder, base):
        if path.is_absolute() and path.is_relative_to(root):
            relative = path.relative_to(root)
            break
    if relative.is_absolute():
        return f"is outside {folder.name or folder}/"
    if ".." in relative.parts:
        return "goes up with '..'"
    current = base
    for part in relative.parts:
        current = current / part
        if current.is_symlink():
            return ("is a symbolic link" if current == base / relative else
                    f"is reached through the symbolic link {current.relative_to(base)}")
    if not (base / relative).resolve().is_relative_to(base):
        return f"is outside {folder.name or folder}/"
    return None


def refuse_outside(path: Path, folder: Path, shown: str, line: int | None = None, *,
                   what: str = "a file") -> None:
    """Raise the one-line error for a path `outside_reason` refuses (`shown`, `line`: where
    the error points: the file itself, or the line of `pipeline.yaml` that names it)."""
    if (why := outside_reason(path, folder)) is not None:
        raise ReconcileError(f"refusing to read {what} that {why}", file=shown, line=line)


_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
"""How a user's file is opened: never through a symbolic link at its last step (the
steps before it are `outside_reason`'s), and without waiting: opening a named pipe for
reading blocks until someone writes to it, unless non-blocking."""


def read_text(path: Path, shown: str, limit: int, kind: str) -> str:
    """A user's file as UTF-8 text, with universal newlines as `Path.read_text` gives.

    At most `limit` bytes are read (`kind`, "a YAML file", names what is limited in the
    error). Everything else is a one-line error naming `shown`, not a traceback.
    """
    data = read_bytes(path, shown, limit, kind)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ReconcileError("not UTF-8 text", file=shown, line=line) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_bytes(path: Path, shown: str, limit: int, kind: str) -> bytes:
    """The bytes of a regular file, refusing a symbolic link and anything over `limit`.

    `stat()` says 0 bytes for `/dev/zero`, a pipe or a `/proc` file, which never end, so
    the size is not asked: the file's type is checked on the descriptor opened (what is
    read, whatever the path points at by then) and at most `limit + 1` bytes are read.
    """
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ReconcileError("refusing to read a file that is a symbolic link",
                                 file=shown) from None
        raise ReconcileError(f"cannot read file: {error.strerror}", file=shown) from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise ReconcileError(f"refusing to read a file that is {_file_kind(mode)}, not "
                                 "a regular file", file=shown)
        data = _read_at_most(descriptor, limit + 1)
    except OSError as error:
        raise ReconcileError(f"cannot read file: {error.strerror}", file=shown) from None
    finally:
        os.close(descriptor)
    if len(data) > limit:
        raise too_large(shown, kind, limit)
    return data


def _read_at_most(descriptor: int, size: int) -> bytes:
    """Up to `size` bytes: `os.read` may return fewer than asked before the end."""
    chunks: list[bytes] = []
    while size > 0 and (chunk := os.read(descriptor, min(size, 1 << 20))):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _file_kind(mode: int) -> str:
    """What a path that is not a regular file is, in words, for the refusal."""
    kinds = [(stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"),
             (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
             (stat.S_ISSOCK, "a socket")]
    return next((name for test, name in kinds if test(mode)), "a special file")


def too_large(shown: str, kind: str, limit: int) -> ReconcileError:
    """The error for a file over its limit (`kind`: "a YAML file", "a SQL file")."""
    return ReconcileError(f"file too large: {kind} may have at most {limit:,} bytes",
                          file=shown)


def read_inside(path: Path, folder: Path, shown: str, limit: int, kind: str) -> str:
    """`read_text` of a file that `outside_reason` lets be read as part of `folder`."""
    refuse_outside(path, folder, shown)
    return read_text(path, shown, limit, kind)
