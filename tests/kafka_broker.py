"""A real single-node Kafka broker (KRaft) on loopback for tests, from Apache Kafka's own jars.

The jars come from Maven Central like the project's other jars (`engine/spark/jars.py`: fetched
once into the jar cache): `kafka_2.13` with its runtime dependencies and log4j 2's binding
for the SLF4J 1.7 API Kafka's pom resolves to (it names none). The broker is formatted
(`StorageTool format`) and started (`kafka.Kafka`) with a small heap; the log cleaner's
dedupe buffer is lowered from its 128 MB default (Kafka refuses less than a few MB), which
a small heap cannot hold at start. A cluster id that begins with `-` is passed as
`--cluster-id=<id>`.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from reconciler.engine.spark.jars import Artifact, JarSet, fetch, log4j_version

KAFKA_VERSION = "4.1.1"


def broker_set() -> JarSet:
    return JarSet(f"kafka-broker-{KAFKA_VERSION}", (
        Artifact("org.apache.kafka", "kafka_2.13", KAFKA_VERSION, transitive=True),
        Artifact("org.apache.logging.log4j", "log4j-slf4j-impl", log4j_version(),
                 transitive=True)))


@dataclass(frozen=True)
class Broker:
    bootstrap_servers: str
    folder: Path

    def log(self) -> str:
        path = self.folder / "broker.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else "java"


@contextmanager
def kafka_broker(folder: Path, heap: str = "256m") -> Iterator[Broker]:
    """A broker listening on 127.0.0.1 at free ports until the block ends (a bench gives it a
    larger heap)."""
    folder.mkdir(parents=True, exist_ok=True)
    class_path = os.pathsep.join(str(jar) for jar in fetch(broker_set()))
    port, controller = _free_port(), _free_port()
    properties = folder / "server.properties"
    properties.write_text("\n".join([
        "process.roles=broker,controller", "node.id=1",
        f"controller.quorum.voters=1@127.0.0.1:{controller}",
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER", "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        f"log.dirs={folder / 'data'}", "num.partitions=1",
        "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1", "group.initial.rebalance.delay.ms=0",
        "log.cleaner.dedupe.buffer.size=4194304", "auto.create.topics.enable=true", ""]))
    java = [_java(), f"-Xmx{heap}", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
            "-cp", class_path]
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    formatted = subprocess.run([*java, "kafka.tools.StorageTool", "format",
                                f"--cluster-id={cluster_id}", "-c", str(properties)],
                               capture_output=True, text=True, timeout=120, check=False)
    if formatted.returncode:
        raise RuntimeError(f"kafka-storage format failed:\n{formatted.stdout[-2000:]}"
                           f"{formatted.stderr[-2000:]}")
    log = (folder / "broker.log").open("wb")
    process = subprocess.Popen([*java, "kafka.Kafka", str(properties)], stdout=log,
                               stderr=subprocess.STDOUT)
    broker = Broker(f"127.0.0.1:{port}", folder)
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited:\n{broker.log()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no Kafka broker on {port}:\n{broker.log()}") from None
                time.sleep(0.5)
        yield broker
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
