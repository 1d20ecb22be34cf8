"""Kafka ingestion on millions of messages: the engine against a hand-written Spark job.

Why: a user with Spark and Delta Lake can read a topic into a Delta table and keep an
aggregate over it by hand. The engine's Kafka connector (`engine/io/kafka_source.py`) adds
offsets committed in the manifest, an exactly-once append and a maintained view; this
bench shows what that costs on millions of records, with default settings.

What: a broker of its own (`tests/kafka_broker.py`), a topic of 4 partitions holding
`--messages` JSON orders (2,000,000 by default), and a pipeline that ingests them into
`orders` and keeps `country_totals` (revenue and count per country, 20 countries).

1. First load. The engine: `reconcile apply`, then `reconcile run` (one step: the whole
   topic as one bounded batch, the view computed). The anchor, in the same session: a
   batch read of the topic from its earliest to its latest offsets, `from_json`, an
   append to a Delta table, and the aggregate written to another.
2. Steps. `--steps` times, `--step-messages` (10,000) new orders: the engine's
   `reconcile run` (the new offsets only, the view maintained) against the anchor doing
   what a hand-written batch job does: read the new offsets (it keeps them itself),
   append, and recompute the aggregate from the table.

Both sides end with the same multiset of orders and the same totals (checked by
`exceptAll` counts, nothing collected). Prints seconds, records per second and the
ratios engine / anchor.

Usage: `python bench/kafka_bench.py [--messages 2000000] [--steps 3]` (`make bench-kafka`).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.kafka_broker import kafka_broker  # noqa: E402

if TYPE_CHECKING:  # pyspark is imported once the session is started
    from pyspark.sql import SparkSession

PARTITIONS = 4
WARM_UP = "warm-up"
COUNTRIES = [f"C{n:02d}" for n in range(20)]
QUIET = logging.getLogger("kafka-bench")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False
SQL = """
create table orders (order_id bigint, country string, amount bigint);

