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

import json
import random
import re
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from state_backends.errors import (
    ConcurrentModificationError,
    CorruptStateError,
    LockMismatchError,
    StateBackendError,
)
from state_backends.leases import DEFAULT_LOCK_LEASE, LeaseKeeper
from state_backends.locks import LockHeldError, LockInfo, default_who, format_age

MANIFEST_NAME = "manifest.json"
HISTORY_DIR = "history"
LOCK_NAME = "lock"
RUNNER_NAME = "runner.json"
FAILURE_NAME = "last_failure.json"
ENVIRONMENTS_NAME = "environments.json"

# Pipeline names become path segments / key parts, so keep them boring: this
# rules out traversal ("..", "a/b") and keys that S3 consoles render oddly.
_PIPELINE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
_HISTORY_RE = re.compile(r"^(\d+)\.json$")

__all__ = [  # the errors and lock types, for the backends and callers that import them here
    "ConcurrentModificationError", "CorruptStateError", "LockHeldError", "LockInfo",
    "LockMismatchError", "StateBackendError", "default_who", "format_age",
]


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
    lock_lease: float = DEFAULT_LOCK_LEASE
    """Seconds a lock lasts unless its holder renews it (`state_backends.leases`)."""

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
    def _swap_lock(self, pipeline: str, accept: Callable[[LockInfo | None], bool],
                   new: LockInfo) -> bool:
        """Replace the pipeline's lock with `new` if `accept` says so of the lock found, with
        no other change of the lock possible between the two (a renewal, a takeover);
        whether it was replaced."""

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

    def read_environments(self, pipeline: str) -> dict[str, Any]:
        """The pipeline's pull-request environments (`ENVIRONMENTS_NAME`), `{}` for none.
        Retention keeps what they pin, so one that cannot be decoded is an error, never
        read as none."""
        data = self._read_object(pipeline, ENVIRONMENTS_NAME)
        return {} if data is None else decode_object(data, ENVIRONMENTS_NAME)

    def write_environments(self, pipeline: str, environments: dict[str, Any]) -> None:
        """Replace the pipeline's environments: called under the pipeline's lock, which
        retention holds too, so a pass sees each environment's pins before or after."""
        self._write_object(pipeline, ENVIRONMENTS_NAME, encode_document(environments))

    @abstractmethod
    def _write_object(self, pipeline: str, name: str, data: bytes) -> None:
        """Write a small object of the pipeline at once (no compare-and-swap)."""

    @abstractmethod
    def _read_object(self, pipeline: str, name: str) -> bytes | None:
        """A small object of the pipeline, or None."""

    def acquire_lock_waiting(self, pipeline: str, operation: str,
                             who: str | None = None) -> LockInfo:
        """`acquire_lock`, waiting up to `lock_timeout` seconds for a held lock (polling with
        backoff and jitter); says once on stderr whom it waits for. A lock whose lease lapsed,
        or whose holder is known to be gone (`holder_is_gone`), is taken over
        (`_take_over`). The lease of the lock acquired is renewed until it is released
        (`leases.LeaseKeeper`)."""
        deadline = time.monotonic() + self.lock_timeout
        pause, told = LOCK_POLL_FIRST, False
        while True:
            try:
                return self._keep(pipeline, self.acquire_lock(pipeline, operation, who))
            except LockHeldError as held:
                taken = self._take_over(pipeline, held.holder, operation, who)
                if taken is not None:
                    return self._keep(pipeline, taken)
                left = deadline - time.monotonic()
                if left <= 0:
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

    def _take_over(self, pipeline: str, holder: LockInfo, operation: str,
                   who: str | None) -> LockInfo | None:
        """Take `holder`'s lock if its lease lapsed or its process (on this host) is gone,
        unless it changed meanwhile (renewed, released, taken by another), saying on stderr
        whose lock it was; returns the lock this run now holds, or None."""
        lapsed = holder.lapsed_seconds()
        gone = holder.holder_is_gone()
        if lapsed is None and not gone:
            return None
        info = LockInfo.new(operation, who, self.lock_lease)
        if not self._swap_lock(pipeline, lambda found: found == holder, info):
            return None
        why = (f"its process {holder.pid} is gone" if gone
               else f"its lease lapsed {format_age(lapsed or 0)} ago")
        print(f"{pipeline}: took over the lock of {holder.who} (lock id {holder.id}, "
              f"operation {holder.operation!r}, created {holder.created}): {why}",
              file=sys.stderr, flush=True)
        return info

    def _renew_lock(self, pipeline: str, info: LockInfo) -> LockInfo | None:
        """`info`'s lock with its lease renewed, or None when it is no longer this run's."""
        renewed = info.renewed(self.lock_lease)
        mine = self._swap_lock(pipeline, lambda found: found is not None and found.id == info.id,
                               renewed)
        return renewed if mine else None

    def check_lease(self, pipeline: str) -> None:
        """Raise `leases.LockLostError` if this run held the pipeline's lock and lost it: called
        before every commit, so a run whose lock was taken over commits nothing."""
        keeper = self.__dict__.get("_lease_keepers", {}).get(pipeline)
        if keeper is not None:
            keeper.check()

    def _keep(self, pipeline: str, info: LockInfo) -> LockInfo:
        """Renew `info`'s lease until the lock is released (`_stop_keeping`)."""
        if info.expires:
            self.__dict__.setdefault("_lease_keepers", {})[pipeline] = LeaseKeeper(
                f"{self.url}/{pipeline}/{LOCK_NAME}", info, self.lock_lease,
                partial(self._renew_lock, pipeline))
        return info

    def _stop_keeping(self, pipeline: str) -> None:
        """Stop renewing this run's lease of the pipeline's lock: called by every release."""
        keeper = self.__dict__.get("_lease_keepers", {}).pop(pipeline, None)
        if keeper is not None:
            keeper.stop()

    def release_if_held(self, pipeline: str, lock_id: str) -> None:
        """Release lock `lock_id` if it is still the pipeline's lock (nothing if another run
        holds it, or no one): for a lock a failed release left behind."""
        self._stop_keeping(pipeline)
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
