"""What the CLI's own process says of itself before it runs a command.

`main` (the `reconcile` script) marks its process as one that ends with its command, so
a plan may leave what it made to the exit (`plan.planner` freezes it rather than have
the collector read it again), turns SIGTERM into `errors.Terminated` so a cancelled
command unwinds and releases its locks, and ends without the interpreter's teardown
(`end_without_teardown`). A test calling the CLI in its own process does none of these.
Kept apart from the planner so `reconcile --help` imports nothing heavy.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import sys

from reconciler.support.errors import Terminated

_PROCESS = {"one_shot": False}
_EXIT: dict[str, int] = {}  # "code": the ended command's exit status (`ending_with`)


def one_shot_process() -> None:
    """Say that this process ends when its command does."""
    _PROCESS["one_shot"] = True


def is_one_shot() -> bool:
    return _PROCESS["one_shot"]


def end_without_teardown() -> None:
    """Once the command has ended (`ending_with`), the process leaves right after the last
    exit handler instead of tearing its modules down one by one: after a Spark command
    that took 0.1 to 0.5 s (pyspark's Connect client, pandas, gRPC; issue 79), for nothing
    a process that ends needs. Registered first, so it runs after every other exit
    handler the command registered (the engine's scratch folders, pyspark's own);
    threads were joined before them. One registered before `main` runs would be skipped:
    the only one, logging's (at its import), is run here."""
    atexit.register(_leave)


def ending_with(code: object) -> None:
    """The exit status the command's `SystemExit` carries (None: 0; a message: 1)."""
    _EXIT["code"] = int(code) if isinstance(code, int) else 0 if code is None else 1


def _leave() -> None:
    if "code" not in _EXIT:  # no command ended (an uncaught error): the usual exit
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or a pipe with no reader
            stream.flush()
    os._exit(_EXIT["code"])


def raise_on_sigterm() -> None:
    """Make SIGTERM raise `Terminated` in the main thread, as SIGINT raises
    KeyboardInterrupt."""

    def terminated(number: int, frame: object) -> None:
        raise Terminated(signal.Signals(number).name)

    signal.signal(signal.SIGTERM, terminated)
