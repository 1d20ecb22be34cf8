"""Lock leases through the real entry point, with state on S3 (moto on loopback) (issue 82).

A `reconcile run` on another host killed with SIGKILL mid-step: the next run waits for its
lease to lapse and proceeds by itself, every input row ingested exactly once. A run whose
host pauses it (SIGSTOP) for longer than its lease: another run takes the lock over and
commits; resumed, the paused one commits nothing and says why.

The killed and paused runs are processes of their own (`FAST_JVM_ENV`); the runs that
follow are in-process on the shared Spark session."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from pyspark.sql import SparkSession

from reconciler.support.faults import CRASH_ENV
from state_backends.s3 import S3Backend
from tests.cli_helpers import manifest, query, reconcile
from tests.jvm_options import FAST_JVM_ENV
from tests.projects import GRADES_INPUT, feed_grades, write_files
from tests.s3_server import moto_s3_server

pytestmark = [pytest.mark.spark, pytest.mark.slow]

LEASE = 5
PROGRAM = """
    create table grades (student_id bigint, class string, grade int);
    create materialized view counts as select class, count(*) as n from grades group by class;
    """


@pytest.fixture
def on_s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, S3Backend]]:
    """A project whose state is on moto's S3 with a 5 s lease, applied; and its backend."""
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    with moto_s3_server() as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        bucket = f"lease-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
        project = write_files(tmp_path, {
            "reconcile.yaml": f"backend: s3://{bucket}/state\nlock_lease_seconds: {LEASE}\n",
            "pipelines/p/program.sql": PROGRAM,
            "pipelines/p/pipeline.yaml": "name: p\nconnectors:" + GRADES_INPUT})
        reconcile(project, "apply", "--auto-approve")
        yield project, S3Backend(bucket, "state", endpoint_url=endpoint)


def run_in_process_of_its_own(project: Path, crash: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "reconciler", "-C", str(project), "run"],
                            env={**os.environ, **FAST_JVM_ENV, CRASH_ENV: crash},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def counted(project: Path) -> list[dict[str, object]]:
    return query(project, "p", "SELECT class, n FROM counts ORDER BY class")


ROWS = [(1, "algebra", 90), (2, "algebra", 80), (3, "art", 70)]


def test_a_killed_run_on_another_host_blocks_the_next_for_one_lease_at_most(
        spark: SparkSession, on_s3: tuple[Path, S3Backend]) -> None:
    project, backend = on_s3
    feed_grades(project, "a.json", ROWS)
    killed = run_in_process_of_its_own(project, "step-before-commit")
    assert killed.wait(timeout=300) == -signal.SIGKILL, killed.communicate()[1][-2000:]
    left = backend.read_lock("p")
    assert left is not None and left.expires
    # As a runner on another node left it: its process cannot be looked up from here.
    boto3.client("s3", endpoint_url=backend.endpoint_url).put_object(
        Bucket=backend.bucket, Key="state/p/lock",
        Body=json.dumps({**left.to_dict(), "who": "runner@node-7", "pid": "1"}).encode())
    started = time.monotonic()
    resumed = reconcile(project, "run", "--lock-timeout", "60s")
    waited = time.monotonic() - started
    assert "took over the lock of runner@node-7" in resumed and "its lease lapsed" in resumed
    assert "step committed" in resumed and waited < LEASE + 30, (waited, resumed)
    assert counted(project) == [{"class": "algebra", "n": 2}, {"class": "art", "n": 1}]
    assert query(project, "p", "SELECT count(*) AS n FROM grades") == [{"n": 3}]  # once
    assert backend.read_lock("p") is None
    assert "no new input" in reconcile(project, "run")


def test_a_paused_holder_whose_lock_was_taken_over_commits_nothing(
        spark: SparkSession, on_s3: tuple[Path, S3Backend]) -> None:
    project, backend = on_s3
    feed_grades(project, "a.json", ROWS)
    paused = run_in_process_of_its_own(project, "stop:step-before-commit")
    try:
        deadline = time.monotonic() + 300
        while Path(f"/proc/{paused.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
            assert paused.poll() is None and time.monotonic() < deadline, "never paused"
            time.sleep(0.2)
        serial = manifest(project, "p")["serial"]
        time.sleep(LEASE + 1)  # its lease lapses: nothing renews it while it is stopped
        taken = reconcile(project, "run", "--lock-timeout", "30s")
        assert "took over the lock of" in taken and "its lease lapsed" in taken, taken
        assert "step committed" in taken and manifest(project, "p")["serial"] == serial + 1
        paused.send_signal(signal.SIGCONT)
        _, said = paused.communicate(timeout=120)
    finally:
        paused.kill()
    assert paused.returncode == 1, said[-2000:]
    assert "this run's lock" in said and "is lost" in said and "nothing was committed" in said
    assert manifest(project, "p")["serial"] == serial + 1
    assert backend.read_lock("p") is None  # the taker released it; the late one took none
    assert counted(project) == [{"class": "algebra", "n": 2}, {"class": "art", "n": 1}]
    assert query(project, "p", "SELECT count(*) AS n FROM grades") == [{"n": 3}]
