"""stderr says what a person can act on, and nothing else, on every path: one line when the
fallback writer runs for want of Delta's jars, and not a line from any jar on a successful
command with state and data on S3 (the AWS SDK bundle's SLF4J among them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.engine.delta.storage import FALLBACK_NOTICE
from tests.jvm_options import FAST_JVM
from tests.projects import copy_example, grades_on_s3


def cli(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A command in its own process and JVM, on the writer it would choose by itself."""
    environment = {key: value for key, value in os.environ.items()
                   if key != "RECONCILE_DELTA_WRITER"}
    return subprocess.run([sys.executable, "-m", "reconciler", "-C", str(project), *args],
                          env={**environment, "SPARK_SUBMIT_OPTS": FAST_JVM, **env},
                          capture_output=True, text=True, timeout=300, check=False, cwd=project)


@pytest.mark.spark
@pytest.mark.slow
def test_without_deltas_jars_the_fallback_writer_is_named_once(tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    no_jars = tmp_path / "no-jars"
    no_jars.mkdir()
    result = cli(project, "apply", "--auto-approve", RECONCILE_JARS=str(no_jars))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [FALLBACK_NOTICE]
    assert "delta-rs" in FALLBACK_NOTICE
    assert "python -m reconciler.engine.spark.jars" in FALLBACK_NOTICE


@pytest.mark.nightly
@pytest.mark.spark
@pytest.mark.slow
def test_a_command_on_s3_through_deltas_writer_leaves_stderr_empty(
        s3_endpoint: str, tmp_path: Path) -> None:
    project, _ = grades_on_s3(s3_endpoint, tmp_path)
    result = cli(project, "apply", "--auto-approve", AWS_ENDPOINT_URL=s3_endpoint)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
