"""How a `reconcile` process ends: with its command's exit status and all it printed, after
every exit handler, but without the interpreter's teardown of its modules
(`support.process.end_without_teardown`: 0.1 to 0.5 s after a Spark command; issue 79)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.projects import copy_example

PROBE = """
import atexit, sys
from pathlib import Path
import reconciler.cli.main as cli_main

command, mark = cli_main.cli, Path(sys.argv[1])

def cli(**kwargs):  # a handler registered while the command runs, as the engine's are
    atexit.register(mark.write_text, "ran")
    return command(**kwargs)

cli_main.cli = cli
sys.argv = ["reconcile", *sys.argv[2:]]
cli_main.main()
"""


def reconcile(*args: str, handled: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = ([sys.executable, "-c", PROBE, str(handled)] if handled
               else [sys.executable, "-m", "reconciler"])
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120,
                          check=False, cwd=handled.parent if handled else None)


def test_the_status_and_output_are_the_commands(tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    planned = reconcile("-C", str(project), "plan", "--detailed-exitcode", "--json",
                        handled=tmp_path / "handled")
    assert planned.returncode == 2, planned.stderr  # changes present
    assert planned.stdout.rstrip().endswith("}") and '"plan_id"' in planned.stdout
    assert (tmp_path / "handled").read_text() == "ran"
    assert reconcile("--version").stdout.startswith("reconcile, version")
    assert reconcile("--version").returncode == 0
    missing = reconcile("-C", str(tmp_path / "none"), "validate")
    assert missing.returncode == 1 and missing.stderr.startswith("error: ")
    assert reconcile("no-such-command").returncode == 2  # click's usage error
