"""Kafka connectors against a real broker (`tests/kafka_broker.py`): one broker for the
module, a topic per test, the real CLI in-process on the run's Spark session (which has
Spark's Kafka connector on its class path), and one `reconcile run` in its own process,
SIGKILLed between its append and its commit.

What each test checks is computed from the messages it produced, never written down."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from reconciler.support.faults import CRASH_ENV
from tests.cli_helpers import in_storage, manifest, query, reconcile
from tests.connect_server import free_ports
from tests.jvm_options import FAST_JVM_ENV
from tests.kafka_broker import Broker, kafka_broker
from tests.projects import write_files
from tests.runner.test_continuous_runner import eventually

pytestmark = [pytest.mark.slow, pytest.mark.spark]
SQL = """
create table orders (id bigint, customer string, amount bigint);

create materialized view totals as
select customer, sum(amount) as total, count(*) as orders
from orders group by customer;
"""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with kafka_broker(tmp_path_factory.mktemp("kafka")) as running:
        yield running


def new_topic(broker: Broker, partitions: int = 2, name: str | None = None) -> str:
    name = name or f"t{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=30)
    return name


def produce(broker: Broker, topic: str, messages: list[tuple[int, bytes | None]],
            keys: list[str | None] | None = None) -> None:
    """(partition, value) pairs, in order; `keys`, one per message, or none at all."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for (partition, value), key in zip(messages, keys or [None] * len(messages), strict=True):
        producer.produce(topic, value, key, partition=partition)
    assert producer.flush(30) == 0


def orders(first: int, count: int, partitions: int = 2) -> list[tuple[int, bytes | None]]:
    return [(n % partitions, json.dumps({"id": n, "customer": f"c{n % 3}",
                                         "amount": n}).encode())
            for n in range(first, first + count)]


