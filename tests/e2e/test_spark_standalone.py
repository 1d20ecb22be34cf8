"""`reconcile` against a real Spark standalone cluster (master + worker on 127.0.0.1).

The master and the worker come from the pyspark distribution itself
(`bin/spark-class org.apache.spark.deploy.{master.Master,worker.Worker}`), so no
separate Spark install is needed; one cluster serves the module's tests. The CLI runs
in a subprocess, because the test run's shared session is embedded (`local[...]`) and
a Spark master cannot change inside one process. apply, execute and query run one
after another in that subprocess, as invocations of the real CLI: they share its
driver, as commands in one `reconcile run --continuous` process would, which saves
driver and executor start-ups. Delta Lake's own writer writes the tables, its jars
shipped to the executor by `spark.jars` and Hadoop's S3A connector on the driver's and
executor's class paths, as the cluster operator's `spark-defaults.conf` says
(`python -m reconciler.engine.spark.jars --spark-defaults`).

Two runs: one with state and tables in local folders, which the executor sees because
it runs on the same machine; one with both on S3 (the run's moto server). There the
Spark daemons, and so the executor the worker starts, get no AWS variable of their own:
the executor reads and writes the bucket with S3A from its class path and the settings
each job's Hadoop configuration brings from the driver: the operator's
`spark.hadoop.fs.s3a.*` (endpoint, dummy credentials) in `spark-defaults.conf`, the
reconciler's own S3A settings, and what Spark copies from the driver's environment
(`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`). Without S3A on the
executor's class path the write fails ("Class ...S3AFileSystem not found").
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from reconciler.engine.spark.jars import spark_defaults
from tests.connect_server import SPARK_HOME, free_ports
from tests.jvm_options import FAST_JVM
from tests.projects import SEED_GRADES, SEED_STUDENTS, copy_example, grades_on_s3

pytestmark = [pytest.mark.spark, pytest.mark.nightly]

START_TIMEOUT = 120.0

# Runs the real CLI several times in one process and reports each exit code and output.
CLI_SCRIPT = """
import json, sys
from click.testing import CliRunner
from reconciler.cli.main import cli

results = []
for args in json.loads(sys.argv[1]):
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    results.append({"args": args, "exit": result.exit_code, "output": result.output})
    if result.exit_code:
        break
from pyspark.sql import SparkSession
context = SparkSession.getActiveSession().sparkContext
results.append({"master": context.master, "app": context.applicationId})
print(json.dumps(results))
"""


@dataclass
class Cluster:
    url: str
    web_ui: str
    folder: Path

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.web_ui}/json/", timeout=5) as response:
            return json.load(response)

    def applications(self) -> dict[str, str]:
        """Id -> name of every application the master has seen."""
        state = self.state()
        return {app["id"]: app["name"] for app in state["completedapps"] + state["activeapps"]}

    def logs(self) -> str:
        """The daemons' logs and the executors' stderr (`work/<app>/<executor>/stderr`)."""
        logs = [*sorted(self.folder.glob("*.log")), *sorted(self.folder.glob("work/*/*/stderr"))]
        return "\n".join(f"--- {log.relative_to(self.folder)}\n"
                         f"{log.read_text(errors='replace')[-3000:]}" for log in logs)


def spark_env(folder: Path) -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_CONF_DIR": str(folder / "conf"),
            "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(folder / "local"),
            "SPARK_DAEMON_JAVA_OPTS": FAST_JVM,
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "PYSPARK_PYTHON": sys.executable}


def start_daemon(folder: Path, name: str, *args: str) -> subprocess.Popen[bytes]:
    """One Spark daemon in its own process group (spark-class execs the JVM).

    No AWS variable reaches it (nor the executors the worker starts): what an executor
    knows of S3 comes from the driver, in the Hadoop configuration of each job."""
    env = {key: value for key, value in spark_env(folder).items()
           if not key.startswith("AWS_")}
    log = (folder / f"{name}.log").open("wb")
    return subprocess.Popen([str(SPARK_HOME / "bin/spark-class"), *args], env=env,
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)


def stop_daemon(process: subprocess.Popen[bytes]) -> None:
    """TERM the daemon's process group (the worker's executors too), KILL if it lingers."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
            return
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    process.wait(timeout=20)


