"""A malformed Kafka message holds the step with advice; following it, either way, must
ingest every message exactly once (issue 78, finding 5).

The held step says "fix the producer, or set on_error: quarantine or on_bad_input: skip".
Both settings say how the connector handles what it reads, not what it reads: the plan
must keep the connector's offsets, and after the apply and a run the table must hold each
good message once. A reset would read the topic again from its earliest offsets and append
every message already ingested a second time. Counts come from Spark SQL (`count(*)`,
`count(DISTINCT id)`), through the real CLI, against a real broker (`tests/kafka_broker.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_helpers import query, reconcile
from tests.engine.test_kafka import expected_totals, new_topic, orders, produce, project, totals
from tests.kafka_broker import Broker, kafka_broker

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with kafka_broker(tmp_path_factory.mktemp("kafka")) as running:
        yield running


def counts(root: Path) -> tuple[int, int]:
    """(rows, distinct message ids) of the input table, counted by Spark."""
    [row] = query(root, "p", "SELECT count(*) AS n, count(DISTINCT id) AS ids FROM orders")
    return int(row["n"]), int(row["ids"])


def deployed_with_six_orders(broker: Broker, tmp_path: Path
                             ) -> tuple[Path, str, list[tuple[int, bytes | None]]]:
    """A deployed project over a new topic whose six orders one step has ingested."""
    topic = new_topic(broker, partitions=1)
    new_topic(broker, 1, f"{topic}-out")
    root = project(tmp_path, broker, topic)
    reconcile(root, "apply", "--auto-approve")
    first = orders(0, 6, 1)
    produce(broker, topic, first)
    reconcile(root, "run")
    return root, topic, first


@pytest.mark.parametrize("advice", ["on_error: quarantine", "on_bad_input: skip"])
def test_following_the_held_steps_advice_ingests_each_message_once(
        broker: Broker, tmp_path: Path, advice: str) -> None:
    root, topic, first = deployed_with_six_orders(broker, tmp_path)
    assert counts(root) == (6, 6)

    later = orders(6, 4, 1)
    produce(broker, topic, [(0, b"{not json"), *later])
    held = reconcile(root, "run", expect=1)
    assert "set on_error: quarantine or on_bad_input: skip" in held, held
    assert counts(root) == (6, 6)

    project(tmp_path, broker, topic, extra=advice)  # the advice, followed
    key, value = (part.strip() for part in advice.split(":"))
    plan = reconcile(root, "plan")
    assert "0 to reset" in plan and "earliest" not in plan, plan
    assert f"{key} fail -> {value}" in plan, plan
    [pipeline] = json.loads(reconcile(root, "plan", "--json"))["pipelines"]
    [connector] = [a for a in pipeline["actions"] if a["name"] == "orders_in"]
    assert connector["action"] == "keep", connector
    assert pipeline["diff"]["modified_input_connectors"] == []

    reconcile(root, "apply", "--auto-approve")
    reconcile(root, "run")
    good = first + later
    assert counts(root) == (len(good), len(good))
    assert totals(root) == expected_totals(good)
    reconcile(root, "run")  # nothing new: nothing read again
    assert counts(root) == (len(good), len(good))
    if key == "on_error":
        kept = [json.loads(line) for path in (root / ".reconcile/data/p/quarantine/orders_in")
                .rglob("*.json") for line in path.read_text().splitlines()]
        assert [(m["topic"], m["offset"]) for m in kept] == [(topic, 6)]


def test_new_servers_over_the_same_topic_are_refused_until_the_plan_says_where_to_start(
        broker: Broker, tmp_path: Path) -> None:
    """The servers are what a connector reads: a change resets it. Over a topic its table
    holds rows from, the reset would append them again: refused, then started after what
    the topic holds (`startingOffsets: latest`), each message is in the table once."""
    root, topic, first = deployed_with_six_orders(broker, tmp_path)

    spec = root / "pipelines/p/pipeline.yaml"
    servers = broker.bootstrap_servers
    moved = spec.read_text().replace(f"bootstrap_servers: {servers}\n    topic: {topic}\n",
                                     f"bootstrap_servers: {servers},{servers}\n"
                                     f"    topic: {topic}\n")
    assert moved != spec.read_text()
    spec.write_text(moved)
    refused = reconcile(root, "apply", "--auto-approve", expect=1)
    assert "input connector orders_in is reset and would read" in refused, refused
    assert "startingOffsets: latest" in refused and len(refused.strip().splitlines()) == 1
    assert counts(root) == (6, 6)

    spec.write_text(moved.replace("options: {}", "options: {startingOffsets: latest}"))
    plan = reconcile(root, "plan")
    assert "what the topic holds now is not read" in plan and "refused" not in plan, plan
    reconcile(root, "apply", "--auto-approve")
    later = orders(6, 4, 1)
    produce(broker, topic, later)
    reconcile(root, "run")
    assert counts(root) == (10, 10)
    assert totals(root) == expected_totals(first + later)
