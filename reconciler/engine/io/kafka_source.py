"""The `kafka` input connector: each step reads a bounded range of offsets as one batch.

Offsets are state, committed with everything else. The connector's manifest state
holds the next offset to read per topic and partition (`kafka_offsets`) and how many
batches it has appended (`kafka_batch`). A step:

1. asks the broker for the partitions and their offsets and plans its batch
   (`kafka_offsets.batch_range`, no Spark): a partition it has not read starts at its
   earliest offset (a new connector with `startingOffsets: latest` had its offsets fixed
   by the apply that started it), and the batch ends at the latest offsets, at most
   `maxOffsetsPerTrigger` records in all, shared fairly between partitions;
2. writes that range to `kafka/<batch>.json` in the connector's checkpoint folder
   before anything is read (the files of batches the manifest has committed are removed
   as the next ones are written);
3. reads exactly that range as a batch DataFrame (`startingOffsets`/`endingOffsets`,
   which works over Spark Connect too), and appends its rows as the Delta app
   transaction (connector generation, batch);
4. hands the new offsets to the manifest the step commits.

A crash after the append and before the commit left the rows in the table: the next
step finds the app transaction, takes that batch's end offsets from its file and
adopts the rows, so nothing is read twice and nothing is lost. Offsets the topic's
retention has deleted before they were read stop the connector with one line naming
the partition and the gap (`failOnDataLoss: false` skips to the earliest offset
kept); so does a partition whose end went back (a topic deleted and made again).

`format: json` parses each message's value against the table's columns; a malformed
message, or a value that is not a JSON object, follows `on_error` (quarantine keeps
it, with its topic, partition and offset) and `on_bad_input` (skip drops it, noted in
the connector's state), else holds the connector at its offsets. A record without a
value (a tombstone) is no row. `format: raw` takes the record's own columns that the
table declares (`key`, `value`, `topic`, `partition`, `offset`, `timestamp`,
`timestampType`, `headers`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from reconciler.engine.delta.files import Collected, FileStore
from reconciler.engine.io.input_batch import (
    CORRUPT_COLUMN,
    BadInput,
    land_batch,
)
from reconciler.engine.io.kafka_offsets import (
    Partition,
    batch_range,
    client_options,
    endpoint_of,
    fails_on_data_loss,
    offsets_from_json,
    offsets_json,
)
from reconciler.engine.maintenance.zset import OP_COLUMN
from reconciler.engine.runtime import PipelineRuntime
from reconciler.state.connectors import ConnectorDefinition, ConnectorState
from reconciler.support.errors import ReconcileError

RECORD_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp",
                  "timestampType", "headers")
_OURS = frozenset({"startingoffsets", "maxoffsetspertrigger", "minoffsetspertrigger",
                   "maxtriggerdelay", "failondataloss"})
_MESSAGE = "_message"
MALFORMED = "reconcile: a malformed Kafka message"


def ingest_kafka(runtime: PipelineRuntime, connector: ConnectorDefinition,
                 state: ConnectorState, transaction: str) -> int | None:
    """Append the topic's new records to the connector's table; returns the batch number,
    or None when nothing is new. `state` is advanced in place."""
    table_path = runtime.relations[connector.relation].path
    done = state.kafka_batch or 0
    log = FileStore.for_root(state.input_checkpoint)
    appended = runtime.storage.transaction_version(table_path, transaction)
    if appended is not None and appended > done:  # a step crashed before its commit
        state.kafka_offsets = json.loads(log.read_bytes(_batch_file(state, appended)))["to"]
        state.kafka_batch = appended
        return appended
    committed = offsets_from_json(state.kafka_offsets)
    starts, ends = batch_range(connector, committed)
    if ends == starts:
        return None
    batch = done + 1
    if done > 1:  # batches up to `done` are committed: their ranges are the manifest's now
        log.remove(_batch_file(state, done - 1), 0, dry_run=False, done=Collected())
    planned = {"from": offsets_json(starts), "to": offsets_json({**committed, **ends})}
    log.write_bytes(_batch_file(state, batch), json.dumps(planned).encode())
    records = _read(runtime, connector, starts, ends)
    parsed = (_parsed(records, _message_schema(runtime, connector))
              if connector.format == "json" else records)
    # Cached when malformed messages are counted before the append (quarantine, skip); by
    # default the append itself fails on the first one, in one pass over the batch.
    checked = connector.format == "json" and not _fails_on_malformed(connector)
    parsed = parsed.cache() if checked else parsed
    try:
        rows = _rows(runtime, connector, state, parsed, batch)
        try:
            land_batch(runtime, connector.relation, rows, marked=connector.changes,
                       transaction=transaction, batch_id=batch)
        except Exception as error:
            if MALFORMED not in str(error):
                raise
            count, where = _first_malformed(parsed)
            raise BadInput(connector.name, f"input connector '{connector.name}': {count} "
                           f"malformed message(s) in batch {batch}, the first at {where}; fix "
                           "the producer, or set on_error: quarantine or on_bad_input: skip",
                           [where]) from None
    finally:
        if checked:
            parsed.unpersist()
    state.kafka_offsets = offsets_json({**committed, **ends})
    state.kafka_batch = batch
    return batch


def _batch_file(state: ConnectorState, batch: int) -> str:
    return f"{state.input_checkpoint.rstrip('/')}/kafka/{batch}.json"


def _read(runtime: PipelineRuntime, connector: ConnectorDefinition,
          starts: Mapping[Partition, int], ends: Mapping[Partition, int]) -> DataFrame:
    """The batch's records: the partitions with new offsets, from start to end."""
    moving = {partition: end for partition, end in ends.items() if end > starts[partition]}
    assign: dict[str, list[int]] = {}
    for topic, number in sorted(moving):
        assign.setdefault(topic, []).append(number)
    options = {key: str(value) for key, value in connector.reader_options.items()
               if key.lower() not in _OURS}
    columns = [field.name for field in runtime.table_schemas[connector.relation]]
    return (runtime.spark.read.format("kafka")
            .options(**{**options, **client_options(endpoint_of(connector), options)})
            .option("assign", json.dumps(assign))
            .option("startingOffsets", json.dumps(offsets_json(
                {partition: starts[partition] for partition in moving})))
            .option("endingOffsets", json.dumps(offsets_json(moving)))
            .option("failOnDataLoss", str(fails_on_data_loss(connector)).lower())
            .option("includeHeaders", str(connector.format == "raw"
                                          and "headers" in columns).lower())
            .load())


