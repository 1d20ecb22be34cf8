"""`reconcile run --continuous` as a service: a runner process outlives applies, pauses for
an approval, and stops cleanly on SIGTERM.

The runner is a real CLI process with its own embedded Spark; the applies and the
approval are the real CLI too, in this process (they wait for the runner's lock, as the
runner waits for theirs). Input keeps arriving across the changes, and after each one
every row is in the table exactly once and the view equals its query from scratch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from reconciler.desired.settings.project import load_project
from reconciler.runner.loop import RunnerReports
from reconciler.state.reader import open_backend
from state_backends.base import LockHeldError
from tests.cli_helpers import dead_pid, manifest, query, reconcile
from tests.connect_server import free_ports
from tests.projects import write_files

PIPELINE = """name: p
bootstrap_policy: {policy}
vars: {{threshold: {threshold}}}
connectors:
  - {{name: events_in, table: events, type: files, format: json, path: input}}
"""
SQL = """create table events (id bigint, v int);
create materialized view big as select id, v from events where v > {{ threshold }};
"""
TIMEOUT = 120.0


def configure(project: Path, threshold: int, policy: str = "allow") -> None:
    (project / "pipelines/p/pipeline.yaml").write_text(
        PIPELINE.format(policy=policy, threshold=threshold))


def feed(project: Path, name: str, ids: range) -> None:
    """An input file written whole (renamed into place), as a producer should."""
    staging = project / f".{name}"
    staging.write_text("".join(json.dumps({"id": i, "v": i * 10}) + "\n" for i in ids))
    staging.replace(project / "input" / name)


def eventually(check: Callable[[], bool], what: str, runner: subprocess.Popen) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        assert runner.poll() is None, f"the runner exited ({runner.returncode}) before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def scrape(port: int) -> dict[tuple[str, str], float]:
    """The runner's metrics by (name, connector) sample."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        return {(sample.name, sample.labels.get("connector", "")): sample.value
                for family in text_string_to_metric_families(reply.read().decode())
                for sample in family.samples}


def ids(project: Path, sql: str) -> list[int]:
    return sorted(int(row["id"]) for row in query(project, "p", sql))


def test_runner_survives_applies_pauses_and_stops_on_sigterm(spark: SparkSession,
                                                             tmp_path: Path) -> None:
    project = write_files(tmp_path / "project", {"pipelines/p/program.sql": SQL})
    configure(project, threshold=20)
    (project / "input").mkdir()
    reconcile(project, "apply")
    log = (tmp_path / "runner.log").open("w")
    [port] = free_ports(1)
    runner = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "-C", str(project), "run", "--continuous",
         "--interval", "1", "--metrics-port", str(port)], stdout=log,
        stderr=subprocess.STDOUT, env=dict(os.environ))
    try:
        def holds(expected: list[int]) -> Callable[[], bool]:
            return lambda: ids(project, "select id from events") == expected

        feed(project, "a.json", range(1, 6))
        eventually(holds(list(range(1, 6))), "the first input", runner)

        # An apply while the runner runs: it waits for the runner's lock (or the runner for
        # its), and the runner goes on with the new program.
        configure(project, threshold=35)
        assert "bootstrapped" in reconcile(project, "apply")
        feed(project, "b.json", range(6, 11))
        eventually(holds(list(range(1, 11))), "input after the apply", runner)
        assert ids(project, "select id from big") == ids(
            project, "select id from events where v > 35") == list(range(4, 11))

        # Awaiting approval: the runner pauses the pipeline, then resumes after `approve`.
        configure(project, threshold=75, policy="await_approval")
        reconcile(project, "apply", expect=3)
        assert manifest(project, "p")["status"] == "AwaitingApproval"
        feed(project, "c.json", range(11, 16))
        eventually(lambda: "paused" in (tmp_path / "runner.log").read_text(), "the pause",
                   runner)
        assert "runner: paused since" in reconcile(project, "status")
        assert ids(project, "select id from events") == list(range(1, 11))
        reconcile(project, "approve")
        eventually(holds(list(range(1, 16))), "input after the approval", runner)
        assert ids(project, "select id from big") == list(range(8, 16))

        # A bad file holds its connector (status and metrics say so); the runner goes on,
        # and takes the file once it is fixed in place.
        (project / "input/d.json").write_text('{"id": 16, "v": 160}\nnot json\n')
        eventually(lambda: "input held: events_in" in reconcile(project, "status"),
                   "the held input", runner)
        assert "runner: running since" in reconcile(project, "status")
        assert scrape(port)[("reconcile_input_held", "events_in")] == 1
        feed(project, "d.json", range(16, 18))
        eventually(holds(list(range(1, 18))), "the fixed file", runner)
        assert ids(project, "select id from big") == list(range(8, 18))
        assert scrape(port)[("reconcile_input_held", "events_in")] == 0

        # Prometheus metrics: steps by result, the rows they added, the state.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            metrics = {sample.name: sample for family in text_string_to_metric_families(
                reply.read().decode()) for sample in family.samples
                if sample.labels.get("result", "stepped") == "stepped"
                and sample.labels.get("state", "running") == "running"}
        assert metrics["reconcile_steps_total"].value >= 4
        assert metrics["reconcile_rows_added_total"].value == 17
        assert metrics["reconcile_step_duration_seconds_count"].value >= 3
        assert metrics["reconcile_runner_state"].value == 1
    finally:
        runner.send_signal(signal.SIGTERM)
        try:
            code = runner.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            runner.kill()
            raise
        log.close()
    output = (tmp_path / "runner.log").read_text()
    assert code == 0, output
    assert "SIGTERM: stopping after the current step" in output and "stopped" in output, output
    assert not (project / ".reconcile/state/p/lock").exists(), "the lock was not released"
    assert "runner: stopped since" in reconcile(project, "status")
    assert output.count("p: input held: input connector 'events_in' (input): 1 malformed "
                        "row(s)") == 1, output
    # "No new input" is said once after each step or pause, not every interval.
    assert output.count("p: no new input") <= (output.count("step committed")
                                               + output.count("p: paused") + 1), output


