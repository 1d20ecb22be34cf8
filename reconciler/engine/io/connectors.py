"""Input and output connectors as a step and a bootstrap drive them: ingest each input,
emit to each output, whatever its type (`engine.io.connector_types` holds what each type
does; `engine.io.files_connector`, `delta_source`, `kafka_source` and `kafka_sink` how).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame

from reconciler.engine.io.connector_types import connector_type
from reconciler.engine.runtime import PipelineRuntime
from reconciler.state.connectors import ConnectorDefinition, ConnectorState


@dataclass(frozen=True)
class IngestResult:
    connector: str
    table: str
    batches: int


def outputs_by_relation(connectors: dict[str, ConnectorDefinition]) -> dict[str, list[str]]:
    """Output connector names grouped by the table or view they send."""
    outputs: dict[str, list[str]] = {}
    for name, connector in connectors.items():
        if not connector.is_input:
            outputs.setdefault(connector.relation, []).append(name)
    return outputs


def app_id(pipeline: str, connector: str, generation: str) -> str:
    return f"reconcile:{pipeline}:{connector}:{generation}"


def ingest(runtime: PipelineRuntime, connector: ConnectorDefinition, state: ConnectorState
           ) -> IngestResult | None:
    """Run one input connector to the end of its available input; None if nothing new.

    `state` is the connector's state for the next manifest (advanced in place).
    """
    transaction = app_id(runtime.layout.pipeline, connector.name, state.input_generation)
    batches = connector_type(connector).ingest(runtime, connector, state, transaction)
    return IngestResult(connector.name, connector.relation, batches) if batches else None


def emit(runtime: PipelineRuntime, connector: ConnectorDefinition, changes: DataFrame,
         serial: int, snapshot: bool, rows: int | None = None) -> int:
    """Send a view's changes (or, when `snapshot`, its full contents) to one output connector.
    `rows`: how many `changes` holds, when the step counted them as it computed them
    (`ZSet.net`); a files connector then writes them without counting them first."""
    return connector_type(connector).send(runtime, connector, changes, serial, snapshot, rows)
