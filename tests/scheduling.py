"""How `make test` splits the files between its two workers (`-n 2 --dist loadfile`).

xdist's `loadfile` keeps a file's tests on one worker, so a session fixture starts once
per worker that runs a file using it. For most fixtures that is cheap, but the run's
Spark Connect server (`conftest.remote`) is a JVM of its own, about 30 to 40 s of a
core to start, run and stop on this 2-core machine (measured by polling `/proc` over a
run: 42.5 s and 28.0 s for the two servers of one run). The files that use it are one
unit here, so only one worker starts it.

xdist hands out units by their number of tests, most first, so the maintenance oracle (one
test, the longest unit) started 762 s into a run and its worker finished 162 s after the
other (a timeline of one run: each test's start and end on each worker). The longest
units are handed out first instead, so the units left for the end are the shorter ones.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling

SHARED_SERVER_FILES = {
    "tests/e2e/test_spark_connect.py": "spark-connect-server",
    "tests/e2e/test_crash_safety.py": "spark-connect-server",
    "tests/e2e/test_bootstrap_crash.py": "spark-connect-server",
}
"""Test files (from the project's root) that share a costly session fixture, by its name.
`tests/test_scheduling.py` checks that every file using `remote` is listed."""


LONGEST_FIRST = (
    "spark-connect-server",  # 184 s in that run: its three files and the server
    "tests/e2e/test_maintenance_oracle.py",  # 162 s; 207 s on Delta's writer (2026-12-07)
    "tests/engine/test_publish.py",  # 278 s in a run of 2026-12-07, handed out last; 144 s
    # alone after its readers shared the next command's JVM (six JVMs with a metastore)
    "tests/engine/test_view_tests.py",  # 138 s
    "tests/engine/test_maintenance.py",  # 100 s
    "tests/engine/test_kafka.py",  # 95 s, and the Kafka broker
)
"""The units handed out first, longest first (each unit's tests' time in one run of
`make test`); the rest keep xdist's order. `tests/test_scheduling.py` checks they exist."""


class SharedServerScheduling(LoadFileScheduling):
    """`loadfile`, with the files of `SHARED_SERVER_FILES` as one unit per server and the
    units of `LONGEST_FIRST` handed out first."""

    def _split_scope(self, nodeid: str) -> str:
        file = super()._split_scope(nodeid)
        return SHARED_SERVER_FILES.get(file, file)

    def _assign_work_unit(self, node: Any) -> None:
        """Move the longest units still waiting to the front, then hand out the first.
        Here, not once: xdist fills its queue and hands out the first units in one method
        (`schedule`), with no hook between."""
        for unit in reversed(LONGEST_FIRST):
            if unit in self.workqueue:
                self.workqueue.move_to_end(unit, last=False)
        super()._assign_work_unit(node)


@pytest.hookimpl(optionalhook=True)  # a run without xdist (`-p no:xdist`) has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadFileScheduling | None:
    """The scheduler for `--dist loadfile`; any other mode keeps xdist's own."""
    if config.getoption("dist") != "loadfile":
        return None
    return SharedServerScheduling(config, log)
