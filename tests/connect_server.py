"""A Spark Connect server for the test run, started from the installed pyspark.

pyspark's distribution ships the server (`jars/spark-connect_*.jar`); it is started
with `bin/spark-submit --class ...SparkConnectServer spark-internal` on a free
loopback port, once per test session, and stopped at the end. Clients are the
real CLI in subprocesses (`reconcile ... --spark-remote sc://127.0.0.1:PORT`), as a
GitHub runner or a laptop would be.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark

from reconciler.engine.spark.jars import DELTA_CATALOG, DELTA_EXTENSION, delta_jars
from tests.jvm_options import FAST_JVM

SPARK_HOME = Path(pyspark.__file__).resolve().parent


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports: every probe stays bound until all are chosen,
    so the kernel cannot hand the same port out twice (two daemons starting at once would
    then race for it, and one would move to the next port)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def delta_options() -> list[str]:
    """The server's Delta Lake, as its operator would set it up: the jars `make jars`
    fetched, Delta's SQL extension and catalog."""
    jars = delta_jars()
    if jars is None:
        return []
    return ["--jars", ",".join(str(jar) for jar in jars),
            "--conf", f"spark.sql.extensions={DELTA_EXTENSION}",
            "--conf", f"spark.sql.catalog.spark_catalog={DELTA_CATALOG}"]


@contextmanager
def connect_server(folder: Path) -> Iterator[str]:
    """Yield `sc://127.0.0.1:PORT` of a running server; its log is `folder/connect.log`."""
    port, = free_ports(1)
    folder.mkdir(parents=True, exist_ok=True)
    log = (folder / "connect.log").open("wb")
    server = subprocess.Popen(
        [str(SPARK_HOME / "bin/spark-submit"), "--master", "local[2]",
         "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
         # Test-only settings for tiny jobs: see TEST_SPARK_CONF.
         "--conf", "spark.databricks.delta.snapshotPartitions=2",
         "--conf", "spark.sql.codegen.wholeStage=false",
         "--conf", "spark.sql.codegen.factoryMode=NO_CODEGEN",
         "--conf", f"spark.sql.warehouse.dir={folder / 'warehouse'}", *delta_options(),
         "spark-internal"],
        env={**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_SUBMIT_OPTS": FAST_JVM},
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        cwd=folder)
    try:
        deadline = time.monotonic() + 180
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the Spark Connect server did not start:\n"
                                   + (folder / "connect.log").read_text()[-3000:])
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
        log.close()
