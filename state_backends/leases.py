"""Lock leases: a run's lock lapses unless its holder renews it, so the lock of a run that
was killed (`kill -9`, the OOM killer, a lost node) frees itself, as DynamoDB's lock
client and Kubernetes' leases do.

A lock carries `expires` (`LockInfo.expires`, ISO-8601 UTC): the holder's clock plus the
backend's `lock_lease`. While a command holds the lock, a `LeaseKeeper` thread renews it
every third of the lease, whatever the command is doing (a long Spark job included), by a
conditional replace that succeeds only while the lock is still the holder's
(`StateBackend._swap_lock`: S3's `If-Match` on the ETag it read; on a local folder, under
the state folder's flock). The next command takes over a lock whose lease lapsed, or whose
process on this host is gone, by the same conditional replace (`StateBackend._take_over`):
of two takers one wins, and it says on stderr whose lock it took and why.

A holder that lost its lease commits nothing: a backend asks the keeper (`check`) before it
writes a manifest or deletes a pipeline's state, and the keeper fails when a renewal found
the lock in other hands, or when no renewal succeeded for a whole lease (the process was
stopped, or could not reach the store), measured on the monotonic clock, which runs on
while a process is stopped. The manifest's compare-and-swap covers the moment between that
check and the write: of a late holder and its taker, one commit wins.

A taker compares the holder's `expires` with its own clock, so the hosts' clocks must
agree to well within a lease (60 s by default; NTP keeps them within milliseconds).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from state_backends.errors import StateBackendError
from state_backends.locks import LockInfo

DEFAULT_LOCK_LEASE = 60.0
"""Seconds a lock lasts without renewal: a killed run's lock frees itself after at most
this long, and a holder paused for longer commits nothing."""


class LockLostError(StateBackendError):
    """This run's lock lapsed or was taken over: it must not commit (nothing it wrote is
    in any manifest, and the next run starts from the last committed state)."""


class LeaseKeeper:
    """Renews one held lock every third of its lease on a daemon thread, and says whether
    the lock is still this run's (`check`)."""

    def __init__(self, location: str, info: LockInfo, lease: float,
                 renew: Callable[[LockInfo], LockInfo | None]) -> None:
        """`renew(info)` replaces the lock with `info` renewed and returns it, or returns
        None when the lock is no longer this run's; an error is taken as the store being
        unreachable for now."""
        self.location = location
        self.info = info
        self._lease = lease
        self._renew = renew
        self._valid_until = time.monotonic() + lease
        self._lost: str | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lock-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._lease / 3):
            started = time.monotonic()
            try:
                renewed = self._renew(self.info)
            except Exception:  # unreachable for now: the lease runs down
                continue
            if renewed is None:
                self._lost = "another run took it over"
                return
            self.info = renewed
            self._valid_until = started + self._lease

    def check(self) -> None:
        """Raise `LockLostError` if the lock is no longer this run's, or may not be: its
        lease ran out before a renewal landed."""
        if self._lost is None and time.monotonic() > self._valid_until:
            self._lost = "its lease lapsed before it could be renewed (the process paused or " \
                         "could not reach the state store)"
        if self._lost is not None:
            raise LockLostError(f"{self.location}: this run's lock (lock id {self.info.id}) "
                                f"is lost: {self._lost}; nothing was committed, and the next "
                                "run starts from the last committed state")

    def stop(self) -> None:
        """Stop renewing (the lock is about to be released)."""
        self._stopped.set()
        self._thread.join(timeout=self._lease)
