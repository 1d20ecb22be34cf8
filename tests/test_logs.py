"""Machine-readable output stays machine-readable: the JVM and Spark never write to stdout,
and a successful run prints no stack trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.projects import copy_example

FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def cli(project: Path, *args: str, extra_env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARK_SUBMIT_OPTS": FAST_JVM, **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "reconciler", "-C", str(project), *args],
                          env=env, capture_output=True, text=True, timeout=300, check=False,
                          cwd=project)


@pytest.mark.slow
def test_stdout_is_only_the_commands_json_even_with_verbose_jvm_logging(tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    deployed = cli(project, "apply", "--auto-approve")
    assert deployed.returncode == 0, deployed.stderr
    noisy = [line for line in deployed.stderr.splitlines()
             if "Exception" in line or line.strip().startswith("at org.apache")]
    assert noisy == [], deployed.stderr  # a run that succeeds prints no stack trace

    # The JVM's unified logging writes to its stdout by default; here at its most verbose.
    verbose = {"SPARK_SUBMIT_OPTS": f"{FAST_JVM} -Xlog:gc*=trace,safepoint=trace"}
    inserted = cli(project, "execute", "-p", "grades",
                   "INSERT INTO students VALUES (1, 'Alice'), (2, 'Bob')", extra_env=verbose)
    assert inserted.returncode == 0, inserted.stderr
    assert "[gc" in inserted.stderr or "gc," in inserted.stderr, "GC logging was not on"
    assert "[gc" not in inserted.stdout and "safepoint" not in inserted.stdout, inserted.stdout
    queried = cli(project, "query", "-p", "grades", "--format", "json",
                  "SELECT id, name FROM students ORDER BY id", extra_env=verbose)
    assert queried.returncode == 0, queried.stderr
    assert json.loads(queried.stdout) == [{"id": 1, "name": "Alice"}, {"id": 2, "name": "Bob"}]
    for args in (["plan", "--json"], ["status", "--json"]):
        result = cli(project, *args, extra_env=verbose)
        assert result.returncode in (0, 2), result.stderr
        json.loads(result.stdout)
