"""The child process that makes the class archive (`class_archive`): an embedded session
runs the kinds of work a command runs, then its JVM exits and writes the classes it loaded.

Run as `python -I -m reconciler.engine.spark.archive_workload ARCHIVE LOG` by the set-up
only. The session is a command's (`session.get_spark`), with the class path every embedded
session starts with and nothing after it (no S3A, no Kafka), so the archive fits them all.
The JVM logs what it says about the archive to LOG, not to the set-up's terminal.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from reconciler.desired.settings.project import SparkSettings
from reconciler.engine.spark.local_rows import local_frame
from reconciler.engine.spark.session import get_spark

EXIT_SECONDS = 300.0
"""How long to wait for the JVM to write the archive and exit (seconds here)."""


def main(arguments: list[str]) -> int:
    archive, log = arguments
    options = f"-XX:ArchiveClassesAtExit={archive} -Xlog:cds*=warning:file={log}"
    spark = get_spark(SparkSettings(conf={"spark.driver.extraJavaOptions": options}),
                      master="local[2]", s3a=False, kafka=False)
    with tempfile.TemporaryDirectory(prefix="reconcile-archive-") as folder:
        _workload(spark, Path(folder))
    gateway = SparkContext._gateway
    spark.stop()
    if gateway is not None:  # the JVM exits when its stdin closes, and writes the archive
        gateway.proc.stdin.close()
        gateway.proc.wait(timeout=EXIT_SECONDS)
    return 0


def _workload(spark: SparkSession, folder: Path) -> None:
    """What a bootstrap and a step do, on a few rows: rows from the driver, a Delta table
    created, appended, merged into and read with its change feed, Parquet and JSON files,
    and queries with joins, aggregates, windows and set operations."""
    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("k", T.StringType()),
                           T.StructField("v", T.DecimalType(8, 2))])
    rows = local_frame(spark, [(1, "a", None), (2, "b", None)], schema)
    table = f"delta.`{folder / 'table'}`"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, k STRING, v DECIMAL(8,2)) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    rows.write.format("delta").mode("append").save(str(folder / "table"))
    source = spark.range(50).selectExpr("id", "cast(id % 5 as string) as k",
                                        "cast(id / 3 as decimal(8,2)) as v")
    source.createOrReplaceTempView("source")
    spark.sql(f"MERGE INTO {table} t USING source s ON t.id = s.id "
              "WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *")
    stored = spark.read.format("delta").load(str(folder / "table"))
    stored.createOrReplaceTempView("stored")
    changes = spark.read.format("delta").option("readChangeFeed", "true") \
        .option("startingVersion", 1).load(str(folder / "table"))
    query = spark.sql("""
        select s.k, count(*) as n, sum(s.v) as total, avg(o.v) as average, min(s.id) as low,
               count(distinct o.id) as ids, stddev_samp(s.v) as spread
        from stored s join source o on s.id = o.id group by s.k having count(*) > 0
        union all
        select k, rank() over (partition by k order by id), null, null, id, null, null
        from (select * from stored except all select * from source)""")
    query.write.parquet(str(folder / "parquet"))
    changes.write.json(str(folder / "json"))
    spark.read.parquet(str(folder / "parquet")).count()
    spark.read.json(str(folder / "json")).distinct().count()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