def consume_all(broker: Broker, topic: str) -> list[tuple[str | None, dict[str, Any]]]:
    """Every message of partition 0, read up to its end offset."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                         "group.id": uuid.uuid4().hex, "enable.auto.commit": False})
    _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    consumer.assign([TopicPartition(topic, 0, 0)])
    messages: list[tuple[str | None, dict[str, Any]]] = []
    while len(messages) < end:
        batch = consumer.consume(end - len(messages), timeout=30)
        assert batch, f"{topic}: {len(messages)} of {end} messages read"
        messages += [(m.key().decode() if m.key() else None, json.loads(m.value()))
                     for m in batch if m.error() is None]
    consumer.close()
    return messages


def project(root: Path, broker: Broker, topic: str, *, options: str = "",
            extra: str = "", sql: str = SQL) -> Path:
    out = f"{topic}-out"
    return write_files(root, {
        "reconcile.yaml": "spark:\n  master: local[2]\n",
        "pipelines/p/program.sql": sql,
        "pipelines/p/pipeline.yaml": f"""
            name: p
            bootstrap_policy: allow
            connectors:
              - name: orders_in
                table: orders
                type: kafka
                format: json
                bootstrap_servers: {broker.bootstrap_servers}
                topic: {topic}
                options: {{{options}}}
                {extra}
              - name: totals_out
                view: totals
                type: kafka
                bootstrap_servers: {broker.bootstrap_servers}
                topic: {out}
            """})


def expected_totals(messages: list[tuple[int, bytes | None]]) -> list[dict[str, Any]]:
    rows = [json.loads(value) for _, value in messages if value is not None]
    customers = sorted({row["customer"] for row in rows})
    return [{"customer": c, "total": sum(r["amount"] for r in rows if r["customer"] == c),
             "orders": sum(1 for r in rows if r["customer"] == c)} for c in customers]


def totals(root: Path) -> list[dict[str, Any]]:
    return [{"customer": r["customer"], "total": int(r["total"]), "orders": int(r["orders"])}
            for r in query(root, "p", "SELECT * FROM totals ORDER BY customer")]


def order_ids(root: Path) -> list[int]:
    return [int(r["id"]) for r in query(root, "p", "SELECT id FROM orders ORDER BY id")]


def test_a_view_is_maintained_from_a_topic_and_sent_to_one(broker: Broker,
                                                          tmp_path: Path) -> None:
    topic = new_topic(broker)
    new_topic(broker, 1, f"{topic}-out")
    root = project(tmp_path, broker, topic)
    reconcile(root, "apply", "--auto-approve")
    first = orders(0, 20)
    produce(broker, topic, first)
    status = json.loads(reconcile(root, "status", "--json"))[0]
    assert status["waiting_input"] == {"orders_in": 20}
    assert status["kafka_lag"]["orders_in"] == {f"{topic}/0": 10, f"{topic}/1": 10}

    reconcile(root, "run")
    assert totals(root) == expected_totals(first)
    state = manifest(root, "p")["connectors"]["orders_in"]
    assert state["kafka_offsets"] == {topic: {"0": 10, "1": 10}}
    sent = consume_all(broker, f"{topic}-out")
    assert sorted((m["customer"], m["total"], m["_op"]) for _, m in sent) == sorted(
        (row["customer"], row["total"], "insert") for row in expected_totals(first))
    assert {key for key, _ in sent} == {json.dumps({"customer": c}, separators=(",", ":"))
                                        for c in ("c0", "c1", "c2")}
    assert len({m["_id"] for _, m in sent}) == len(sent)

    assert "no new input" in reconcile(root, "run")  # no Spark job: the broker said so
    second = orders(20, 7)
    produce(broker, topic, second)
    reconcile(root, "run")
    assert totals(root) == expected_totals(first + second)
    changes = [m for _, m in consume_all(broker, f"{topic}-out") if m["_serial"] == 3]
    changed = {row["customer"] for row in expected_totals(second)}
    assert sorted((m["customer"], m["_op"]) for m in changes) == sorted(
        [(c, "delete") for c in changed] + [(c, "insert") for c in changed])
    assert json.loads(reconcile(root, "status", "--json"))[0]["waiting_input"] == {
        "orders_in": 0}


def test_a_step_killed_before_its_commit_ingests_each_message_once(broker: Broker,
                                                                  tmp_path: Path) -> None:
    topic = new_topic(broker)
    root = project(tmp_path, broker, topic, options="maxOffsetsPerTrigger: 8")
    reconcile(root, "apply", "--auto-approve")
    first = orders(0, 6)
    produce(broker, topic, first)
    reconcile(root, "run")
    produce(broker, topic, orders(6, 10))
    process = subprocess.run([sys.executable, "-m", "reconciler", "-C", str(root), "run"],
                             env={**os.environ, **FAST_JVM_ENV,
                                  CRASH_ENV: "step-before-commit"},
                             capture_output=True, text=True, timeout=300, check=False)
    assert process.returncode == -signal.SIGKILL, process.stderr[-2000:]
    assert order_ids(root) == list(range(6))  # the committed manifest still pins these
    produce(broker, topic, orders(16, 3))
    taken = reconcile(root, "run")  # adopts the killed step's batch: 8 records, the cap
    assert "p: took over the lock of" in taken and "is gone" in taken  # no force-unlock
    assert order_ids(root) == list(range(14))
    reconcile(root, "run")
    assert order_ids(root) == list(range(19))
    assert totals(root) == expected_totals(orders(0, 19))
    checkpoint = Path(in_storage(root, manifest(root, "p")["connectors"]["orders_in"]
                                 ["checkpoint"]))
    assert sorted(p.name for p in (checkpoint / "kafka").iterdir()) == ["2.json", "3.json"]


def test_malformed_messages_hold_the_connector_then_are_skipped(broker: Broker,
                                                               tmp_path: Path) -> None:
    topic = new_topic(broker, partitions=1)
    root = project(tmp_path, broker, topic)
    reconcile(root, "apply", "--auto-approve")
    produce(broker, topic, [*orders(0, 3, 1), (0, b"{not json"), (0, b"[1, 2]"), (0, None),
                            *orders(3, 2, 1)])
    held = reconcile(root, "run", expect=1)
    assert len(held.strip().splitlines()) == 1, held
    assert (f"input connector 'orders_in': 2 malformed message(s) in batch 1, the first at "
            f"topic {topic} partition 0 offset 3") in held
    assert order_ids(root) == []
    project(tmp_path, broker, topic, extra="on_bad_input: skip")
    assert "offsets kept" in reconcile(root, "plan")
    reconcile(root, "apply", "--auto-approve")
    reconcile(root, "run")
    assert order_ids(root) == list(range(5))  # the tombstone is no row
    skipped = manifest(root, "p")["connectors"]["orders_in"]["skipped_files"]
    assert skipped[-1]["file"] == f"topic {topic} partition 0 offset 3"



def test_raw_records_land_with_their_own_columns_and_the_tables_defaults(
        broker: Broker, tmp_path: Path) -> None:
    """`format: raw` takes the record's columns the table declares; a record without a key
    or a value (a tombstone is a row here) gets the column's DEFAULT, as every source's
    rows do."""
    topic = new_topic(broker, partitions=2)
    root = write_files(tmp_path, {
        "reconcile.yaml": "spark:\n  master: local[2]\n",
        "pipelines/p/program.sql": """
            create table events (key string default 'unkeyed', value string default 'gone',
                                 partition int, offset bigint);
            create materialized view per_key as
            select key, count(*) as n from events group by key;
            """,
        "pipelines/p/pipeline.yaml": f"""
            name: p
            connectors:
              - name: events_in
                table: events
                type: kafka
                format: raw
                bootstrap_servers: {broker.bootstrap_servers}
                topic: {topic}
            """})
    reconcile(root, "apply", "--auto-approve")
    sent = [(n % 2, None if n % 3 == 0 else f"k{n % 2}", None if n == 4 else f"v{n}")
            for n in range(9)]
    produce(broker, topic, [(partition, None if value is None else value.encode())
                            for partition, _, value in sent], [key for _, key, _ in sent])
    reconcile(root, "run")

    offsets: Counter[int] = Counter()
    expected = []
    for partition, key, value in sent:
        expected.append((key or "unkeyed", value or "gone", partition, offsets[partition]))
        offsets[partition] += 1
    landed = query(root, "p", "SELECT * FROM events")
    assert sorted((r["key"], r["value"], int(r["partition"]), int(r["offset"]))
                  for r in landed) == sorted(expected)
    counted = Counter(key for key, _, _, _ in expected)
    assert {r["key"]: int(r["n"]) for r in query(root, "p", "SELECT * FROM per_key")} == counted


def test_quarantine_keeps_malformed_messages_with_their_offsets(broker: Broker,
                                                               tmp_path: Path) -> None:
    topic = new_topic(broker, partitions=1)
    root = project(tmp_path, broker, topic, extra="on_error: quarantine")
    reconcile(root, "apply", "--auto-approve")
    produce(broker, topic, [*orders(0, 2, 1), (0, b'{"id": "seven"'), *orders(2, 1, 1)])
    reconcile(root, "run")
    assert order_ids(root) == [0, 1, 2]
    kept = [json.loads(line) for path in (root / ".reconcile/data/p/quarantine/orders_in")
            .rglob("*.json") for line in path.read_text().splitlines()]
    assert kept == [{"topic": topic, "partition": 0, "offset": 2, "value": '{"id": "seven"'}]


def test_new_partitions_are_read_from_their_start(broker: Broker, tmp_path: Path) -> None:
    topic = new_topic(broker, partitions=1)
    root = project(tmp_path, broker, topic)
    reconcile(root, "apply", "--auto-approve")
    produce(broker, topic, orders(0, 4, 1))
    reconcile(root, "run")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=30)
    produce(broker, topic, [(2, value) for _, value in orders(4, 3, 1)])
    reconcile(root, "run")
    assert order_ids(root) == list(range(7))
    assert manifest(root, "p")["connectors"]["orders_in"]["kafka_offsets"] == {
        topic: {"0": 4, "1": 0, "2": 3}}


def test_a_changed_view_is_bootstrapped_without_reading_the_topic_again(
        broker: Broker, tmp_path: Path) -> None:
    topic = new_topic(broker)
    new_topic(broker, 1, f"{topic}-out")
    root = project(tmp_path, broker, topic)
    reconcile(root, "apply", "--auto-approve")
    produce(broker, topic, orders(0, 12))
    reconcile(root, "run")
    before = manifest(root, "p")["connectors"]["orders_in"]
    sent = len(consume_all(broker, f"{topic}-out"))
    (root / "pipelines/p/program.sql").write_text(SQL.replace("count(*) as orders",
                                                              "count(*) + 1 as orders"))
    reconcile(root, "apply", "--auto-approve")
    assert manifest(root, "p")["connectors"]["orders_in"] == before
    assert order_ids(root) == list(range(12))
    plus_one = [{**row, "orders": row["orders"] + 1} for row in expected_totals(orders(0, 12))]
    assert totals(root) == plus_one
    # The output gets the bootstrap's net change: each customer's old row out, new row in.
    change = consume_all(broker, f"{topic}-out")[sent:]
    serial = manifest(root, "p")["serial"]
    assert sorted((m["customer"], m["orders"], m["_op"], m["_serial"]) for _, m in change) == \
        sorted([(r["customer"], r["orders"], "delete", serial)
                for r in expected_totals(orders(0, 12))]
               + [(r["customer"], r["orders"], "insert", serial) for r in plus_one])

    other = new_topic(broker)  # a changed topic resets the connector: its table starts over
    produce(broker, other, orders(100, 3))
    spec = root / "pipelines/p/pipeline.yaml"
    spec.write_text(spec.read_text().replace(f"topic: {topic}\n", f"topic: {other}\n"))
    plan = reconcile(root, "plan")
    assert f"/{topic} -> kafka://{broker.bootstrap_servers}/{other}; rows already ingested " \
        "stay" in plan
    assert f"reads kafka://{broker.bootstrap_servers}/{other} from the earliest offsets" in plan
    reconcile(root, "apply", "--auto-approve")
    after = manifest(root, "p")["connectors"]["orders_in"]
    assert after["generation"] != before["generation"]
    reconcile(root, "run")
    assert order_ids(root) == [*range(12), 100, 101, 102]


def test_retention_that_dropped_unread_offsets_is_one_line_then_skipped_on_request(
        broker: Broker, tmp_path: Path) -> None:
    topic = new_topic(broker, partitions=1)
    root = project(tmp_path, broker, topic)
    reconcile(root, "apply", "--auto-approve")
    produce(broker, topic, orders(0, 3, 1))
    reconcile(root, "run")
    produce(broker, topic, orders(3, 5, 1))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    [deleted] = admin.delete_records([TopicPartition(topic, 0, 6)]).values()
    deleted.result(timeout=30)  # what retention does: offsets 3 to 5 are gone
    failed = reconcile(root, "run", expect=1)
    assert (f"input connector 'orders_in': topic {topic} partition 0: offsets 3 to 5 were "
            "deleted by the topic's retention before they were read") in failed
    assert len(failed.strip().splitlines()) == 1
    project(tmp_path, broker, topic, options="failOnDataLoss: false")
    assert "resets" not in reconcile(root, "plan")
    reconcile(root, "apply", "--auto-approve")
    reconcile(root, "run")
    assert order_ids(root) == [0, 1, 2, 6, 7]


def test_starting_offsets_latest_reads_what_comes_after_the_apply(broker: Broker,
                                                                  tmp_path: Path) -> None:
    topic = new_topic(broker)
    produce(broker, topic, orders(0, 6))
    # A client setting beside the engine's own (kafka.bootstrap.servers) reaches Spark's reader.
    root = project(tmp_path, broker, topic,
                   options="startingOffsets: latest, kafka.client.id: reconcile-test")
    reconcile(root, "apply", "--auto-approve")
    produce(broker, topic, orders(6, 4))
    reconcile(root, "run")
    assert order_ids(root) == [6, 7, 8, 9]
    assert Counter(int(r["orders"]) for r in totals(root)) == Counter(
        r["orders"] for r in expected_totals(orders(6, 4)))


@pytest.mark.nightly  # in `make test`: the runner on files (tests/runner), Kafka's steps here
def test_a_continuous_runner_keeps_up_with_a_topic(broker: Broker, tmp_path: Path) -> None:
    topic = new_topic(broker)
    root = project(tmp_path / "project", broker, topic)
    reconcile(root, "apply", "--auto-approve")
    [port] = free_ports(1)
    log = (tmp_path / "runner.log").open("w")
    runner = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "-C", str(root), "run", "--continuous",
         "--interval", "1", "--metrics-port", str(port)], stdout=log,
        stderr=subprocess.STDOUT, env={**os.environ, **FAST_JVM_ENV})
    try:
        produced: list[tuple[int, bytes | None]] = []
        for burst in range(3):  # messages keep arriving while the runner steps
            messages = orders(burst * 40, 40)
            produce(broker, topic, messages)
            produced += messages
            eventually(holds(root, len(produced)), f"burst {burst}", runner)
        assert order_ids(root) == list(range(120))
        assert totals(root) == expected_totals(produced)
        lags = {labels: value for (name, labels), value in scrape_all(port).items()
                if name == "reconcile_kafka_lag_records"}
        assert lags == {f"{topic}/0": 0, f"{topic}/1": 0}
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=60) == 0
    finally:
        if runner.poll() is None:
            runner.kill()
        log.close()


def holds(root: Path, count: int) -> Callable[[], bool]:
    return lambda: len(order_ids(root)) == count


def scrape_all(port: int) -> dict[tuple[str, str], float]:
    """The runner's metrics by (name, partition) sample."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        return {(sample.name, sample.labels.get("partition", "")): sample.value
                for family in text_string_to_metric_families(reply.read().decode())
                for sample in family.samples}
