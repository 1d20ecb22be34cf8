"""A pipeline's relations as views in the session's catalog, pinned to committed versions.

A notebook, a BI tool or another job should find a pipeline's views by name, and must
never see rows of a version no manifest committed (a step that failed or crashed after
writing its Delta versions). So each published relation is a catalog *view*,
`<database>.<name>`, over its Delta table at the version the manifest just committed
(`SELECT * FROM delta.<path> VERSION AS OF <n>`), replaced after each commit: a reader by
name sees exactly the committed state, and retention keeps every file of that version
because the manifest points at it. The catalog is the session's (a cluster's Hive
metastore, Glue or Unity Catalog; embedded Spark's `spark-defaults.conf` may name a Hive
metastore); a reader needs Delta Lake, as for the tables themselves.

Each view carries two properties: `reconciler.pipeline`, the pipeline's name, and
`reconciler.lineage`, the lineage its manifest was given when the pipeline was first
deployed (`Manifest.lineage`, never changed after). A view is the pipeline's own when its
lineage is the pipeline's: two projects sharing a metastore and a database, each with a
pipeline of the same name, are told apart. Only its own views are replaced or dropped (a
relation no longer published, one renamed or removed, every one at `destroy`); any other
object of the same name, another project's view among them, is never overwritten: that
relation alone is left unpublished, with one line naming the object and its owner, and the
others are published.

Views an earlier version published carry the name alone: one is taken over (replaced,
with the lineage) when the pipeline of that name publishes that name again, the one
publication such a view had before; it is never dropped, since nothing says which project
published it (drop it by hand, `DROP VIEW`, if no relation publishes it any more).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import SparkSession

from reconciler.engine.spark.schema import quoted
from reconciler.support.errors import ReconcileError

PUBLISHED_BY = "reconciler.pipeline"
"""The catalog view's property naming the pipeline that published it."""
LINEAGE = "reconciler.lineage"
"""The catalog view's property holding the lineage of the pipeline that published it."""
LINEAGE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""What a lineage may be to be written into a view's properties (a UUID is)."""


@dataclass(frozen=True)
class Owner:
    """Who published a view of the catalog, from its properties."""

    pipeline: str
    lineage: str | None  # None: published by a version that wrote no lineage


def catalog_is_kept(spark: SparkSession) -> bool:
    """Whether the session's catalog outlives it: not Spark's in-memory one."""
    return spark.conf.get("spark.sql.catalogImplementation", "in-memory") != "in-memory"


def publish(spark: SparkSession, database: str, pipeline: str, lineage: str,
            relations: Mapping[str, tuple[str, int]]) -> tuple[list[str], list[str]]:
    """Make `relations` (name -> (table URI, committed version)) the views the pipeline of
    `lineage` has in `database`, dropping those it published before and no longer
    publishes; returns the names dropped, and one line per relation left unpublished
    because another object holds its name (every name is checked before any view is
    written). Names are validated identifiers (`NAME_PATTERN`), versions integers."""
    _check_lineage(lineage)
    if not spark.catalog.databaseExists(database):  # Hive's metastore logs a stack trace
        # at ERROR for a CREATE of a database that exists, IF NOT EXISTS or not
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quoted(database)}")
    owners = published_views(spark, database)
    ours = {name for name, owner in owners.items() if owner.lineage == lineage}
    skipped = []
    for name in sorted(set(relations) - ours):
        owner = owners.get(name)
        if owner is not None and owner.lineage is None and owner.pipeline == pipeline:
            continue  # an earlier version's view of this pipeline name: taken over
        if owner is not None or spark.catalog.tableExists(f"{database}.{name}"):
            skipped.append(name)
    lines = [_conflict(database, name, pipeline, lineage, owners.get(name)) for name in skipped]
    relations = {name: pinned for name, pinned in relations.items() if name not in skipped}
    for name, (uri, version) in sorted(relations.items()):
        spark.sql(f"CREATE OR REPLACE VIEW {quoted(database)}.{quoted(name)} "
                  f"TBLPROPERTIES ('{PUBLISHED_BY}' = '{pipeline}', "
                  f"'{LINEAGE}' = '{lineage}') AS "
                  f"SELECT * FROM delta.{quoted(uri)} VERSION AS OF {int(version)}")
    dropped = sorted(ours - set(relations))
    for name in dropped:
        spark.sql(f"DROP VIEW IF EXISTS {quoted(database)}.{quoted(name)}")
    return dropped, lines


def unpublish(spark: SparkSession, database: str, lineage: str) -> list[str]:
    """Drop every view of `database` that the pipeline of `lineage` published (a destroy);
    returns their names. Another project's views and an earlier version's (no lineage)
    stay."""
    _check_lineage(lineage)
    if not spark.catalog.databaseExists(database):
        return []
    dropped = sorted(name for name, owner in published_views(spark, database).items()
                     if owner.lineage == lineage)
    for name in dropped:
        spark.sql(f"DROP VIEW IF EXISTS {quoted(database)}.{quoted(name)}")
    return dropped


def published_views(spark: SparkSession, database: str) -> dict[str, Owner]:
    """The views of `database` a pipeline published (its properties on them), by name, with
    who published them: catalog metadata, one row per view and property."""
    found = {}
    views = spark.sql(f"SHOW VIEWS IN {quoted(database)}").collect()  # names, not rows
    for view in views:
        if view["isTemporary"]:
            continue
        rows = spark.sql(f"SHOW TBLPROPERTIES {quoted(database)}."
                         f"{quoted(view['viewName'])}").collect()  # the view's properties
        properties = {row["key"]: row["value"] for row in rows}
        if PUBLISHED_BY in properties or LINEAGE in properties:
            found[view["viewName"]] = Owner(properties.get(PUBLISHED_BY, "?"),
                                            properties.get(LINEAGE))
    return found


def _conflict(database: str, name: str, pipeline: str, lineage: str,
              owner: Owner | None) -> str:
    """One line: why `database.name` is not the pipeline's to replace, and what to do."""
    if owner is None:
        held = f"is in the catalog and pipeline '{pipeline}' did not publish it"
    elif owner.lineage is None:
        held = (f"is published by pipeline '{owner.pipeline}' (an earlier reconciler's view, "
                "without a lineage), not by this pipeline")
    else:
        other = " of another project" if owner.pipeline == pipeline else ""
        held = (f"is published by pipeline '{owner.pipeline}'{other} (its lineage "
                f"{owner.lineage} is not this pipeline's, {lineage})")
    return (f"{database}.{name} {held}: not published (drop or rename it, publish to another "
            "database, or leave the relation out: publish.exclude)")


def _check_lineage(lineage: str) -> None:
    if not LINEAGE_PATTERN.fullmatch(lineage):
        raise ReconcileError(f"the manifest's lineage {lineage[:80]!r} is not a plain "
                             "identifier: not publishing under it")