create materialized view country_totals as
select country, sum(amount) as revenue, count(*) as orders
from orders group by country;
"""
AGGREGATE = ("SELECT country, sum(amount) AS revenue, count(*) AS orders FROM {} "
             "GROUP BY country")


def produce(servers: str, topic: str, first: int, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 50,
                         "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
                         "compression.type": "lz4", "logger": QUIET})
    for order_id in range(first, first + count):
        value = (f'{{"order_id":{order_id},"country":"{COUNTRIES[order_id % 20]}",'
                 f'"amount":{order_id % 997}}}')
        while True:
            try:
                producer.produce(topic, value.encode(), partition=order_id % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0


def write_project(root: Path, servers: str, topic: str) -> Path:
    folder = root / "pipelines/orders"
    folder.mkdir(parents=True)
    (root / "reconcile.yaml").write_text("storage: .reconcile/data\n")
    (folder / "program.sql").write_text(SQL)
    (folder / "pipeline.yaml").write_text(
        f"name: orders\nbootstrap_policy: allow\nconnectors:\n"
        f"  - {{name: orders_in, table: orders, type: kafka, format: json, "
        f"bootstrap_servers: '{servers}', topic: {topic}}}\n")
    return root


def reconcile(project: Path, *args: str) -> float:
    from reconciler.cli.main import cli

    started = time.perf_counter()
    cli(["-C", str(project), *args], standalone_mode=False)
    return time.perf_counter() - started


class Anchor:
    """The hand-written job: it keeps its own offsets, appends, recomputes the aggregate."""

    def __init__(self, spark: SparkSession, servers: str, topic: str, folder: Path):
        self.spark, self.servers, self.topic = spark, servers, topic
        self.orders, self.totals = str(folder / "orders"), str(folder / "totals")
        self.offsets: dict[str, int] = {}

    def step(self, latest: dict[int, int]) -> float:
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        started = time.perf_counter()
        schema = StructType([StructField("order_id", LongType()),
                             StructField("country", StringType()),
                             StructField("amount", LongType())])
        starting = {str(p): self.offsets.get(str(p), -2) for p in range(PARTITIONS)}
        ending = {str(p): latest[p] for p in range(PARTITIONS)}
        records = (self.spark.read.format("kafka")
                   .option("kafka.bootstrap.servers", self.servers)
                   .option("subscribe", self.topic)
                   .option("startingOffsets", json.dumps({self.topic: starting}))
                   .option("endingOffsets", json.dumps({self.topic: ending})).load())
        rows = records.select(F.from_json(F.col("value").cast("string"), schema).alias("o")
                              ).select("o.*")
        rows.write.format("delta").mode("append").save(self.orders)
        (self.spark.sql(AGGREGATE.format(f"delta.`{self.orders}`"))
         .write.format("delta").mode("overwrite").save(self.totals))
        self.offsets = ending
        return time.perf_counter() - started


def latest_offsets(servers: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": "bench", "logger": QUIET})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(PARTITIONS)}
    finally:
        consumer.close()


def same_rows(spark: SparkSession, left: str, right: str) -> bool:
    a, b = spark.sql(left), spark.sql(right)
    return a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--step-messages", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafka-bench-") as folder, \
            kafka_broker(Path(folder) / "broker", heap="1g") as broker:
        from confluent_kafka.admin import AdminClient, NewTopic

        servers, topic, work = broker.bootstrap_servers, "orders", Path(folder)
        admin = AdminClient({"bootstrap.servers": servers,
                             "logger": QUIET})  # type: ignore[dict-item]  # a Logger is taken
        for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)
                                           for name in (topic, WARM_UP)]).values():
            future.result(timeout=30)
        produce(servers, WARM_UP, 0, options.messages // 10)
        started = time.perf_counter()
        produce(servers, topic, 0, options.messages)
        print(f"produced {options.messages:,} messages in "
              f"{time.perf_counter() - started:.1f}s", flush=True)
        # Both sides first run once on a tenth of the messages: the JVM's compiled code and
        # Spark's caches are warm for whichever is measured first.
        warm_up = write_project(work / "warm-up", servers, WARM_UP)
        reconcile(warm_up, "apply", "--auto-approve")  # starts the session (Kafka's jars)
        reconcile(warm_up, "run")
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        assert spark is not None
        Anchor(spark, servers, WARM_UP, work / "anchor-warm-up").step(
            latest_offsets(servers, WARM_UP))
        project = write_project(work / "project", servers, topic)
        reconcile(project, "apply", "--auto-approve")
        anchor = Anchor(spark, servers, topic, work / "anchor")

        engine_load = reconcile(project, "run")
        anchor_load = anchor.step(latest_offsets(servers, topic))
        rate = options.messages / engine_load
        print(f"first load of {options.messages:,}: engine {engine_load:.1f}s "
              f"({rate:,.0f} records/s), anchor {anchor_load:.1f}s, "
              f"ratio {engine_load / anchor_load:.2f}", flush=True)

        engine_steps, anchor_steps = [], []
        produced = options.messages
        for _ in range(options.steps):
            produce(servers, topic, produced, options.step_messages)
            produced += options.step_messages
            engine_steps.append(reconcile(project, "run"))
            anchor_steps.append(anchor.step(latest_offsets(servers, topic)))
        engine_step, anchor_step = (statistics.median(engine_steps),
                                    statistics.median(anchor_steps))
        print(f"step of {options.step_messages:,} on {options.messages:,}: engine "
              f"{engine_step:.2f}s, anchor {anchor_step:.2f}s, ratio "
              f"{engine_step / anchor_step:.2f} (medians of {options.steps})", flush=True)

        tables = work / "project/.reconcile/data/orders"
        engine_orders = next((tables / "tables").iterdir())
        assert same_rows(spark, f"SELECT * FROM delta.`{engine_orders}`",
                         f"SELECT * FROM delta.`{anchor.orders}`"), "orders differ"
        assert spark.read.format("delta").load(str(engine_orders)).count() == produced
        engine_totals = next((tables / "views").iterdir())
        assert same_rows(spark, f"SELECT country, revenue, orders FROM delta.`{engine_totals}`",
                         f"SELECT * FROM delta.`{anchor.totals}`"), "totals differ"
        print("both sides hold the same orders and totals")


if __name__ == "__main__":
    main()
