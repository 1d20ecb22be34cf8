"""Named crash points for testing crash safety with real process kills.

`RECONCILE_CRASH_AT=<point>` makes the process SIGKILL itself when it reaches
that point, the harshest crash there is (no cleanup, no finally blocks);
`RECONCILE_CRASH_AT=jvm:<point>` SIGKILLs the process's Spark JVM there instead
(an executor lost to the kernel's OOM killer, say) while Python goes on;
`term:<point>` and `int:<point>` send the process SIGTERM or SIGINT there (a cancelled CI
job, Ctrl-C), which it handles as it would from outside; `stop:<point>` stops it there
(SIGSTOP: a process paused by its host, every thread with it) until a SIGCONT. Tests
run a command in a subprocess with the variable set, then check that the
previous manifest is still in force and that running the command again
converges. Unset, a crash point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

CRASH_ENV = "RECONCILE_CRASH_AT"


def crash_point(name: str) -> None:
    target = os.environ.get(CRASH_ENV)
    if target == name:
        os.kill(os.getpid(), signal.SIGKILL)
    elif target == f"jvm:{name}":
        for child in _children(os.getpid()):
            os.kill(child, signal.SIGKILL)
    elif target in (f"term:{name}", f"int:{name}"):
        os.kill(os.getpid(), signal.SIGTERM if target.startswith("term:") else signal.SIGINT)
    elif target == f"stop:{name}":
        os.kill(os.getpid(), signal.SIGSTOP)


def _children(pid: int) -> list[int]:
    """This process's child processes (Linux /proc): the JVM pyspark launched."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found
