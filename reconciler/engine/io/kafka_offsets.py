"""A Kafka connector's partitions and offsets, asked of the broker without Spark.

A step must know the end offsets it will read to before it reads (they are what the
manifest commits; `batch_range` plans them, data loss and `maxOffsetsPerTrigger`
included), an apply fixes a new connector's `startingOffsets: latest`, `run` must tell
an idle topic from a busy one without starting a Spark job (`has_new_records`), and
`reconcile status` shows each input's lag without a JVM. All of them ask the broker
here, with librdkafka (`confluent_kafka`): the topics' partitions and each partition's
earliest and latest offsets, in one request each.

The client gets the connector's servers and its security settings as Spark's Kafka
client would: `kafka.security.protocol`, `kafka.sasl.mechanism`, and the user name and
password of a PLAIN or SCRAM `kafka.sasl.jaas.config` (from `env_options`). Java key
stores are not librdkafka's; a broker whose certificate is not signed by a CA the
system trusts needs `kafka.ssl.ca.location` too. librdkafka's own logging is kept off
stderr: an unreachable broker is one line from here, not a stream of retries.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.state.connectors import ConnectorDefinition, ConnectorState, KafkaEndpoint
from reconciler.support.errors import ReconcileError

TIMEOUT_SECONDS = 15.0
STATUS_TIMEOUT_SECONDS = 3.0
"""How long `status` and a runner's metrics wait for a broker: they show `?` rather than
hang; a step waits the longer `TIMEOUT_SECONDS`, then fails in one line."""
_LOGGER = logging.getLogger("reconciler.kafka")
_LOGGER.addHandler(logging.NullHandler())
_LOGGER.propagate = False
_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
_CLIENT_OPTIONS = {"kafka.security.protocol": "security.protocol",
                   "kafka.sasl.mechanism": "sasl.mechanism",
                   "kafka.ssl.ca.location": "ssl.ca.location",
                   "kafka.ssl.endpoint.identification.algorithm":
                       "ssl.endpoint.identification.algorithm"}

Partition = tuple[str, int]


@dataclass(frozen=True)
class PartitionRange:
    """A partition's offsets on the broker: the earliest it still holds, and the next one
    it will write (`latest`, exclusive)."""

    earliest: int
    latest: int


def client_options(endpoint: KafkaEndpoint, options: Mapping[str, Any]) -> dict[str, str]:
    """Every `kafka.*` option Spark's client gets: the connector's, its servers, and each
    secret from the environment variable `env_options` names (a missing one is an error
    naming the variable, never an empty secret)."""
    settings = {key: str(value) for key, value in options.items()
                if key.lower().startswith("kafka.")}
    settings["kafka.bootstrap.servers"] = endpoint.bootstrap_servers
    for option, variable in endpoint.env_options:
        value = os.environ.get(variable)
        if value is None:
            raise ReconcileError(f"Kafka option '{option}' comes from the environment "
                                 f"variable {variable}, which is not set")
        settings[option] = value
    return settings


def librdkafka_config(settings: Mapping[str, str]) -> dict[str, Any]:
    """`client_options` as librdkafka spells them (see the module docstring)."""
    config: dict[str, Any] = {"bootstrap.servers": settings["kafka.bootstrap.servers"],
                              "logger": _LOGGER, "error_cb": lambda _error: None,
                              "socket.connection.setup.timeout.ms": 10000}
    for option, value in settings.items():
        if option.lower() in _CLIENT_OPTIONS:
            config[_CLIENT_OPTIONS[option.lower()]] = value
    jaas = next((value for option, value in settings.items()
                 if option.lower() == "kafka.sasl.jaas.config"), None)
    for field, value in _JAAS_FIELD.findall(jaas or ""):
        config[f"sasl.{field}"] = value.replace('\\"', '"')
    return config


class OffsetClient:
    """One connection to a connector's cluster, for the length of one question."""

    def __init__(self, name: str, endpoint: KafkaEndpoint, options: Mapping[str, Any],
                 timeout: float = TIMEOUT_SECONDS):
        from confluent_kafka.admin import AdminClient  # librdkafka: loaded when asked

        self.name, self.endpoint, self.timeout = name, endpoint, timeout
        self.admin = AdminClient(librdkafka_config(client_options(endpoint, options)))

    def _failed(self, what: str, error: BaseException) -> ReconcileError:
        reason = str(error.args[0] if error.args else error)
        reason = getattr(error.args[0], "str", lambda: reason)() if error.args else reason
        return ReconcileError(f"connector '{self.name}': cannot {what} from Kafka at "
                              f"{self.endpoint.bootstrap_servers}: {reason}")

    def partitions(self) -> list[Partition]:
        """The connector's topics' partitions, sorted; a pattern matches whole topic names
        (as Spark's `subscribePattern`), internal topics (`__...`) left out."""
        try:
            metadata = self.admin.list_topics(timeout=self.timeout)
        except Exception as error:  # KafkaException: the broker is not reachable
            raise self._failed("list the topics", error) from None
        if self.endpoint.topic_pattern is not None:
            pattern = re.compile(self.endpoint.topic_pattern)
            names = [topic for topic in metadata.topics
                     if not topic.startswith("__") and pattern.fullmatch(topic)]
        else:
            missing = [topic for topic in self.endpoint.topics if topic not in metadata.topics]
            if missing:
                raise ReconcileError(f"connector '{self.name}': topic '{missing[0]}' does not "
                                     f"exist at {self.endpoint.bootstrap_servers}")
            names = list(self.endpoint.topics)
        return sorted((topic, partition) for topic in names
                      for partition in metadata.topics[topic].partitions)

    def ranges(self, partitions: list[Partition]) -> dict[Partition, PartitionRange]:
        """Each partition's earliest and latest offset (two list-offsets requests)."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        if not partitions:
            return {}
        found: dict[str, dict[Partition, int]] = {}
        for side, spec in (("earliest", OffsetSpec.earliest()),  # type: ignore[no-untyped-call]
                           ("latest", OffsetSpec.latest())):  # type: ignore[no-untyped-call]
            asked = {TopicPartition(topic, partition): spec for topic, partition in partitions}
            try:
                futures = self.admin.list_offsets(asked, request_timeout=self.timeout)
                found[side] = {(asked_partition.topic, asked_partition.partition):
                               future.result().offset
                               for asked_partition, future in futures.items()}
            except Exception as error:
                raise self._failed("read the offsets", error) from None
        return {partition: PartitionRange(found["earliest"][partition],
                                          found["latest"][partition])
                for partition in partitions}

    def all_ranges(self) -> dict[Partition, PartitionRange]:
        return self.ranges(self.partitions())


def offsets_json(offsets: Mapping[Partition, int]) -> dict[str, dict[str, int]]:
    """Offsets per partition as the manifest and Spark's options write them:
    `{topic: {"partition": offset}}`."""
    document: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        document.setdefault(topic, {})[str(partition)] = offset
    return document


def offsets_from_json(document: Mapping[str, Mapping[str, int]] | None) -> dict[Partition, int]:
    return {(topic, int(partition)): offset for topic, partitions in (document or {}).items()
            for partition, offset in partitions.items()}


def lag(committed: Mapping[Partition, int], ranges: Mapping[Partition, PartitionRange]
        ) -> dict[Partition, int]:
    """Per partition, the records written and not yet ingested (a partition the
    connector has not read yet counts from its earliest offset)."""
    return {partition: max(0, found.latest - max(committed.get(partition, found.earliest),
                                                 found.earliest))
            for partition, found in ranges.items()}


def connector_lag(name: str, endpoint: KafkaEndpoint, options: Mapping[str, Any],
                  committed: Mapping[str, Mapping[str, int]] | None) -> dict[str, int] | None:
    """`{"topic/partition": records not ingested}` of one input connector, None when the
    broker cannot be asked (status and metrics show what they can)."""
    try:
        ranges = OffsetClient(name, endpoint, options, STATUS_TIMEOUT_SECONDS).all_ranges()
    except ReconcileError:
        return None
    return {f"{topic}/{partition}": count for (topic, partition), count
            in lag(offsets_from_json(committed), ranges).items()}


def endpoint_of(connector: ConnectorDefinition) -> KafkaEndpoint:
    assert connector.kafka is not None, "a kafka connector's definition has its endpoint"
    return connector.kafka


def _option(connector: ConnectorDefinition, name: str) -> str | None:
    return next((str(value) for key, value in connector.reader_options.items()
                 if key.lower() == name.lower()), None)


def fails_on_data_loss(connector: ConnectorDefinition) -> bool:
    return (_option(connector, "failOnDataLoss") or "true").lower() != "false"


def starting_offsets(connector: ConnectorDefinition) -> dict[str, dict[str, int]] | None:
    """A new connector's offsets: None for `earliest` (every partition from its earliest
    offset, as the step finds it), the latest offsets now for `latest`, so a message
    written after the apply is read even if no step ran before it."""
    if (_option(connector, "startingOffsets") or "earliest") != "latest":
        return None
    client = OffsetClient(connector.name, endpoint_of(connector), connector.reader_options)
    return offsets_json({partition: found.latest
                         for partition, found in client.all_ranges().items()})


def has_new_records(connector: ConnectorDefinition, state: ConnectorState) -> bool:
    """Whether the topic holds records past the committed offsets (no Spark)."""
    client = OffsetClient(connector.name, endpoint_of(connector), connector.reader_options)
    committed = offsets_from_json(state.kafka_offsets)
    return any(found.latest > committed.get(partition, found.earliest)
               for partition, found in client.all_ranges().items())


def batch_range(connector: ConnectorDefinition, committed: Mapping[Partition, int]
                ) -> tuple[dict[Partition, int], dict[Partition, int]]:
    """The offsets one batch reads, per partition, from the broker as it stands: where each
    read starts (`_starts`) and where it ends (`capped_ends`, `maxOffsetsPerTrigger`)."""
    client = OffsetClient(connector.name, endpoint_of(connector), connector.reader_options)
    ranges = client.all_ranges()
    starts = _starts(connector, committed, ranges)
    return starts, capped_ends(starts, ranges, _cap(connector))


def _cap(connector: ConnectorDefinition) -> int | None:
    cap = _option(connector, "maxOffsetsPerTrigger")
    try:
        return None if cap is None else max(1, int(cap))
    except ValueError:
        raise ReconcileError(f"connector '{connector.name}': maxOffsetsPerTrigger is a "
                             f"number of records, not '{cap}'") from None


def _starts(connector: ConnectorDefinition, committed: Mapping[Partition, int],
            ranges: Mapping[Partition, PartitionRange]) -> dict[Partition, int]:
    """Where each partition's read starts: its committed offset, or its earliest for a
    partition not read yet; a committed offset the broker no longer holds is data loss."""
    starts = {}
    for partition, found in ranges.items():
        offset = committed.get(partition, found.earliest)
        if not found.earliest <= offset <= found.latest:
            if fails_on_data_loss(connector):
                raise _data_loss(connector, partition, offset, found)
            offset = found.earliest
        starts[partition] = offset
    return starts


def _data_loss(connector: ConnectorDefinition, partition: Partition, offset: int,
               found: PartitionRange) -> ReconcileError:
    topic, number = partition
    where = f"input connector '{connector.name}': topic {topic} partition {number}"
    if offset < found.earliest:
        what = (f"offsets {offset} to {found.earliest - 1} were deleted by the topic's "
                "retention before they were read")
    else:
        what = (f"the partition ends at offset {found.latest}, before the committed offset "
                f"{offset} (was the topic deleted and made again?)")
    return ReconcileError(f"{where}: {what}; set the connector's option failOnDataLoss: "
                          "false to go on from the earliest offset kept")


def capped_ends(starts: Mapping[Partition, int], ranges: Mapping[Partition, PartitionRange],
                cap: int | None) -> dict[Partition, int]:
    """Each partition's end offset for this batch: its latest, or with `cap` at most that
    many records in all, shared in equal turns so a busy partition does not starve the
    others (Spark's `maxOffsetsPerTrigger` shares in proportion; equal turns bound each
    partition's wait the same way and need no rounding rule)."""
    ends = {partition: ranges[partition].latest for partition in starts}
    if cap is None:
        return ends
    waiting = {partition: ends[partition] - start for partition, start in starts.items()}
    taken = dict.fromkeys(starts, 0)
    left = cap
    while left > 0 and any(taken[p] < waiting[p] for p in starts):
        hungry = [p for p in starts if taken[p] < waiting[p]]
        share = max(1, left // len(hungry))
        for partition in hungry:
            more = min(share, waiting[partition] - taken[partition], left)
            taken[partition] += more
            left -= more
    return {partition: start + taken[partition] for partition, start in starts.items()}
