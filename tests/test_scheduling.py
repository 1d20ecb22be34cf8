"""The files that share the run's Spark Connect server are scheduled as one unit."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.scheduling import LONGEST_FIRST, SHARED_SERVER_FILES

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


def test_the_longest_units_exist() -> None:
    """A unit renamed or removed, or a file listed that is part of a shared server's unit,
    would silently leave the order to xdist: the units are the scopes `_split_scope` makes."""
    units = {SHARED_SERVER_FILES.get(file, file) for file in
             (str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py"))}
    assert set(LONGEST_FIRST) <= units, set(LONGEST_FIRST) - units


def test_a_run_without_xdist_still_collects() -> None:
    """The scheduler's hook is xdist's: a run with xdist turned off (`-p no:xdist`, as when
    profiling one file) must not fail on an unknown hook."""
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p",
                          "no:cacheprovider", "--collect-only", "-q", __file__],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "test_a_run_without_xdist_still_collects" in run.stdout
