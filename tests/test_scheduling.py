"""The files that share the run's Spark Connect server are scheduled as one unit, and the
longest units go first."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.scheduling import SHARED_SERVER_FILES, longest, recorded_seconds, seconds_per_file

ROOT = Path(__file__).resolve().parent.parent


def _uses_fixture(path: Path, fixture: str) -> bool:
    """Whether a test or fixture function of the file takes `fixture` as a parameter."""
    tree = ast.parse(path.read_text(), str(path))
    return any(isinstance(node, ast.FunctionDef) and
               any(arg.arg == fixture for arg in node.args.args)
               for node in ast.walk(tree))


def test_every_file_using_the_connect_server_shares_one_worker() -> None:
    users = {str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")
             if _uses_fixture(path, "remote")}
    assert users == set(SHARED_SERVER_FILES), "list them in tests/scheduling.py"
    assert set(SHARED_SERVER_FILES.values()) == {"spark-connect-server"}


def test_a_run_without_xdist_still_collects() -> None:
    """The scheduler's hook is xdist's: a run with xdist turned off (`-p no:xdist`, as when
    profiling one file) must not fail on an unknown hook."""
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p",
                          "no:cacheprovider", "--collect-only", "-q", __file__],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "test_a_run_without_xdist_still_collects" in run.stdout


def test_the_longest_unit_goes_first_and_unrecorded_ones_keep_their_order() -> None:
    seconds = {"tests/a.py": 30.0, "tests/e2e/test_spark_connect.py": 20.0,
               "tests/e2e/test_crash_safety.py": 20.0}
    assert longest(["tests/a.py", "spark-connect-server"], seconds) == "spark-connect-server"
    assert longest(["tests/a.py", "tests/b.py"], seconds) == "tests/a.py"
    assert longest(["tests/c.py", "tests/b.py"], seconds) == "tests/c.py"  # xdist's first


def test_the_recorded_seconds_name_only_test_files_that_exist() -> None:
    recorded = recorded_seconds()
    assert recorded, "tests/durations.json: make test-durations"
    assert [file for file in recorded if not (ROOT / file).is_file()] == []


def test_a_junit_report_is_summed_per_file(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.plan.test_plan" name="one" time="1.25"/>'
        '<testcase classname="tests.plan.test_plan" name="two" time="2.5"/>'
        '<testcase classname="tests.e2e.test_seed_story" name="three" time="7"/>'
        '</testsuite></testsuites>')
    assert seconds_per_file(report) == {"tests/e2e/test_seed_story.py": 7.0,
                                        "tests/plan/test_plan.py": 3.8}
