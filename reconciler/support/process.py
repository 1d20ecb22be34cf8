"""What the CLI's own process says of itself before it runs a command.

`main` (the `reconcile` script) marks its process as one that ends with its command, so
a plan may leave what it made to the exit (`plan.planner` freezes it rather than have
the collector read it again), and turns SIGTERM into `errors.Terminated` so a cancelled
command unwinds and releases its locks. A test calling the CLI in its own process does
neither. Kept apart from the planner so `reconcile --help` imports nothing heavy.
"""

from __future__ import annotations

import signal

from reconciler.support.errors import Terminated

_PROCESS = {"one_shot": False}


def one_shot_process() -> None:
    """Say that this process ends when its command does."""
    _PROCESS["one_shot"] = True


def is_one_shot() -> bool:
    return _PROCESS["one_shot"]


def raise_on_sigterm() -> None:
    """Make SIGTERM raise `Terminated` in the main thread, as SIGINT raises
    KeyboardInterrupt."""

    def terminated(number: int, frame: object) -> None:
        raise Terminated(signal.Signals(number).name)

    signal.signal(signal.SIGTERM, terminated)
