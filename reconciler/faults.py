"""Named crash points for testing crash safety with real process kills.

`RECONCILE_CRASH_AT=<point>` makes the process SIGKILL itself when it reaches
that point, the harshest crash there is (no cleanup, no finally blocks). Tests
run a command in a subprocess with the variable set, then check that the
previous manifest is still in force and that running the command again
converges. Unset, a crash point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "RECONCILE_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
