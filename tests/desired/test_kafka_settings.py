"""A Kafka connector's settings without a broker: what pipeline.yaml may say (through the
real `reconcile validate` and `plan`), how a step shares its cap between partitions, and
what the offset client is given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.engine.io.kafka_offsets import (
    PartitionRange,
    capped_ends,
    client_options,
    lag,
    librdkafka_config,
)
from reconciler.state.connectors import KafkaEndpoint
from reconciler.support.errors import ReconcileError
from tests.cli_helpers import reconcile
from tests.projects import write_files

SQL = "create table orders (id bigint, customer string);\n"


def kafka_project(root: Path, connector: str) -> Path:
    return write_files(root, {
        "reconcile.yaml": "",
        "pipelines/p/program.sql": SQL,
        "pipelines/p/pipeline.yaml": "name: p\nconnectors:\n" + connector})


INPUT = """  - name: orders_in
    table: orders
    type: kafka
    format: json
    bootstrap_servers: 127.0.0.1:1
    topic: orders
"""


@pytest.mark.parametrize(("extra", "message"), [
    ("    options: {kafka.sasl.jaas.config: 'x required password=\"p\";'}\n",
     "option 'kafka.sasl.jaas.config' looks like a secret; give it through env_options"),
    ("    options: {kafka.ssl.key.password: p}\n", "option 'kafka.ssl.key.password' looks like"),
    ("    env_options: {kafka.sasl.jaas.config: GITHUB_TOKEN}\n", "env_options"),
    ("    env_options: {kafka.sasl.jaas.config: AWS_SECRET_ACCESS_KEY}\n",
     "env_options.kafka.sasl.jaas.config: 'AWS_SECRET_ACCESS_KEY' is not an environment "
     "variable a Kafka option may read: its name must start with KAFKA_"),
    ("    env_options: {sasl.password: KAFKA_PASSWORD}\n",
     "env_options sets Kafka client options (kafka.<setting>), not 'sasl.password'"),
    ("    options: {subscribe: other}\n", "option 'subscribe' is not allowed: name the topics"),
    ("    options: {endingOffsets: latest}\n", "option 'endingOffsets' is not allowed"),
    ("    options: {startingOffsets: '{\"orders\": {\"0\": 5}}'}\n",
     "startingOffsets is 'earliest' or 'latest'"),
    ("    options: {kafka.bootstrap.servers: 127.0.0.1:2}\n", "needs 'bootstrap_servers'"),
    ("    path: /etc\n", "of type 'kafka' takes no 'path'"),
    ("    topic_pattern: 'ord.*'\n", "needs exactly one of 'topic' or 'topic_pattern'"),
])
def test_pipeline_yaml_cannot_name_secrets_or_ranges(tmp_path: Path, extra: str,
                                                     message: str) -> None:
    root = kafka_project(tmp_path, INPUT + extra)
    output = reconcile(root, "validate", expect=1)
    assert message in output and "pipeline.yaml" in output, output
    assert len(output.strip().splitlines()) == 1


@pytest.mark.parametrize(("connector", "message"), [
    (INPUT.replace("format: json", "format: csv"), "needs a 'format': json"),
    (INPUT.replace("format: json", "format: raw") + "    changes: true\n",
     "changes needs format json"),
    (INPUT.replace("topic: orders", "topic: 'a b'"), "a Kafka topic is 1 to 249 letters"),
    (INPUT.replace("table: orders", "view: orders").replace("    format: json\n", "")
     .replace("topic: orders", "topic: [a, b]"), "needs one 'topic'"),
])
def test_kafka_connectors_say_what_is_missing(tmp_path: Path, connector: str,
                                              message: str) -> None:
    output = reconcile(kafka_project(tmp_path, connector), "validate", expect=1)
    assert message in output, output


@pytest.mark.spark
def test_client_settings_and_secrets_modify_nothing_where_the_topic_resets(
        tmp_path: Path) -> None:
    root = kafka_project(tmp_path, INPUT)
    reconcile(root, "apply", "--auto-approve")  # earliest: the apply asks the broker nothing
    tuned = INPUT + ("    options: {maxOffsetsPerTrigger: 500, kafka.fetch.max.bytes: 1048576,"
                     " kafka.security.protocol: SASL_SSL}\n"
                     "    env_options: {kafka.sasl.jaas.config: KAFKA_JAAS}\n")
    kafka_project(tmp_path, tuned)
    [pipeline] = json.loads(reconcile(root, "plan", "--json"))["pipelines"]
    [action] = [a for a in pipeline["actions"] if a["name"] == "orders_in"]
    assert action["action"] == "keep", action
    kafka_project(tmp_path, tuned.replace("topic: orders", "topic: [orders, returns]"))
    [pipeline] = json.loads(reconcile(root, "plan", "--json"))["pipelines"]
    [action] = [a for a in pipeline["actions"] if a["name"] == "orders_in"]
    assert action["action"] == "reset", action
    assert any("kafka://127.0.0.1:1/orders,returns from the earliest offsets" in reason
               for reason in action["reasons"]), action


def test_a_cap_is_shared_in_equal_turns_and_never_exceeded() -> None:
    ranges = {("t", 0): PartitionRange(0, 1000), ("t", 1): PartitionRange(0, 3),
              ("t", 2): PartitionRange(50, 60), ("t", 3): PartitionRange(0, 0)}
    starts = {("t", 0): 10, ("t", 1): 0, ("t", 2): 55, ("t", 3): 0}
    for cap in (1, 2, 7, 20, 100, 10_000):
        ends = capped_ends(starts, ranges, cap)
        read = {p: ends[p] - starts[p] for p in starts}
        waiting = {p: ranges[p].latest - starts[p] for p in starts}
        assert sum(read.values()) == min(cap, sum(waiting.values()))
        assert all(0 <= read[p] <= waiting[p] for p in starts)
        # No partition with records left got fewer than any other's share.
        starved = [p for p in starts if read[p] < waiting[p]]
        assert all(read[p] >= min(read[q], waiting[p]) - 1 for p in starved for q in starts)
    assert capped_ends(starts, ranges, None) == {p: r.latest for p, r in ranges.items()}


def test_lag_counts_from_the_committed_offset_or_the_earliest_kept() -> None:
    ranges = {("t", 0): PartitionRange(5, 20), ("t", 1): PartitionRange(0, 4)}
    assert lag({("t", 0): 12}, ranges) == {("t", 0): 8, ("t", 1): 4}
    assert lag({("t", 0): 2, ("t", 1): 4}, ranges) == {("t", 0): 15, ("t", 1): 0}


def test_secrets_come_from_the_environment_and_reach_librdkafka(
        monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = KafkaEndpoint("b:9092", ("t",), env_options=(
        ("kafka.sasl.jaas.config", "KAFKA_JAAS"),))
    with pytest.raises(ReconcileError, match="environment variable KAFKA_JAAS, which is not"):
        client_options(endpoint, {})
    monkeypatch.setenv("KAFKA_JAAS", 'org.apache.kafka.common.security.scram.ScramLoginModule '
                       'required username="reader" password="p\\"w";')
    settings = client_options(endpoint, {"kafka.security.protocol": "SASL_SSL",
                                         "kafka.sasl.mechanism": "SCRAM-SHA-512",
                                         "maxOffsetsPerTrigger": 5})
    assert settings["kafka.bootstrap.servers"] == "b:9092"
    assert "maxOffsetsPerTrigger" not in settings
    config = librdkafka_config(settings)
    assert {key: config[key] for key in ("bootstrap.servers", "security.protocol",
                                         "sasl.mechanism", "sasl.username", "sasl.password")
            } == {"bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL",
                  "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "reader",
                  "sasl.password": 'p"w'}


@pytest.mark.spark
def test_an_unreachable_broker_is_one_line_in_status(tmp_path: Path) -> None:
    root = kafka_project(tmp_path, INPUT)
    reconcile(root, "apply", "--auto-approve")
    [report] = json.loads(reconcile(root, "status", "--json"))
    assert report["waiting_input"] == {"orders_in": None}
    assert report["kafka_lag"] == {"orders_in": None}
    assert "input waiting: orders_in ?" in reconcile(root, "status")


def test_a_runners_metrics_show_each_partitions_lag_after_each_step() -> None:
    from reconciler.runner.metrics import RunnerMetrics

    asked = iter([{"orders_in": {"orders/0": 7, "orders/1": 0}}, {"orders_in": None}])
    metrics = RunnerMetrics(lags=lambda pipeline: next(asked))
    metrics.record("p", "idle")
    lag = {partition: metrics.registry.get_sample_value(
        "reconcile_kafka_lag_records",
        {"pipeline": "p", "connector": "orders_in", "partition": partition})
        for partition in ("orders/0", "orders/1")}
    assert lag == {"orders/0": 7, "orders/1": 0}
    metrics.record("p", "failed")  # the broker out of reach: the last figures stay
    assert metrics.registry.get_sample_value("reconcile_kafka_lag_records", {
        "pipeline": "p", "connector": "orders_in", "partition": "orders/0"}) == 7


def test_the_kafka_example_is_a_valid_project(tmp_path: Path) -> None:
    from tests.projects import copy_example

    project = copy_example("kafka_orders", tmp_path)
    assert "1 input and 1 output connectors: ok" in reconcile(project, "validate")
