"""Machine-readable output stays machine-readable: the JVM and Spark never write to stdout,
and a successful run prints no stack trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.cli_helpers import reconcile
from tests.jvm_options import FAST_JVM
from tests.projects import copy_example


def cli(project: Path, *args: str, extra_env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARK_SUBMIT_OPTS": FAST_JVM, **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "reconciler", "-C", str(project), *args],
                          env=env, capture_output=True, text=True, timeout=300, check=False,
                          cwd=project)


@pytest.mark.slow
def test_stdout_is_only_the_commands_json_even_with_verbose_jvm_logging(
        spark: SparkSession, tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    reconcile(project, "apply", "--auto-approve")  # in-process, on the shared session
    reconcile(project, "execute", "-p", "grades",
              "INSERT INTO students VALUES (1, 'Alice'), (2, 'Bob')")

    # One command in its own process and JVM, whose unified logging writes to its stdout by
    # default; here at its most verbose.
    verbose = {"SPARK_SUBMIT_OPTS": f"{FAST_JVM} -Xlog:gc*=trace,safepoint=trace"}
    queried = cli(project, "query", "-p", "grades", "--format", "json",
                  "SELECT id, name FROM students ORDER BY id", extra_env=verbose)
    assert queried.returncode == 0, queried.stderr
    assert "[gc" in queried.stderr or "gc," in queried.stderr, "GC logging was not on"
    assert json.loads(queried.stdout) == [{"id": 1, "name": "Alice"}, {"id": 2, "name": "Bob"}]
    noisy = [line for line in queried.stderr.splitlines()  # the GC trace aside
             if not line.startswith("[") and ("Exception" in line
                                              or line.strip().startswith("at org.apache"))]
    assert noisy == [], queried.stderr  # a run that succeeds prints no stack trace
    for args in (["plan", "--json"], ["status", "--json"]):  # no JVM: cheap
        result = cli(project, *args, extra_env=verbose)
        assert result.returncode in (0, 2), result.stderr
        json.loads(result.stdout)
