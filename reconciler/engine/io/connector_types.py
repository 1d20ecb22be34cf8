"""One interface per connector type, registered once by its type's name (as Feldera's
transports are): what the engine asks of a connector, whatever it reads or writes.

- `pending`: whether an input has anything new, decided without a Spark job (a step with
  no new input runs none);
- `lag`: per part of an input (a topic's partition), what is not ingested yet, asked of
  its source only when `may_ask()` says so (the approved program's connectors: their
  credentials are never handed to a place a state writer chose); `{}` for a type without parts,
  None when its source cannot be asked;
- `waiting`: how much of an input is not ingested yet (files, source versions, records,
  from its `lag`), or None where that cannot be counted from here (`reconcile status`);
- `start`: the offsets a new generation of the input starts from, when its type keeps
  any in the manifest (Kafka's), else None;
- `ingest`: the new input landed in the connector's table; how many batches;
- `send`: a view's changes (or its snapshot) sent to an output; how many rows or messages.

`pending`, `lag`, `waiting` and `start` load no Spark (`reconcile status` asks `lag` and
`waiting`); the modules that read and write with Spark are loaded by `ingest` and `send`.

A new connector type is one module with such a class and its line in `TYPES`, plus its
declaration (`desired.settings.connector_kinds`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from reconciler.engine.delta.log import probe_latest_version
from reconciler.engine.io.input_files import has_new_files, waiting_files
from reconciler.engine.io.kafka_offsets import (
    connector_lag,
    endpoint_of,
    has_new_records,
    starting_offsets,
)
from reconciler.state.connectors import ConnectorDefinition, ConnectorState

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from reconciler.engine.runtime import PipelineRuntime


class ConnectorType(Protocol):
    """What the engine does with the connectors of one type."""

    def pending(self, connector: ConnectorDefinition, state: ConnectorState) -> bool: ...

    def lag(self, connector: ConnectorDefinition, state: ConnectorState,
            may_ask: Callable[[], bool]) -> dict[str, int] | None: ...

    def waiting(self, connector: ConnectorDefinition, state: ConnectorState,
                lag: Mapping[str, int] | None) -> int | None: ...

    def start(self, connector: ConnectorDefinition) -> dict[str, Any] | None: ...

    def ingest(self, runtime: PipelineRuntime, connector: ConnectorDefinition,
               state: ConnectorState, transaction: str) -> int: ...

    def send(self, runtime: PipelineRuntime, connector: ConnectorDefinition,
             changes: DataFrame, serial: int, snapshot: bool, rows: int | None) -> int: ...


class UnpartitionedType(ABC):
    """The defaults of a type whose input is one sequence (no partitions, no offsets kept
    in the manifest): pending when anything waits. A type says what waits."""

    def pending(self, connector: ConnectorDefinition, state: ConnectorState) -> bool:
        return self.waiting(connector, state, {}) != 0

    def lag(self, connector: ConnectorDefinition, state: ConnectorState,
            may_ask: Callable[[], bool]) -> dict[str, int] | None:
        return {}

    @abstractmethod
    def waiting(self, connector: ConnectorDefinition, state: ConnectorState,
                lag: Mapping[str, int] | None) -> int | None: ...

    def start(self, connector: ConnectorDefinition) -> dict[str, Any] | None:
        return None


class FilesType(UnpartitionedType):
    """A folder of files, local or on S3 (`engine.io.files_connector`)."""

    def pending(self, connector: ConnectorDefinition, state: ConnectorState) -> bool:
        return has_new_files(connector.location, state.input_checkpoint)

    def waiting(self, connector: ConnectorDefinition, state: ConnectorState,
                lag: Mapping[str, int] | None) -> int | None:
        return waiting_files(connector.location, state.input_checkpoint)

    def ingest(self, runtime: PipelineRuntime, connector: ConnectorDefinition,
               state: ConnectorState, transaction: str) -> int:
        from reconciler.engine.io.files_connector import ingest_files

        return ingest_files(runtime, connector, state, transaction)

    def send(self, runtime: PipelineRuntime, connector: ConnectorDefinition,
             changes: DataFrame, serial: int, snapshot: bool, rows: int | None) -> int:
        from reconciler.engine.io.files_connector import send_files

        return send_files(connector, changes, serial, snapshot, rows)


class DeltaType(UnpartitionedType):
    """A Delta table: an input read by version (`engine.io.delta_source`); an output
    overwritten with the relation's contents at each commit, which readers of all ages
    open (no deletion vectors)."""

    def waiting(self, connector: ConnectorDefinition, state: ConnectorState,
                lag: Mapping[str, int] | None) -> int | None:
        latest, done = probe_latest_version(connector.location), state.source_version
        return 0 if latest is None else latest - (-1 if done is None else done)

    def ingest(self, runtime: PipelineRuntime, connector: ConnectorDefinition,
               state: ConnectorState, transaction: str) -> int:
        from reconciler.engine.io.delta_source import ingest_delta

        return 0 if ingest_delta(runtime, connector, state, transaction) is None else 1

    def send(self, runtime: PipelineRuntime, connector: ConnectorDefinition,
             changes: DataFrame, serial: int, snapshot: bool, rows: int | None) -> int:
        path, contents = connector.location, runtime.frame(connector.relation)
        if runtime.storage.latest_version(path) is None:
            runtime.storage.create(path, contents.schema, deletion_vectors=False)
        version = runtime.storage.overwrite(path, contents, contents.schema)
        return runtime.storage.row_count(path, version)


class KafkaType:
    """A Kafka topic: offsets kept in the manifest (`engine.io.kafka_source`,
    `engine.io.kafka_offsets`), messages keyed for compaction (`engine.io.kafka_sink`)."""

    def pending(self, connector: ConnectorDefinition, state: ConnectorState) -> bool:
        return has_new_records(connector, state)

    def lag(self, connector: ConnectorDefinition, state: ConnectorState,
            may_ask: Callable[[], bool]) -> dict[str, int] | None:
        """`{"topic/partition": records not ingested}`, from its broker."""
        if not may_ask():
            return None
        return connector_lag(connector.name, endpoint_of(connector), connector.reader_options,
                             state.kafka_offsets)

    def waiting(self, connector: ConnectorDefinition, state: ConnectorState,
                lag: Mapping[str, int] | None) -> int | None:
        return None if lag is None else sum(lag.values())

    def start(self, connector: ConnectorDefinition) -> dict[str, Any] | None:
        return starting_offsets(connector)

    def ingest(self, runtime: PipelineRuntime, connector: ConnectorDefinition,
               state: ConnectorState, transaction: str) -> int:
        from reconciler.engine.io.kafka_source import ingest_kafka
        from reconciler.engine.io.stream_logs import quiet_stream_failure

        with quiet_stream_failure(runtime.spark):  # a malformed message fails a task
            return 0 if ingest_kafka(runtime, connector, state, transaction) is None else 1

    def send(self, runtime: PipelineRuntime, connector: ConnectorDefinition,
             changes: DataFrame, serial: int, snapshot: bool, rows: int | None) -> int:
        from reconciler.engine.io.kafka_sink import send

        return send(runtime, connector, changes, serial, snapshot)


TYPES: dict[str, ConnectorType] = {"files": FilesType(), "delta": DeltaType(),
                                   "kafka": KafkaType()}
"""Every connector type the engine runs, by the name `pipeline.yaml`'s `type:` gives."""


def connector_type(connector: ConnectorDefinition) -> ConnectorType:
    """The one place the engine looks at a connector's type."""
    return TYPES[connector.type]
