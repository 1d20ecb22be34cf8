"""What a run lock says of its holder: who, why, since when, until when (its lease), and
the message naming it when another run finds it held."""

from __future__ import annotations

import getpass
import os
import socket
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from state_backends.errors import StateBackendError


class LockHeldError(StateBackendError):
    """Another run holds the pipeline lock; ``holder`` says who, so the
    operator can decide between waiting and ``force-unlock``. A lock with a lease that
    lapsed, or whose process here is gone, is taken over instead (`leases`): this is
    raised for a live one, or for an older lock without a lease. The remedy is the command
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
        elif holder.expires:
            remedy = (f"its lease runs to {holder.expires}: if that run is gone, the next run "
                      f"after then takes the lock over (or now: `{unlock}`)")
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


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds")


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
    expires: str = ""  # ISO-8601 UTC: when the lease lapses unless renewed ("": never)

    @classmethod
    def new(cls, operation: str, who: str | None = None, lease: float | None = None
            ) -> LockInfo:
        """Mint a lock body with a fresh uuid4 id and the current UTC time, its lease
        lapsing `lease` seconds from now (None: a lock without a lease)."""
        now = datetime.now(UTC)
        return cls(
            id=str(uuid.uuid4()),
            operation=operation,
            who=who or default_who(),
            created=now.isoformat(timespec="seconds"),
            pid=str(os.getpid()),
            expires="" if lease is None else _iso(now + timedelta(seconds=lease)),
        )

    def renewed(self, lease: float) -> LockInfo:
        """This lock with its lease lapsing `lease` seconds from now."""
        return replace(self, expires=_iso(datetime.now(UTC) + timedelta(seconds=lease)))

    def lapsed_seconds(self, now: datetime | None = None) -> float | None:
        """Seconds since the lease lapsed, or None while it runs (or the lock has none:
        an older lock, or an unreadable time, is never taken over by its age)."""
        try:
            expires = datetime.fromisoformat(self.expires) if self.expires else None
        except ValueError:
            return None
        if expires is None:
            return None
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=UTC)
        lapsed = ((now or datetime.now(UTC)) - expires).total_seconds()
        return lapsed if lapsed > 0 else None

    def to_dict(self) -> dict[str, str]:
        return {
            "id": self.id,
            "operation": self.operation,
            "who": self.who,
            "created": self.created,
            **({"pid": self.pid} if self.pid else {}),
            **({"expires": self.expires} if self.expires else {}),
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
        pid, expires = data.get("pid", ""), data.get("expires", "")
        return cls(**fields, pid=pid if isinstance(pid, str) else "",
                   expires=expires if isinstance(expires, str) else "")

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
