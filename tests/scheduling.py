"""How `make test` splits the files between its two workers (`-n 2 --dist loadfile`).

xdist's `loadfile` keeps a file's tests on one worker, so a session fixture starts once
per worker that runs a file using it. For most fixtures that is cheap, but the run's
Spark Connect server (`conftest.remote`) is a JVM of its own, about 30 to 40 s of a
core to start, run and stop on this 2-core machine (measured by polling `/proc` over a
run: 42.5 s and 28.0 s for the two servers of one run). The files that use it are one
unit here, so only one worker starts it.

xdist hands out the files with the most tests first, which leaves the files of one long
test (the maintenance oracle, about 150 s) for the end, where one worker runs them alone
while the other has nothing left. Here the longest unit left goes first, by the seconds
each file took in a recorded run (`durations.json`, written by `python -m tests.scheduling
JUNIT_XML`: `make test-durations`); a file never recorded keeps xdist's order after them.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
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

DURATIONS = Path(__file__).with_name("durations.json")
"""Seconds per test file (from the project's root) in a recorded run of `make test`."""


def recorded_seconds() -> dict[str, float]:
    return dict(json.loads(DURATIONS.read_text())) if DURATIONS.is_file() else {}


def longest(units: Iterable[str], seconds: Mapping[str, float]) -> str:
    """The unit whose files took longest (the first of `units` when none was recorded)."""
    def took(unit: str) -> float:
        files = [file for file, shared in SHARED_SERVER_FILES.items() if shared == unit]
        return sum(seconds.get(file, 0.0) for file in files or [unit])
    return max(units, key=took)


class SharedServerScheduling(LoadFileScheduling):
    """`loadfile`, with the files of `SHARED_SERVER_FILES` as one unit per server, handed
    out longest first."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        self.seconds = recorded_seconds()

    def _split_scope(self, nodeid: str) -> str:
        file = super()._split_scope(nodeid)
        return SHARED_SERVER_FILES.get(file, file)

    def _assign_work_unit(self, node: Any) -> None:
        self.workqueue.move_to_end(longest(self.workqueue, self.seconds), last=False)
        super()._assign_work_unit(node)


@pytest.hookimpl(optionalhook=True)  # a run without xdist (`-p no:xdist`) has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadFileScheduling | None:
    """The scheduler for `--dist loadfile`; any other mode keeps xdist's own."""
    if config.getoption("dist") != "loadfile":
        return None
    return SharedServerScheduling(config, log)


def seconds_per_file(junit_xml: Path) -> dict[str, float]:
    """A JUnit report's test times summed per file, from the project's root."""
    per_file: Counter[str] = Counter()
    for case in ET.parse(junit_xml).iter("testcase"):
        per_file[case.get("classname", "").replace(".", "/") + ".py"] += float(
            case.get("time", 0))
    return {file: round(total, 1) for file, total in sorted(per_file.items())}


if __name__ == "__main__":
    DURATIONS.write_text(json.dumps(seconds_per_file(Path(sys.argv[1])), indent=1) + "\n")
