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

Each view carries the property `reconciler.pipeline` = the pipeline's name. Only such
views are replaced or dropped (a relation no longer published, one renamed or removed):
an object of the same name that the pipeline did not publish is never overwritten, and
the commit's publication stops with one line saying so.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession

from reconciler.engine.delta.log import quoted
from reconciler.support.errors import ReconcileError

PUBLISHED_BY = "reconciler.pipeline"
"""The catalog view's property naming the pipeline that published it."""


def catalog_is_kept(spark: SparkSession) -> bool:
    """Whether the session's catalog outlives it: not Spark's in-memory one."""
    return spark.conf.get("spark.sql.catalogImplementation", "in-memory") != "in-memory"


def publish(spark: SparkSession, database: str, pipeline: str,
            relations: Mapping[str, tuple[str, int]]) -> list[str]:
    """Make `relations` (name -> (table URI, committed version)) the views `pipeline` has in
    `database`, dropping those it published before and no longer publishes; returns the
    names dropped. Names are validated identifiers (`NAME_PATTERN`), versions integers."""
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {quoted(database)}")
    ours = published_views(spark, database, pipeline)
    for name, (uri, version) in sorted(relations.items()):
        target = f"{quoted(database)}.{quoted(name)}"
        if name not in ours and spark.catalog.tableExists(f"{database}.{name}"):
            raise ReconcileError(f"{database}.{name} is in the catalog and pipeline "
                                 f"'{pipeline}' did not publish it: drop or rename it, or "
                                 "leave the relation out (publish.exclude)")
        spark.sql(f"CREATE OR REPLACE VIEW {target} "
                  f"TBLPROPERTIES ('{PUBLISHED_BY}' = '{pipeline}') AS "
                  f"SELECT * FROM delta.{quoted(uri)} VERSION AS OF {int(version)}")
    dropped = sorted(set(ours) - set(relations))
    for name in dropped:
        spark.sql(f"DROP VIEW IF EXISTS {quoted(database)}.{quoted(name)}")
    return dropped


def published_views(spark: SparkSession, database: str, pipeline: str) -> set[str]:
    """The views of `database` that `pipeline` published (its property on them): catalog
    metadata, one row per view."""
    found = set()
    views = spark.sql(f"SHOW VIEWS IN {quoted(database)}").collect()  # names, not rows
    for view in views:
        if view["isTemporary"]:
            continue
        owner = spark.sql(f"SHOW TBLPROPERTIES {quoted(database)}.{quoted(view['viewName'])} "
                          f"('{PUBLISHED_BY}')").collect()  # one property's row
        if owner and owner[0]["value"] == pipeline:
            found.add(view["viewName"])
    return found
