"""`reconcile` against a real Spark standalone cluster (master + worker on 127.0.0.1).

The master and the worker come from the pyspark distribution itself
(`bin/spark-class org.apache.spark.deploy.{master.Master,worker.Worker}`), so no
separate Spark install is needed. The CLI runs in a subprocess, because the
test run's shared session is embedded (`local[...]`) and a Spark master cannot
change inside one process. apply, execute and query run one after another in
that subprocess, as three invocations of the real CLI: they share its driver,
as commands in one `reconcile run --continuous` process would, which saves two
driver and executor start-ups. Delta Lake's own writer writes the tables, its jars
shipped to the executor by `spark.jars`; they live in local folders, which the
executor sees because it runs on the same machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.engine.jars import spark_defaults
from tests.connect_server import FAST_JVM, SPARK_HOME, free_ports
from tests.projects import copy_example

START_TIMEOUT = 120.0

# Runs the real CLI several times in one process and reports each exit code and output.
CLI_SCRIPT = """
import json, sys
from click.testing import CliRunner
from reconciler.cli import cli

results = []
for args in json.loads(sys.argv[1]):
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    results.append({"args": args, "exit": result.exit_code, "output": result.output})
    if result.exit_code:
        break
from pyspark.sql import SparkSession
results.append({"master": SparkSession.getActiveSession().sparkContext.master})
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

    def logs(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}"
                         for log in sorted(self.folder.glob("*.log")))


def spark_env(folder: Path) -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_CONF_DIR": str(folder / "conf"),
            "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(folder / "local"),
            "SPARK_DAEMON_JAVA_OPTS": FAST_JVM,
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "PYSPARK_PYTHON": sys.executable}


def start_daemon(folder: Path, name: str, *args: str) -> subprocess.Popen[bytes]:
    """One Spark daemon in its own process group (spark-class execs the JVM)."""
    log = (folder / f"{name}.log").open("wb")
    return subprocess.Popen([str(SPARK_HOME / "bin/spark-class"), *args], env=spark_env(folder),
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


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A standalone master and one worker (1 core, 1 GiB), stopped however the test ends."""
    folder = tmp_path / "spark"
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


STUDENTS = "INSERT INTO students VALUES (1, 'Alice'), (2, 'Bob')"
GRADES = ("INSERT INTO grades VALUES (1, 'algebra', 97, '2025-09-15'), "
          "(1, 'algebra', 93, '2025-10-15'), (2, 'physics', 85, '2025-10-22')")


@pytest.mark.slow
def test_apply_execute_query_on_standalone_cluster(cluster: Cluster, tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    # JVM flags and jars are the cluster operator's, not the project's: spark-defaults.conf,
    # with Delta's jars shipped to the executors by spark.jars, as `make jars` prints them.
    defaults = cluster.folder / "conf" / "spark-defaults.conf"
    defaults.parent.mkdir(parents=True, exist_ok=True)
    defaults.write_text(f"spark.driver.extraJavaOptions {FAST_JVM}\n"
                        f"spark.executor.extraJavaOptions {FAST_JVM}\n" + spark_defaults())
    on_cluster = ["--spark-master", cluster.url]
    commands = [
        ["-C", str(project), "apply", "--auto-approve", *on_cluster],
        ["-C", str(project), "execute", "-p", "grades", STUDENTS, *on_cluster],
        ["-C", str(project), "execute", "-p", "grades", GRADES, *on_cluster],
        ["-C", str(project), "query", "-p", "grades", "--format", "json", *on_cluster,
         "SELECT student_name, class, class_avg FROM avg_grade_enriched ORDER BY 1, 2"],
    ]
    process = subprocess.run([sys.executable, "-c", CLI_SCRIPT, json.dumps(commands)],
                             env={**spark_env(cluster.folder),
                                  "RECONCILE_DELTA_WRITER": "delta-spark"},
                             capture_output=True, text=True,
                             timeout=300, cwd=tmp_path)
    assert process.returncode == 0, f"{process.stdout}\n{process.stderr[-3000:]}"
    *results, session = json.loads(process.stdout.splitlines()[-1])
    assert [r["exit"] for r in results] == [0, 0, 0, 0], results
    assert session["master"] == cluster.url
    assert "deployed 2 tables and 2 views" in results[0]["output"]
    assert json.loads(results[3]["output"]) == [
        {"student_name": "Alice", "class": "algebra", "class_avg": "95.000000"},
        {"student_name": "Bob", "class": "physics", "class_avg": "85.000000"}]

    commits = [json.loads(line) for log in project.rglob("_delta_log/*.json")
               for line in log.read_text().splitlines()]
    # delta-rs creates the tables (a metadata-only commit); Delta's writer writes the rows.
    engines = {c["commitInfo"].get("engineInfo", "") for c in commits
               if c.get("commitInfo", {}).get("operation") == "WRITE"}
    assert engines and all("Delta-Lake/" in engine for engine in engines), engines

    applications = cluster.state()["completedapps"] + cluster.state()["activeapps"]
    assert [app["name"] for app in applications] == ["pipeline-reconciler"], \
        "the commands did not run on the standalone cluster"