def test_a_step_waits_for_a_held_lock(spark: SparkSession, tmp_path: Path) -> None:
    """A held lock: a single step refuses at once by default, waits with --lock-timeout
    (saying once whom for) and gives up after it, naming the holder."""
    project = write_files(tmp_path, {"pipelines/p/program.sql": SQL})
    configure(project, threshold=20)
    reconcile(project, "apply")
    backend = open_backend(load_project(project))
    with backend.locked("p", "apply"):
        started = time.monotonic()
        refused = reconcile(project, "run", expect=1)
        assert time.monotonic() - started < 5
        assert "is locked by" in refused and "operation 'apply'" in refused
        waited = reconcile(project, "run", "--lock-timeout", "1s", expect=1)
        assert "waiting for the lock held by" in waited and "is locked by" in waited
        assert time.monotonic() - started >= 1
    assert "no new input" in reconcile(project, "run", "--lock-timeout", "1s")

    # A runner that starts waiting says so in `status` (the hook the CLI gives it).
    waiting = open_backend(load_project(project), lock_timeout=0.5)
    reports = RunnerReports(waiting.write_runner_report, interval=1.0)
    waiting.on_lock_wait = lambda name, holder: reports.say(name, "waiting_for_lock",
                                                            f"held by {holder.operation}")
    with backend.locked("p", "apply"), pytest.raises(LockHeldError):
        waiting.acquire_lock_waiting("p", "run")
    assert "runner: waiting for lock since" in reconcile(project, "status")
    assert "(held by apply)" in reconcile(project, "status")

    # A lock left by a process of this host that is gone (a killed run) is taken over at
    # once, its lease unexpired, with one line saying whose it was (issue 82).
    held = backend.acquire_lock("p", "apply")
    lock_file = project / ".reconcile/state/p/lock"
    dead = str(dead_pid())
    lock_file.write_text(json.dumps({**held.to_dict(), "pid": dead}))
    started = time.monotonic()
    taken = reconcile(project, "run", "--lock-timeout", "5m")
    assert time.monotonic() - started < 30 and "waiting" not in taken, taken
    assert (f"p: took over the lock of {held.who} (lock id {held.id}, operation 'apply', "
            f"created {held.created}): its process {dead} is gone") in taken
    assert backend.read_lock("p") is None

    # `status` counts the input no step has taken yet, and says how long the last one took.
    (project / "input").mkdir(exist_ok=True)
    feed(project, "a.json", range(1, 4))
    feed(project, "b.json", range(4, 6))
    status = json.loads(reconcile(project, "status", "-p", "p", "--json"))
    assert status["waiting_input"] == {"events_in": 2}
    assert "input waiting: events_in 2" in reconcile(project, "status")
    reconcile(project, "run")
    status = json.loads(reconcile(project, "status", "-p", "p", "--json"))
    assert status["waiting_input"] == {"events_in": 0}
    assert status["last_step"]["rows"] == {"events": 5} and status["last_step"]["seconds"] > 0
    events = status["versions"]["events"]  # what the manifest pins, and the table's latest
    assert events["latest"] is not None and events["pinned"] == events["latest"], events


@pytest.mark.nightly
def test_runner_rides_out_a_backend_outage(spark: SparkSession, tmp_path: Path,
                                           s3_endpoint: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The S3 backend goes away while the runner runs (its own moto server, stopped and
    started again on the same port): steps fail, back off, commit nothing, and once the
    backend is back the runner catches up with every row exactly once."""
    [port] = free_ports(1)
    endpoint = f"http://127.0.0.1:{port}"
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    bucket = f"outage-{uuid.uuid4().hex[:12]}"
    s3 = boto3.client("s3", endpoint_url=endpoint)
    s3.create_bucket(Bucket=bucket)
    project = write_files(tmp_path / "project", {"pipelines/p/program.sql": SQL,
                                                 "reconcile.yaml": f"backend: s3://{bucket}/state\n"})
    configure(project, threshold=20)
    (project / "input").mkdir()
    reconcile(project, "apply")
    log_path = tmp_path / "runner.log"
    with log_path.open("w") as log:
        runner = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "-C", str(project), "run", "--continuous",
             "--interval", "1", "--max-failures", "20"], stdout=log, stderr=subprocess.STDOUT,
            env=dict(os.environ))
        try:
            feed(project, "a.json", range(1, 6))
            eventually(lambda: ids(project, "select id from events") == list(range(1, 6)),
                       "the first input", runner)
            server.stop()
            feed(project, "b.json", range(6, 11))
            eventually(lambda: "step failed" in log_path.read_text(), "a failed step", runner)
            server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
            server.start()
            eventually(lambda: ids(project, "select id from events") == list(range(1, 11)),
                       "the input after the outage", runner)
            assert ids(project, "select id from big") == list(range(3, 11))
        finally:
            runner.send_signal(signal.SIGTERM)
            code = runner.wait(timeout=TIMEOUT)
            keys = [item["Key"] for item in s3.list_objects_v2(
                Bucket=bucket, Prefix="state/p/").get("Contents", [])]
            server.stop()
    output = log_path.read_text()
    assert code == 0, output
    assert "state/p/lock" not in keys, "the lock was not released"