def wait_for_worker(cluster: Cluster, daemons: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        for daemon in daemons:
            assert daemon.poll() is None, f"a Spark daemon exited early\n{cluster.logs()}"
        try:
            if any(w["state"] == "ALIVE" for w in cluster.state()["workers"]):
                return
        except OSError:  # the master's web UI is not up yet
            pass
        time.sleep(0.5)
    raise AssertionError(f"the worker did not register within {START_TIMEOUT}s\n{cluster.logs()}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A standalone master and one worker (1 core, 1 GiB) for the module's tests, stopped
    however they end."""
    folder = tmp_path_factory.mktemp("spark")
    for sub in ("conf", "local", "work"):
        (folder / sub).mkdir(parents=True)
    port, master_ui, worker_ui = free_ports(3)
    cluster = Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{master_ui}", folder)
    daemons: list[subprocess.Popen[bytes]] = []
    try:
        daemons.append(start_daemon(folder, "master", "org.apache.spark.deploy.master.Master",
                                    "--host", "127.0.0.1", "--port", str(port),
                                    "--webui-port", str(master_ui)))
        daemons.append(start_daemon(folder, "worker", "org.apache.spark.deploy.worker.Worker",
                                    cluster.url, "--host", "127.0.0.1", "--cores", "1",
                                    "--memory", "1g", "--webui-port", str(worker_ui),
                                    "--work-dir", str(folder / "work")))
        wait_for_worker(cluster, daemons)
        yield cluster
    finally:
        for daemon in reversed(daemons):
            stop_daemon(daemon)


# Tuning for a dozen rows on one core: a few shuffle partitions and snapshot-rebuild
# tasks instead of a cluster's 200 and 50, and interpreted expressions (as the embedded
# sessions of tests use: TEST_SPARK_CONF).
TINY_DATA = ("spark.sql.shuffle.partitions 2\nspark.databricks.delta.snapshotPartitions 2\n"
             "spark.sql.codegen.wholeStage false\nspark.sql.codegen.factoryMode NO_CODEGEN\n")


def run_on_cluster(cluster: Cluster, folder: Path, commands: list[list[str]],
                   defaults: str = "", env: dict[str, str] | None = None,
                   ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The CLI `commands` (those that start Spark with `--spark-master cluster.url`) in one
    driver process, from `folder`; returns each command's result and the session's master
    and application id.

    JVM flags and jars are the cluster operator's, not the project's: a
    `spark-defaults.conf` of the driver's own (`folder/conf`), with Delta's jars shipped to
    the executors by spark.jars and S3A on both class paths, as `make jars` prints them,
    `TINY_DATA` and `defaults`."""
    conf = folder / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "spark-defaults.conf").write_text(
        f"spark.driver.extraJavaOptions {FAST_JVM}\n"
        f"spark.executor.extraJavaOptions {FAST_JVM}\n" + TINY_DATA + spark_defaults()
        + defaults)
    process = subprocess.run(
        [sys.executable, "-c", CLI_SCRIPT, json.dumps(commands)],
        env={**spark_env(cluster.folder), "SPARK_CONF_DIR": str(conf),
             "RECONCILE_DELTA_WRITER": "delta-spark", **(env or {})},
        capture_output=True, text=True, timeout=300, cwd=folder)
    assert process.returncode == 0, \
        f"{process.stdout}\n{process.stderr[-3000:]}\n{cluster.logs()}"
    *results, session = json.loads(process.stdout.splitlines()[-1])
    assert [r["exit"] for r in results] == [0] * len(commands), f"{results}\n{cluster.logs()}"
    assert session["master"] == cluster.url
    assert cluster.applications().get(session["app"]) == "pipeline-reconciler", \
        "the commands did not run on the standalone cluster"
    return results, session


def delta_commits(logs: dict[str, str]) -> list[dict[str, Any]]:
    """The actions of Delta log files (name -> text)."""
    return [json.loads(line) for text in logs.values() for line in text.splitlines()]


def assert_rows_written_by_delta_lake(commits: list[dict[str, Any]], *, small_by_engine: bool
                                      ) -> None:
    """Every commit of rows is Delta's; with `small_by_engine` the engine's own commit (delta-rs
    of Parquet files Spark wrote into a `w-` folder of the table) may replace a small one
    (`storage.ENGINE_COMMIT_BYTES`)."""
    engines: dict[str, set[str]] = defaultdict(set)
    for commit in commits:
        if "commitInfo" in commit:
            engine = commit["commitInfo"].get("engineInfo", "").split("/")[0].split(":")[0]
            engines[commit["commitInfo"].get("operation", "")].add(engine)
    allowed = {"Apache-Spark", "delta-rs"} if small_by_engine else {"Apache-Spark"}
    assert engines["WRITE"] and engines["WRITE"] <= allowed, engines
    added = [action["add"]["path"] for action in commits if "add" in action]
    assert added and all(path.startswith(("part-", "w-")) for path in added), added


STUDENTS = "INSERT INTO students VALUES (1, 'Alice'), (2, 'Bob')"
GRADES = ("INSERT INTO grades VALUES (1, 'algebra', 97, '2025-09-15'), "
          "(1, 'algebra', 93, '2025-10-15'), (2, 'physics', 85, '2025-10-22')")
AVERAGES = "SELECT student_name, class, class_avg FROM avg_grade_enriched ORDER BY 1, 2"


@pytest.mark.slow
def test_apply_execute_query_on_standalone_cluster(cluster: Cluster, tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    on_cluster = ["--spark-master", cluster.url]
    results, _ = run_on_cluster(cluster, tmp_path, [
        ["-C", str(project), "apply", "--auto-approve", *on_cluster],
        ["-C", str(project), "execute", "-p", "grades", STUDENTS, *on_cluster],
        ["-C", str(project), "execute", "-p", "grades", GRADES, *on_cluster],
        ["-C", str(project), "query", "-p", "grades", "--format", "json", AVERAGES, *on_cluster],
    ], env={"RECONCILE_ENGINE_COMMIT_BYTES": "0"})  # every row by Delta's writer, here
    assert "deployed 2 tables and 2 views" in results[0]["output"]
    assert json.loads(results[3]["output"]) == [
        {"student_name": "Alice", "class": "algebra", "class_avg": "95.000000"},
        {"student_name": "Bob", "class": "physics", "class_avg": "85.000000"}]

    assert_rows_written_by_delta_lake(delta_commits(
        {str(log): log.read_text() for log in project.rglob("_delta_log/*.json")}),
        small_by_engine=False)


def values(insert: str) -> list[tuple[Any, ...]]:
    """The rows of an `INSERT INTO t VALUES (...), (...)` of literals."""
    return ast.literal_eval(f"[{insert.split('VALUES', 1)[1].strip().rstrip(';')},]")


def expected_averages(project: Path) -> list[dict[str, str]]:
    """avg_grade_enriched over the seed rows, computed here as the program defines it:
    the average grade per student and class within the pipeline's date range (decimal
    average, 6 decimals, as Spark types avg of decimal(5,2)), with the student's name."""
    settings = yaml.safe_load((project / "pipelines/grades/pipeline.yaml").read_text())["vars"]
    start, end = (date.fromisoformat(settings[key]) for key in ("start_date", "end_date"))
    names = dict(values(SEED_STUDENTS))
    grades: dict[tuple[str, str], list[Decimal]] = defaultdict(list)
    for student, subject, grade, day in values(SEED_GRADES):
        if start <= date.fromisoformat(day) <= end and student in names:
            grades[names[student], subject].append(Decimal(grade))
    return [{"student_name": name, "class": subject,
             "class_avg": str((sum(marks) / len(marks)).quantize(Decimal("0.000001"),
                                                                 ROUND_HALF_UP))}
            for (name, subject), marks in sorted(grades.items())]


def tables_under(folder: Path) -> list[str]:
    """Delta logs and Parquet files anywhere under `folder`. A directory that goes away while
    it is walked (Spark's block manager removes its scratch folders as it likes) is skipped,
    as `os.walk` does, where `Path.rglob` would raise."""
    found = []
    for root, folders, files in os.walk(folder):
        found += [os.path.join(root, name) for name in folders if name == "_delta_log"]
        found += [os.path.join(root, name) for name in files if name.endswith(".parquet")]
    return found


@pytest.mark.slow
def test_state_and_data_on_s3_from_standalone_cluster(
        cluster: Cluster, s3_endpoint: str, tmp_path: Path) -> None:
    project, bucket = grades_on_s3(s3_endpoint, tmp_path)
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    # The operator's S3A settings for driver and executors: the endpoint, and the same
    # (dummy) credentials the driver's environment holds (`s3_endpoint` set them). Never
    # in reconcile.yaml: it names only where state and data live.
    s3a = {"endpoint": s3_endpoint, "path.style.access": "true",
           "connection.ssl.enabled": "false", "endpoint.region": os.environ["AWS_REGION"],
           "access.key": os.environ["AWS_ACCESS_KEY_ID"],
           "secret.key": os.environ["AWS_SECRET_ACCESS_KEY"]}
    defaults = "".join(f"spark.hadoop.fs.s3a.{key} {value}\n" for key, value in s3a.items())
    on_cluster = ["--spark-master", cluster.url]

    results, _ = run_on_cluster(cluster, tmp_path, [
        ["-C", str(project), "apply", "--auto-approve", *on_cluster],
        ["-C", str(project), "execute", "-p", "grades", SEED_STUDENTS, *on_cluster],
        ["-C", str(project), "execute", "-p", "grades", SEED_GRADES, *on_cluster],
        ["-C", str(project), "run", "-p", "grades", *on_cluster],
        ["-C", str(project), "query", "-p", "grades", "--format", "json", AVERAGES, *on_cluster],
        ["-C", str(project), "state", "show", "-p", "grades"],
    ], defaults=defaults, env={"AWS_ENDPOINT_URL": s3_endpoint})
    assert "deployed 2 tables and 2 views" in results[0]["output"]
    expected = expected_averages(project)
    assert expected
    assert json.loads(results[4]["output"]) == expected

    # Every relation is a Delta table in the bucket: its log, and each data file the
    # log adds, are objects there.
    keys = {item["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for item in page.get("Contents", [])}
    relations = json.loads(results[5]["output"])["relations"]
    assert set(relations) == {"students", "grades", "avg_grade", "avg_grade_enriched"}
    logs: dict[str, str] = {}
    for name, relation in relations.items():
        prefix = f"data/{relation['path']}/"
        table = {key: s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
                 for key in keys if key.startswith(f"{prefix}_delta_log/")
                 and key.endswith(".json")}
        assert table, f"{name}: no Delta log under s3://{bucket}/{prefix}"
        added = {action["add"]["path"] for action in delta_commits(table) if "add" in action}
        assert added, f"{name}: no data file in its Delta log"
        assert all(f"{prefix}{path}" in keys for path in added), (name, added, sorted(keys))
        logs |= table
    assert_rows_written_by_delta_lake(delta_commits(logs), small_by_engine=True)
    assert any(key.startswith("state/grades/") for key in keys)

    # Nothing in local folders: no storage or state folder in the project, no table
    # anywhere on this side (driver's folder, the worker's work and scratch folders).
    assert not (project / ".reconcile").exists()
    for folder in (tmp_path, cluster.folder):
        assert not tables_under(folder), folder
