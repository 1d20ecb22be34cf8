"""The `delta` input connector: rows appended to an external Delta table.

Its offset is the last source version ingested (`source_version` in the
connector's state in the manifest, so it commits atomically with the table
version it produced). Each step reads the data files added since that version
and appends them as one Delta app transaction whose version is the source
version: a step that crashed before its commit is repeated without duplicates.
With `changes: true` the source's rows carry `_op` (insert/delete) and each
version's rows are applied as one change, deletions included (`input_batch`).
A source with Delta's change data feed (`delta.enableChangeDataFeed`) may also
delete and update rows: on Delta's writer the feed from the last ingested version
is applied the same way; a source without it must stay append-only.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from reconciler.engine.delta.log import probe_latest_version
from reconciler.engine.delta.storage import DeltaStorage
from reconciler.engine.io.input_batch import land_batch
from reconciler.engine.maintenance.zset import OP_COLUMN
from reconciler.engine.spark.local_rows import empty_frame
from reconciler.state.connectors import ConnectorDefinition, ConnectorState
from reconciler.support.errors import ReconcileError, error_class


def has_new_versions(connector: ConnectorDefinition, state: ConnectorState) -> bool:
    """Whether the source has versions the connector has not ingested (no Spark)."""
    latest = probe_latest_version(connector.location)
    return latest is not None and latest != state.source_version


def ingest_delta(runtime: Any, connector: ConnectorDefinition, state: ConnectorState,
                 transaction: str) -> int | None:
    """Append the source's new rows to the connector's table; returns the new source version.

    `state` is advanced in place to the new `source_version`; None when nothing is new.
    """
    if not has_new_versions(connector, state):
        return None
    table = connector.relation
    schema = runtime.table_schemas[table]
    table_path = runtime.relations[table].path
    since = state.source_version
    # A step that crashed after its append but before its commit left the rows up to
    # its source version in the table: continue after them, even if the source moved on.
    appended = runtime.storage.transaction_version(table_path, transaction)
    if appended is not None and (since is None or appended > since):
        since = appended
    changes = connector.changes
    if changes:  # the source's rows say what they do: `_op` insert or delete
        schema = StructType([*schema.fields, StructField(OP_COLUMN, StringType(), True)])
    try:
        rows, deleted, latest = read_source_change(runtime.storage, connector.location, since,
                                                   schema)
    except ReconcileError as error:
        raise ReconcileError(f"input connector '{connector.name}': {error}") from None
    if deleted is not None and not changes:  # from the source's change data feed
        rows = rows.select("*", F.lit("insert").alias(OP_COLUMN)).unionByName(
            deleted.select("*", F.lit("delete").alias(OP_COLUMN)))
        changes = True
    if latest != since:
        land_batch(runtime, table, rows, marked=changes, transaction=transaction,
                   batch_id=latest)
    state.source_version = latest
    return latest


def read_source_change(storage: DeltaStorage, source: str, since: int | None,
                       schema: StructType) -> tuple[DataFrame, DataFrame | None, int]:
    """What the source gained and lost after version `since`: (rows inserted, rows deleted
    or None, the version they go up to). The first read (`since` None) is the latest
    version's rows. After that, a source with Delta's change data feed says its change
    itself (deletes and updates included; Delta's writer reads it); any other must have
    stayed append-only, as its added data files are then its change."""
    after = storage.at(source)  # the latest version, opened once for the read or the change
    uri, latest = after.uri, after.version
    if since is None:
        return storage.read_version(after, schema), None, latest
    try:
        inserts, deletes, from_feed = storage.change_between(after, since, schema)
        if from_feed:
            assert inserts is not None  # the feed's read gives both sides (`read_change_feed`)
            _ = inserts.schema  # analysed here, so a feed not kept since `since` says so
    except ReconcileError:
        raise
    except Exception as error:  # e.g. the feed was turned on after `since`
        raise ReconcileError(f"{uri}: cannot read the change data feed from version "
                             f"{since + 1}: {error_class(error)}") from None
    if deletes is not None and not from_feed:
        raise ReconcileError(f"{uri}: files were removed between versions {since} and "
                             f"{latest}; the delta connector reads deletions from tables with "
                             "the change data feed (delta.enableChangeDataFeed) and otherwise "
                             "only append-only tables")
    return (inserts if inserts is not None else empty_frame(storage.spark, schema),
            deletes, latest)
