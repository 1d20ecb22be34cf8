"""Storage-agnostic contract for where the reconciler keeps pipeline state.

A backend stores, per pipeline, three things under its root or prefix:

* ``<pipeline>/manifest.json`` -- the checkpoint manifest; the *only* commit
  point of an apply. It is replaced with compare-and-swap so two writers can
  never both believe they committed on top of the same version.
* ``<pipeline>/history/<serial>.json`` -- a copy of every committed manifest,
  kept for humans and ``state show``; losing one never changes what is live.
* ``<pipeline>/lock`` -- an advisory lock that keeps two reconciler runs from
  interleaving their side effects (Spark jobs, Delta writes) on one pipeline.

Documents are opaque JSON objects here: backends only read ``serial`` to name
the history entry, everything else belongs to the manifest module.
"""

from __future__ import annotations

import getpass
import json
import os
import random
import re
import socket
import sys
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

MANIFEST_NAME = "manifest.json"
HISTORY_DIR = "history"
LOCK_NAME = "lock"
RUNNER_NAME = "runner.json"
FAILURE_NAME = "last_failure.json"

# Pipeline names become path segments / key parts, so keep them boring: this
# rules out traversal ("..", "a/b") and keys that S3 consoles render oddly.
_PIPELINE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
_HISTORY_RE = re.compile(r"^(\d+)\.json$")


class StateBackendError(Exception):
    """Any state-storage failure; the message is one line naming the URL/key."""


class ConcurrentModificationError(StateBackendError):
    """A compare-and-swap lost: someone else committed since we read."""


