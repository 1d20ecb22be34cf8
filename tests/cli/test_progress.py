"""Progress off a terminal: a timestamped line per stage on stderr, through the real CLI in
its own process (stderr is a pipe there, as in a CI log), and none with `--quiet`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.support.progress import line_progress
from tests.projects import copy_example

LINE = re.compile(r"^\d\d:\d\d:\d\dZ \S")


def test_lines_name_each_stage_and_how_long_a_view_took(
        capsys: pytest.CaptureFixture[str]) -> None:
    ticks = iter(["12:00:00Z", "12:00:01Z", "12:00:02Z"])
    report = line_progress(lambda: next(ticks))
    report("refresh", "revenue_by_day")
    report("ingest", "orders_in")
    report("refreshed", "revenue_by_day")
    lines = capsys.readouterr().err.splitlines()
    assert lines[:2] == ["12:00:00Z refresh revenue_by_day", "12:00:01Z ingest orders_in"]
    assert re.fullmatch(r"12:00:02Z view revenue_by_day refreshed in \d+\.\d s", lines[2])


def test_an_apply_off_a_terminal_says_what_it_does_unless_quiet(tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    env = {**os.environ, "RECONCILE_PROGRESS": ""}
    command = [sys.executable, "-m", "reconciler", "-C", str(project), "apply",
               "--auto-approve", "--spark-remote", "sc://127.0.0.1:1"]
    # Spark Connect at a closed port: the apply plans (no Spark), then fails to connect;
    # the progress before that is what a CI log shows of a slow start.
    loud = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    stages = [line for line in loud.stderr.splitlines() if LINE.match(line)]
    assert any(line.endswith(" prepare grades") for line in stages), loud.stderr
    quiet = subprocess.run([*command[:3], "--quiet", *command[3:]], env=env,
                           capture_output=True, text=True, timeout=120)
    assert not [line for line in quiet.stderr.splitlines() if LINE.match(line)], quiet.stderr
    assert loud.returncode == quiet.returncode == 1
