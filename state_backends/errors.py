"""The errors every state backend raises: each message is one line naming the URL or key."""

from __future__ import annotations


class StateBackendError(Exception):
    """Any state-storage failure; the message is one line naming the URL/key."""


class ConcurrentModificationError(StateBackendError):
    """A compare-and-swap lost: someone else committed since we read."""


class LockMismatchError(StateBackendError):
    """Unlock was asked with an id that is not the current holder's; refusing
    protects a live run from a stale or mistyped id."""


class CorruptStateError(StateBackendError):
    """A stored manifest, history entry or lock is not a JSON object."""