def _fails_on_malformed(connector: ConnectorDefinition) -> bool:
    return connector.on_error == "fail" and connector.on_bad_input == "fail"


def _message_schema(runtime: PipelineRuntime, connector: ConnectorDefinition) -> StructType:
    """A json message's fields: the table's columns (with `_op` for a changes connector)."""
    schema = runtime.table_schemas[connector.relation]
    if connector.changes:
        schema = StructType([*schema.fields, StructField(OP_COLUMN, StringType(), True)])
    return schema


def _parsed(records: DataFrame, schema: StructType) -> DataFrame:
    """Each record with a value: where it is, its text, and the text parsed permissively
    against `schema` (`_message`, holding the corrupt-record column)."""
    permissive = StructType([*(StructField(f.name, f.dataType, True) for f in schema),
                             StructField(CORRUPT_COLUMN, StringType(), True)])
    text = F.col("value").cast("string")
    return records.where(F.col("value").isNotNull()).select(
        "topic", "partition", "offset", text.alias("value"), F.from_json(
            text, permissive, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}
        ).alias(_MESSAGE))


def _malformed() -> Column:
    return F.col(_MESSAGE).isNull() | F.col(f"{_MESSAGE}.{CORRUPT_COLUMN}").isNotNull()


def _rows(runtime: PipelineRuntime, connector: ConnectorDefinition, state: ConnectorState,
          records: DataFrame, batch: int) -> DataFrame:
    """The batch's rows by the table's column names (with `_op` for a changes connector):
    `records` as read (raw), or `_parsed` (json); `land_batch` casts them to the table."""
    schema = runtime.table_schemas[connector.relation]
    if connector.format == "raw":
        unknown = [field.name for field in schema if field.name not in RECORD_COLUMNS]
        if unknown:
            raise ReconcileError(
                f"input connector '{connector.name}' (format raw): table "
                f"'{connector.relation}' has a column '{unknown[0]}' that a Kafka record "
                f"does not have ({', '.join(RECORD_COLUMNS)})")
        return records
    if _fails_on_malformed(connector):  # the write fails at the first malformed message
        good = records.where(F.coalesce(F.when(_malformed(), F.raise_error(F.lit(MALFORMED)))
                                        .cast("boolean"), F.lit(True)))
    else:
        good = _without_malformed(runtime, connector, state, records, batch)
    fields = [F.col(f"{_MESSAGE}.{f.name}").alias(f.name)
              for f in _message_schema(runtime, connector)]
    return good.select(*fields)


def _first_malformed(parsed: DataFrame) -> tuple[int, str]:
    """How many of the batch's messages are malformed, and where the first one is: one
    aggregate job, whose one row holds a count and a position (no message's value)."""
    position = F.struct("topic", "partition", "offset")
    [result] = parsed.where(_malformed()).agg(  # one row: an aggregate without GROUP BY
        F.count(F.lit(1)).alias("count"), F.min(position).alias("first")).collect()
    if not result["count"]:
        return 0, ""
    first = result["first"]
    return result["count"], (f"topic {first['topic']} partition {first['partition']} "
                             f"offset {first['offset']}")


def _without_malformed(runtime: PipelineRuntime, connector: ConnectorDefinition,
                       state: ConnectorState, parsed: DataFrame, batch: int) -> DataFrame:
    """`parsed` without its malformed messages, which are quarantined or skipped (see the
    module docstring). One count when none is malformed."""
    count, where = _first_malformed(parsed)
    if not count:
        return parsed
    if connector.on_error == "quarantine":
        generation = state.input_generation
        (parsed.where(_malformed()).select("topic", "partition", "offset", "value")
         .write.mode("overwrite")
         .json(f"{runtime.layout.quarantine(connector.name)}/batch-{generation}-{batch}"))
    else:
        state.skipped_files.append({"file": where, "reason": f"{count} malformed message(s) "
                                    f"in batch {batch}, the first at this offset"})
    return parsed.where(~_malformed())
