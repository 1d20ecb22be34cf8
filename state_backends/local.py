"""State on a local (or NFS-less shared) filesystem.

Atomicity comes from POSIX primitives rather than from the caller's care:

* every document is written to a temp file in the same directory, fsynced and
  ``os.replace``-d into place, so readers see the old or the new file, never a
  torn one, and a crash leaves the previous manifest in force;
* the run lock is created with ``O_CREAT | O_EXCL``, which exactly one
  creator can win;
* the manifest compare-and-swap and lock removal run under ``fcntl.flock`` on
  a side file (``<pipeline>/.state.flock``), so two processes cannot both pass
  the version check, and an unlock cannot delete a lock that changed hands
  between its check and its unlink.

Versions are the sha256 of the stored bytes: documents carry a ``serial`` that
grows on every commit, so equal bytes really do mean the same state.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from state_backends.base import (
    FAILURE_NAME,
    HISTORY_DIR,
    LOCK_NAME,
    MANIFEST_NAME,
    RUNNER_NAME,
    ConcurrentModificationError,
    LockHeldError,
    LockInfo,
    LockMismatchError,
    StateBackend,
    StateBackendError,
    VersionedDocument,
    check_pipeline,
    decode_lock,
    decode_object,
    document_serial,
    encode_document,
    parse_history_name,
)

log = logging.getLogger(__name__)

_MUTEX_NAME = ".state.flock"
# A loser of the O_EXCL race may read the lock before the winner has written
# its body; treat an unparsable lock as "still being written" this long.
_TORN_LOCK_GRACE_SECONDS = 0.5
_ACQUIRE_ATTEMPTS = 5
_READ_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_CLOEXEC", 0))
"""How a state file is opened for reading (`LocalBackend._read_bytes`)."""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fsync_dir(directory: Path) -> None:
    """Persist a rename/unlink; best effort, some filesystems refuse it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class LocalBackend(StateBackend):
    """State under ``root/<pipeline>/``; see the module docstring for guarantees."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.url = str(self.root)

    # -- paths and primitives -------------------------------------------------

    def _dir(self, pipeline: str) -> Path:
        check_pipeline(pipeline)
        return self.root / pipeline

    def _read_bytes(self, path: Path) -> bytes | None:
        """A state file's bytes, None when there is none.

        A state folder inside a checkout (the default `.reconcile/state`, which a plan still
        reads; the Action refuses to apply with one) holds what a pull request committed,
        so a file is never read through a symbolic link at its last step, nor when it is a
        named pipe (which would block) or a device (`/dev/zero` never ends): the checks of
        `reconciler.support.safe_files`, made here because this package imports nothing of
        `reconciler`.
        """
        try:
            descriptor = os.open(path, _READ_FLAGS)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise StateBackendError(f"refusing to read {path}: a symbolic link") from None
            raise StateBackendError(f"cannot read {path}: {exc.strerror or exc}") from exc
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise StateBackendError(f"refusing to read {path}: not a regular file")
            with os.fdopen(descriptor, "rb", closefd=False) as handle:
                return handle.read()
        except OSError as exc:
            raise StateBackendError(f"cannot read {path}: {exc.strerror or exc}") from exc
        finally:
            os.close(descriptor)

    def _makedirs(self, directory: Path) -> None:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateBackendError(f"cannot create {directory}: {exc.strerror or exc}") from exc

    def _atomic_write(self, path: Path, data: bytes) -> None:
        """Temp file in the same dir + fsync + os.replace: all or nothing."""
        self._makedirs(path.parent)
        tmp_name: str | None = None
        try:
            fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp_name, path)
            tmp_name = None
        except OSError as exc:
            raise StateBackendError(f"cannot write {path}: {exc.strerror or exc}") from exc
        finally:
            if tmp_name is not None:
                with suppress(OSError):
                    os.unlink(tmp_name)
        _fsync_dir(path.parent)

    @contextmanager
    def _mutex(self, pipeline: str) -> Iterator[None]:
        """Exclusive flock shared by every check-then-modify on one pipeline.

        flock locks belong to the open file description, so this serializes
        threads of one process as well as separate processes.
        """
        directory = self._dir(pipeline)
        self._makedirs(directory)
        path = directory / _MUTEX_NAME
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StateBackendError(f"cannot open {path}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the last descriptor drops the flock

    # -- manifest and history -------------------------------------------------

    def read_manifest(self, pipeline: str) -> VersionedDocument | None:
        path = self._dir(pipeline) / MANIFEST_NAME
        data = self._read_bytes(path)
        if data is None:
            return None
        return VersionedDocument(decode_object(data, str(path)), _digest(data))

    def write_manifest(
        self, pipeline: str, document: dict[str, Any], expected_version: str | None
    ) -> str:
        directory = self._dir(pipeline)
        path = directory / MANIFEST_NAME
        serial = document_serial(document, str(path))
        data = encode_document(document)
        self.check_lease(pipeline)  # a run whose lock was taken over commits nothing
        with self._mutex(pipeline):
            current = self._read_bytes(path)
            if expected_version is None and current is not None:
                raise ConcurrentModificationError(
                    f"{path} already exists (version {_digest(current)[:12]}); "
                    "another run created it first"
                )
            if expected_version is not None:
                if current is None:
                    raise ConcurrentModificationError(
                        f"{path} does not exist but version {expected_version[:12]} was expected"
                    )
                found = _digest(current)
                if found != expected_version:
                    raise ConcurrentModificationError(
                        f"{path} changed since it was read (expected version "
                        f"{expected_version[:12]}, found {found[:12]})"
                    )
            self._atomic_write(path, data)  # the commit point
            history = directory / HISTORY_DIR / f"{serial}.json"
            try:
                self._atomic_write(history, data)
            except StateBackendError as exc:
                log.warning("manifest committed but history copy failed: %s", exc)
        return _digest(data)

    def read_history(self, pipeline: str, serial: int) -> dict[str, Any]:
        path = self._dir(pipeline) / HISTORY_DIR / f"{int(serial)}.json"
        data = self._read_bytes(path)
        if data is None:
            raise StateBackendError(f"{path} does not exist: no history for serial {serial}")
        return decode_object(data, str(path))

    def list_history(self, pipeline: str) -> list[int]:
        directory = self._dir(pipeline) / HISTORY_DIR
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StateBackendError(f"cannot list {directory}: {exc.strerror or exc}") from exc
        return sorted(s for s in map(parse_history_name, names) if s is not None)

    # -- locks ----------------------------------------------------------------

    def read_lock(self, pipeline: str) -> LockInfo | None:
        path = self._dir(pipeline) / LOCK_NAME
        deadline = time.monotonic() + _TORN_LOCK_GRACE_SECONDS
        while True:
            data = self._read_bytes(path)
            if data is None:
                return None
            try:
                return decode_lock(data, str(path))
            except StateBackendError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def acquire_lock(self, pipeline: str, operation: str, who: str | None = None) -> LockInfo:
        directory = self._dir(pipeline)
        path = directory / LOCK_NAME
        info = LockInfo.new(operation, who, self.lock_lease)
        data = encode_document(info.to_dict())
        self._makedirs(directory)
        for _ in range(_ACQUIRE_ATTEMPTS):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                holder = self.read_lock(pipeline)
                if holder is None:
                    continue  # released between our attempt and our read: retry
                raise LockHeldError(str(path), holder, pipeline) from None
            except OSError as exc:
                raise StateBackendError(f"cannot create {path}: {exc.strerror or exc}") from exc
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as exc:
                # Do not leave an empty lock behind that nobody can unlock by id.
                with suppress(OSError):
                    os.unlink(path)
                raise StateBackendError(f"cannot write {path}: {exc.strerror or exc}") from exc
            _fsync_dir(directory)
            return info
        raise StateBackendError(f"could not acquire {path}: it kept changing hands; retry")

    def _swap_lock(self, pipeline: str, accept: Callable[[LockInfo | None], bool],
                   new: LockInfo) -> bool:
        path = self._dir(pipeline) / LOCK_NAME
        with self._mutex(pipeline):  # as an unlock: no other swap or removal meanwhile
            if not accept(self.read_lock(pipeline)):
                return False
            self._atomic_write(path, encode_document(new.to_dict()))
        return True

    def _remove_lock(self, pipeline: str, lock_id: str, verb: str) -> None:
        path = self._dir(pipeline) / LOCK_NAME
        with self._mutex(pipeline):
            holder = self.read_lock(pipeline)
            if holder is None:
                raise StateBackendError(f"{path} is not locked; nothing to {verb}")
            if holder.id != lock_id:
                raise LockMismatchError(
                    f"{path} is held by lock id {holder.id} ({holder.who}, operation "
                    f"{holder.operation!r}), not {lock_id}; refusing to {verb}"
                )
            try:
                os.unlink(path)
            except OSError as exc:
                raise StateBackendError(f"cannot remove {path}: {exc.strerror or exc}") from exc
        _fsync_dir(path.parent)

    def release_lock(self, pipeline: str, lock_id: str) -> None:
        self._stop_keeping(pipeline)
        self._remove_lock(pipeline, lock_id, "release")

    def force_unlock(self, pipeline: str, lock_id: str) -> None:
        self._remove_lock(pipeline, lock_id, "force-unlock")

    def delete_state(self, pipeline: str, lock_id: str) -> None:
        self.check_lease(pipeline)  # a destroy whose lock was taken over deletes nothing
        self._stop_keeping(pipeline)
        directory = self._dir(pipeline)
        with self._mutex(pipeline):  # no compare-and-swap or unlock runs meanwhile
            holder = self.read_lock(pipeline)
            if holder is None or holder.id != lock_id:
                raise LockMismatchError(f"{directory / LOCK_NAME} is not held by lock id "
                                        f"{lock_id}; refusing to delete {directory}")
            history = directory / HISTORY_DIR
            names = [f"{HISTORY_DIR}/{serial}.json" for serial in self.list_history(pipeline)]
            for name in (*names, RUNNER_NAME, FAILURE_NAME, MANIFEST_NAME, LOCK_NAME):
                try:
                    (directory / name).unlink(missing_ok=True)
                except OSError as exc:
                    raise StateBackendError(f"cannot remove {directory / name}: "
                                            f"{exc.strerror or exc}") from exc
                if name == MANIFEST_NAME:
                    _fsync_dir(directory)  # the manifest is gone before the lock goes
            with suppress(OSError):  # a stray file keeps it: harmless, nothing lists it
                history.rmdir()
        _fsync_dir(directory)
        # The folder goes once empty; a run that has just made it again (to lock a new
        # pipeline of the same name) keeps it, as rmdir leaves a folder with a file in it.
        with suppress(OSError):
            (directory / _MUTEX_NAME).unlink()
            directory.rmdir()

    def _write_object(self, pipeline: str, name: str, data: bytes) -> None:
        self._atomic_write(self._dir(pipeline) / name, data)

    def _read_object(self, pipeline: str, name: str) -> bytes | None:
        return self._read_bytes(self._dir(pipeline) / name)

    # -- discovery ------------------------------------------------------------

    def list_pipelines(self) -> list[str]:
        try:
            entries = list(os.scandir(self.root))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StateBackendError(f"cannot list {self.root}: {exc.strerror or exc}") from exc
        found = []
        for entry in entries:
            if not entry.is_dir() or entry.name.startswith("."):
                continue
            base = Path(entry.path)
            if (base / MANIFEST_NAME).exists() or (base / LOCK_NAME).exists():
                found.append(entry.name)
        return sorted(found)
