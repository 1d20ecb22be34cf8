"""The `kafka` output connector: a view's change as one message per changed row.

Each message's value is a JSON object: the row's columns, `_op` (`insert` or
`delete`), `_serial` (the manifest serial of the step or apply that sent it),
`_snapshot` (true when the message is part of a view's full contents, which a new
connector, a changed view whose columns moved, or `snapshot_on_bootstrap` sends) and
`_id`, a hash of the serial, the operation, the row and its occurrence among equal
rows. Its key is the view's key columns as JSON (its GROUP BY keys, or a table's
primary key), so a topic compacted by key keeps each key's latest row; a view
without a key sends messages without one.

Delivery is at least once. The messages are sent before the step's manifest is
committed; a crash between the two repeats the step, which sends the same change
again with the same `_serial` and `_id` (it is computed from the same committed
state), so a consumer drops a message whose (`_serial`, `_id`) it has seen.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from reconciler.desired.analysis.output_key import output_key
from reconciler.engine.io.kafka_offsets import client_options
from reconciler.engine.maintenance.zset import OP_COLUMN
from reconciler.engine.runtime import PipelineRuntime
from reconciler.state.connectors import ConnectorDefinition

_ROW = "_row"


def key_columns(runtime: PipelineRuntime, relation: str) -> list[str]:
    """The columns that identify the relation's rows, or none."""
    view = runtime.program.views.get(relation)
    if view is not None:
        return output_key(view.query) or []
    return list(runtime.program.tables[relation].primary_key)


def send(runtime: PipelineRuntime, connector: ConnectorDefinition, rows: DataFrame,
         serial: int, snapshot: bool) -> int:
    """Send `rows` (a change with `_op`, or with `snapshot` a relation's contents) to the
    connector's topic; returns how many messages were sent."""
    assert connector.kafka is not None and connector.kafka.topics
    columns = [name for name in rows.columns if name != OP_COLUMN]
    if OP_COLUMN not in rows.columns:
        rows = rows.withColumn(OP_COLUMN, F.lit("insert"))
    keyed = [name for name in key_columns(runtime, connector.relation) if name in columns]
    row = F.to_json(F.struct(*columns), {"ignoreNullFields": "false"})
    # Equal rows of one change get ids told apart by their occurrence.
    occurrence = F.row_number().over(Window.partitionBy(OP_COLUMN, _ROW).orderBy(_ROW))
    messages = (rows.select("*", row.alias(_ROW))
                .select(*columns, OP_COLUMN, F.lit(serial).alias("_serial"),
                        F.lit(snapshot).alias("_snapshot"),
                        F.sha2(F.concat_ws("|", F.lit(str(serial)), F.col(OP_COLUMN),
                                           F.col(_ROW), occurrence.cast("string")),
                               256).alias("_id")))
    value = F.to_json(F.struct(*messages.columns), {"ignoreNullFields": "false"})
    key = (F.to_json(F.struct(*keyed)) if keyed else F.lit(None).cast("string"))
    out = messages.select(key.alias("key"), value.alias("value")).cache()
    try:
        sent = out.count()
        if sent:
            options = client_options(connector.kafka, connector.reader_options)
            (out.write.format("kafka").options(**options)
             .option("topic", connector.kafka.topics[0]).save())
        return sent
    finally:
        out.unpersist()
