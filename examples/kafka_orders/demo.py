"""The Kafka example: a pipeline fed by a topic, its totals sent to another topic.

1. Start a single-node Kafka broker (KRaft, from Apache Kafka's jars on Maven Central,
   fetched once into the jar cache) and produce 3,000 orders to a 3-partition topic.
2. Deploy and run one step: the orders are read as one bounded batch, the per-country
   totals computed, and each total sent to `country-totals` as a JSON message.
3. Produce more orders: `status` shows the lag per partition, the next step reads only
   the new offsets and sends only the totals that changed (`_op` delete/insert pairs).
4. Change the pipeline (a new view): the apply computes it from the orders the pipeline
   holds and reads nothing from Kafka; the committed offsets do not move.

    make demo-kafka     # or: .venv/bin/python examples/kafka_orders/demo.py
"""

from __future__ import annotations

import json
import logging
import random
import sys
import tempfile
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent))  # the test broker: tests/kafka_broker.py

from demo_support import console, project_copy, reconcile, stage  # noqa: E402

from tests.kafka_broker import kafka_broker  # noqa: E402

QUIET = logging.getLogger("kafka-demo")  # librdkafka's retries once the broker has stopped
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False
COUNTRIES = ("DE", "FR", "NL", "PL", "SE")
NEW_VIEW = """
-- Orders of 100 or more per country (new in this change).
create materialized view big_orders as
select country, count(*) as big_orders
from orders where amount >= 100
group by country;
"""


def produce(servers: str, first: int, count: int) -> None:
    rng = random.Random(first)
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 20, "logger": QUIET})
    for order_id in range(first, first + count):
        producer.produce("orders", json.dumps({
            "order_id": order_id, "country": rng.choice(COUNTRIES),
            "amount": f"{rng.uniform(5, 250):.2f}",
            "ordered_at": f"2026-11-{1 + order_id % 27:02d}T12:00:00Z"}).encode(),
            partition=order_id % 3)
    producer.flush(30)


def show_messages(servers: str, start: int) -> int:
    """The output topic's messages from `start`; returns the next offset."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "demo",
                         "enable.auto.commit": False, "logger": QUIET})
    _, end = consumer.get_watermark_offsets(TopicPartition("country-totals", 0), timeout=30)
    consumer.assign([TopicPartition("country-totals", 0, start)])
    shown = 0
    while start + shown < end:
        for message in consumer.consume(end - start - shown, timeout=30):
            console.print(f"    {message.key().decode()}  {message.value().decode()[:110]}...",
                          markup=False, soft_wrap=True)
            shown += 1
    consumer.close()
    return end


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="kafka-broker-") as folder, \
            kafka_broker(Path(folder)) as broker, project_copy(HERE) as project:
        servers = broker.bootstrap_servers
        stage(f"1. A Kafka broker at {servers}; 3,000 orders on topic 'orders'")
        admin = AdminClient({"bootstrap.servers": servers, "logger": QUIET})
        for future in admin.create_topics([NewTopic("orders", 3, 1),
                                           NewTopic("country-totals", 1, 1)]).values():
            future.result(timeout=30)
        produce(servers, 0, 3000)
        spec = project / "pipelines/kafka_orders/pipeline.yaml"
        spec.write_text(spec.read_text().replace("127.0.0.1:9092", servers))

        stage("2. Deploy, and run a step: one bounded batch per partition range")
        reconcile(project, "apply", "--auto-approve")
        reconcile(project, "run")
        reconcile(project, "query", "-p", "kafka_orders",
                  "SELECT * FROM country_totals ORDER BY country")
        console.print("Messages on 'country-totals':")
        sent = show_messages(servers, 0)

        stage("3. 600 more orders: the lag, then a step that reads only them")
        produce(servers, 3000, 600)
        reconcile(project, "status")
        reconcile(project, "run")
        console.print("New messages on 'country-totals' (each changed total out and in):")
        sent = show_messages(servers, sent)

        stage("4. A new view: bootstrapped from the orders held, Kafka not read")
        (project / "pipelines/kafka_orders/orders.sql").write_text(
            (project / "pipelines/kafka_orders/orders.sql").read_text() + NEW_VIEW)
        reconcile(project, "plan")
        reconcile(project, "apply", "--auto-approve")
        reconcile(project, "query", "-p", "kafka_orders",
                  "SELECT * FROM big_orders ORDER BY country")
        reconcile(project, "status")


if __name__ == "__main__":
    main()