class LockHeldError(StateBackendError):
    """Another run holds the pipeline lock; ``holder`` says who, so the
    operator can decide between waiting and ``force-unlock``. The remedy is the command
    exactly as it must be typed, offered as the way out only when the holder is known to
    be gone (a process of this user on this host that no longer runs); for a holder that
    still runs here it says to wait, and elsewhere it cannot be told from here."""

    def __init__(self, location: str, holder: LockInfo, pipeline: str = "") -> None:
        self.location = location
        self.holder = holder
        self.pipeline = pipeline
        unlock = (f"reconcile state force-unlock {holder.id}"
                  + (f" -p {pipeline}" if pipeline else ""))
        if holder.holder_is_gone():
            remedy = f"its process {holder.pid} is gone: run `{unlock}`"
        elif holder.holder_is_running():
            remedy = (f"its process {holder.pid} still runs on this host: wait for it "
                      "(--lock-timeout)")
        else:
            remedy = f"if that run is gone, run `{unlock}`"
        super().__init__(
            f"{location} is locked by {holder.who} (lock id {holder.id}, "
            f"operation {holder.operation!r}, created {holder.created}, "
            f"{format_age(holder.age_seconds())} ago); {remedy}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Custom __init__ args: keep the error picklable across processes.
        return (type(self), (self.location, self.holder, self.pipeline))


class LockMismatchError(StateBackendError):
    """Unlock was asked with an id that is not the current holder's; refusing
    protects a live run from a stale or mistyped id."""


class CorruptStateError(StateBackendError):
    """A stored manifest, history entry or lock is not a JSON object."""


def format_age(seconds: float) -> str:
    """Render a lock age compactly ("42s", "3m05s", "2h07m") for messages."""
    total = max(0, int(seconds))
    if total < 60:
        return f"{total}s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def default_who() -> str:
    """``user@host`` of this process: enough for an operator to find a holder."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry, e.g. in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True)
class LockInfo:
    """Body of a lock object: who holds it, why, and since when."""

    id: str
    operation: str
    who: str
    created: str  # ISO-8601 UTC
    pid: str = ""  # the holder's process, on the host `who` names ("" in older locks)

    @classmethod
    def new(cls, operation: str, who: str | None = None) -> LockInfo:
        """Mint a lock body with a fresh uuid4 id and the current UTC time."""
        return cls(
            id=str(uuid.uuid4()),
            operation=operation,
            who=who or default_who(),
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            pid=str(os.getpid()),
        )

    def to_dict(self) -> dict[str, str]:
        return {
            "id": self.id,
            "operation": self.operation,
            "who": self.who,
            "created": self.created,
            **({"pid": self.pid} if self.pid else {}),
        }

    def holder_is_gone(self) -> bool:
        """Whether the lock was taken by a process of this user on this host that no longer
        runs (a killed run): worth no wait. Elsewhere nothing can be told from here."""
        return self._local_process() is False

    def holder_is_running(self) -> bool:
        """Whether the lock's process, of this user on this host, still runs."""
        return self._local_process() is True

    def _local_process(self) -> bool | None:
        """Whether the holder's process runs; None when it is not this user's on this host
        (or the lock names no process)."""
        if self.who != default_who() or not self.pid.isdigit():
            return None
        try:
            os.kill(int(self.pid), 0)
        except ProcessLookupError:
            return False
        except OSError:  # exists, someone else's
            return True
        return True

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LockInfo:
        """Parse a lock body; raises ValueError when a field is missing or not a string."""
        fields = {}
        for name in ("id", "operation", "who", "created"):
            value = data.get(name)
            if not isinstance(value, str):
                raise ValueError(f"lock field {name!r} missing or not a string")
            fields[name] = value
        pid = data.get("pid", "")
        return cls(**fields, pid=pid if isinstance(pid, str) else "")

    def age_seconds(self, now: datetime | None = None) -> float:
        """Seconds since the lock was created (0 if ``created`` is unparsable,
        so a message can still be built for a hand-edited lock)."""
        try:
            created = datetime.fromisoformat(self.created)
        except ValueError:
            return 0.0
        if created.tzinfo is None:
            created = created.replace(tzinfo=UTC)
        return ((now or datetime.now(UTC)) - created).total_seconds()


@dataclass(frozen=True)
class VersionedDocument:
    """A document plus the opaque version token to pass back for CAS."""

    document: dict[str, Any]
    version: str  # ETag on S3, sha256 of the bytes locally


def encode_document(document: dict[str, Any]) -> bytes:
    """Canonical bytes (sorted keys, 2-space indent) so diffs and hashes are stable."""
    return (json.dumps(document, sort_keys=True, indent=2) + "\n").encode("utf-8")


def decode_object(data: bytes, location: str) -> dict[str, Any]:
    """Parse stored bytes as a JSON object or raise CorruptStateError naming ``location``."""
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CorruptStateError(f"{location} is not valid UTF-8: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise CorruptStateError(f"{location} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise CorruptStateError(f"{location} is not a JSON object (found {type(value).__name__})")
    return value


def decode_lock(data: bytes, location: str) -> LockInfo:
    """Parse a lock body; a bad one is reported with the manual way out."""
    try:
        return LockInfo.from_dict(decode_object(data, location))
    except (CorruptStateError, ValueError) as exc:
        raise CorruptStateError(
            f"{exc}; delete {location} by hand if no run is in progress"
        ) from exc


def check_pipeline(pipeline: str) -> None:
    """Reject names that are not a single safe path segment / key part."""
    if not isinstance(pipeline, str) or not _PIPELINE_RE.match(pipeline):
        raise StateBackendError(
            f"invalid pipeline name {pipeline!r}: use letters, digits, '_', '-', '.' "
            "(max 200, starting with a letter or digit)"
        )


def document_serial(document: dict[str, Any], location: str) -> int:
    """The ``serial`` that names the history entry; checked *before* the commit
    so a malformed document can never become the live manifest."""
    serial = document.get("serial")
    if isinstance(serial, bool) or not isinstance(serial, int) or serial < 0:
        raise StateBackendError(
            f"refusing to write {location}: document 'serial' must be a non-negative "
            f"integer, got {serial!r}"
        )
    return serial


def parse_history_name(name: str) -> int | None:
    """``"12.json"`` -> 12; anything else (temp files, strays) -> None."""
    match = _HISTORY_RE.match(name)
    return int(match.group(1)) if match else None


LOCK_POLL_FIRST = 0.25
LOCK_POLL_MAX = 5.0
"""Seconds between attempts at a held lock: from the first, doubling (with jitter) up to
the last, so a short apply is followed closely and a long one polled gently."""


class StateBackend(ABC):
    """Where pipeline manifests, their history and run locks live."""

    url: str  # human-readable location used in messages
    lock_timeout: float = 0.0
    """How long `locked` waits for another run's lock before giving up (Terraform's
    `-lock-timeout`); 0 refuses at once, naming the holder."""
    on_lock_wait: Callable[[str, LockInfo], None] | None = None
    """Told (pipeline, holder) when a wait for the lock begins: a runner reports it."""

    @abstractmethod
    def read_manifest(self, pipeline: str) -> VersionedDocument | None:
        """Current manifest and its version, or None if never committed."""

    @abstractmethod
    def write_manifest(
        self, pipeline: str, document: dict[str, Any], expected_version: str | None
    ) -> str:
        """Compare-and-swap the manifest; return the new version.

        ``expected_version`` None means "must not exist yet". Raises
        ConcurrentModificationError when the stored version differs. After the
        commit, a copy goes to ``history/<serial>.json``; failing that only
        logs a warning, because the manifest is already the truth.
        """

    @abstractmethod
    def read_history(self, pipeline: str, serial: int) -> dict[str, Any]:
        """The manifest as committed at ``serial``; StateBackendError if absent."""

    @abstractmethod
    def list_history(self, pipeline: str) -> list[int]:
        """Serials that have a history entry, ascending."""

    @abstractmethod
    def acquire_lock(self, pipeline: str, operation: str, who: str | None = None) -> LockInfo:
        """Take the pipeline lock atomically or raise LockHeldError naming the holder."""

    @abstractmethod
    def release_lock(self, pipeline: str, lock_id: str) -> None:
        """Drop our lock. LockMismatchError if ``lock_id`` is not the holder's,
        StateBackendError if nothing is locked (someone force-unlocked us)."""

    @abstractmethod
    def force_unlock(self, pipeline: str, lock_id: str) -> None:
        """Operator escape hatch for a dead run, like ``terraform force-unlock ID``:
        the id must match the current holder, so a typo cannot break a live run."""

    @abstractmethod
    def read_lock(self, pipeline: str) -> LockInfo | None:
        """Current lock holder, or None."""

    @abstractmethod
    def list_pipelines(self) -> list[str]:
        """Pipelines that have a manifest or a lock, sorted."""

    @abstractmethod
    def delete_state(self, pipeline: str, lock_id: str) -> None:
        """Remove everything kept of the pipeline (`reconcile destroy`), in an order that a
        destroy interrupted anywhere can finish by running again: the history, the runner's
        report and the last failure first, then the manifest (until it goes, the pipeline is
        still listed and still locked), then the lock `lock_id`, which the caller holds and
        which must still be the holder's (LockMismatchError before anything is removed).
        Each removal is idempotent: an object already gone is not an error."""

    def write_runner_report(self, pipeline: str, report: dict[str, Any]) -> None:
        """Replace what the pipeline's continuous runner last said of itself
        (`RUNNER_NAME`): not state, only for `reconcile status` to show; never locked."""
        self._write_object(pipeline, RUNNER_NAME, encode_document(report))

    def read_runner_report(self, pipeline: str) -> dict[str, Any] | None:
        """The runner's last report, or None; one that cannot be decoded counts as none."""
        data = self._read_object(pipeline, RUNNER_NAME)
        try:
            return None if data is None else decode_object(data, RUNNER_NAME)
        except StateBackendError:
            return None

    def write_step_failure(self, pipeline: str, failure: dict[str, Any]) -> None:
        """Replace the pipeline's last failed step (`FAILURE_NAME`; `{}` once a step
        succeeds): nothing commits a failed step, so this is where `status` finds it."""
        self._write_object(pipeline, FAILURE_NAME, encode_document(failure))

    def read_step_failure(self, pipeline: str) -> dict[str, Any] | None:
        """The last failed step, or None (none recorded, cleared, or not decodable)."""
        data = self._read_object(pipeline, FAILURE_NAME)
        try:
            failure = None if data is None else decode_object(data, FAILURE_NAME)
        except StateBackendError:
            return None
        return failure or None

    @abstractmethod
    def _write_object(self, pipeline: str, name: str, data: bytes) -> None:
        """Write a small object of the pipeline at once (no compare-and-swap)."""

    @abstractmethod
    def _read_object(self, pipeline: str, name: str) -> bytes | None:
        """A small object of the pipeline, or None."""

    def acquire_lock_waiting(self, pipeline: str, operation: str,
                             who: str | None = None) -> LockInfo:
        """`acquire_lock`, waiting up to `lock_timeout` seconds for a held lock (polling with
        backoff and jitter); says once on stderr whom it waits for. A lock whose holder is
        known to be gone (`holder_is_gone`) is refused at once, naming it for
        `force-unlock`: waiting would not free it."""
        deadline = time.monotonic() + self.lock_timeout
        pause, told = LOCK_POLL_FIRST, False
        while True:
            try:
                return self.acquire_lock(pipeline, operation, who)
            except LockHeldError as held:
                left = deadline - time.monotonic()
                if left <= 0 or held.holder.holder_is_gone():
                    raise
                if not told:
                    if self.on_lock_wait is not None:
                        self.on_lock_wait(pipeline, held.holder)
                    print(f"{pipeline}: waiting for the lock held by {held.holder.who} "
                          f"(operation {held.holder.operation!r}, "
                          f"{format_age(held.holder.age_seconds())} ago), up to "
                          f"{format_age(self.lock_timeout)}", file=sys.stderr, flush=True)
                    told = True
                time.sleep(min(left, pause * random.uniform(0.8, 1.2)))
                pause = min(pause * 2, LOCK_POLL_MAX)

    def release_if_held(self, pipeline: str, lock_id: str) -> None:
        """Release lock `lock_id` if it is still the pipeline's lock (nothing if another run
        holds it, or no one): for a lock a failed release left behind."""
        holder = self.read_lock(pipeline)
        if holder is not None and holder.id == lock_id:
            self.release_lock(pipeline, lock_id)

    @contextmanager
    def locked(self, pipeline: str, operation: str, who: str | None = None) -> Iterator[LockInfo]:
        """Hold the pipeline lock for the body and release it however the body exits
        (waiting up to `lock_timeout` for another run's). When the release itself fails (the
        backend went away), the error carries `unreleased_lock`, the lock's id, so a caller
        that goes on (a continuous runner) can release it once the backend is back."""
        info = self.acquire_lock_waiting(pipeline, operation, who)
        try:
            yield info
        except BaseException as exc:
            # Keep the body's error as the one the caller sees; a failed
            # release is secondary and only noted on it.
            try:
                self.release_lock(pipeline, info.id)
            except StateBackendError as release_exc:
                exc.add_note(f"also failed to release the lock: {release_exc}")
                exc.unreleased_lock = info.id  # type: ignore[attr-defined]  # any exception: undeclared
            raise
        else:
            try:
                self.release_lock(pipeline, info.id)
            except StateBackendError as release_exc:
                release_exc.unreleased_lock = info.id  # type: ignore[attr-defined]  # undeclared
                raise
