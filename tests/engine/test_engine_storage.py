"""DeltaStorage on real parts: the shared local Spark session and real Delta tables.

The session has no Delta extension here (Delta's Spark jars are not
downloadable in this environment), so these tests exercise the delta-rs
writer and the pinned parquet reads; every table is checked with
``deltalake.DeltaTable`` as an independent Delta reader.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from py4j.protocol import Py4JError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reconciler.desired.parsing.sql import ColumnDef
from reconciler.engine.delta.log import table_uri
from reconciler.engine.delta.merge import apply_changes
from reconciler.engine.delta.relation import DeltaRelation
from reconciler.engine.delta.storage import DeltaStorage
from reconciler.engine.delta.tables import KEPT_VERSIONS
from reconciler.engine.spark.failures import engine_failure
from reconciler.engine.spark.java import require_java
from reconciler.engine.spark.schema import (
    CHAR_VARCHAR_METADATA_KEY,
    arrow_schema,
    same_schema,
    spark_schema,
    struct_from_json,
)
from reconciler.engine.spark.session import (
    get_spark,
    has_delta_extension,
    session_settings,
    spark_conf,
)
from reconciler.engine.spark.type_strings import TypeParseError, parse_type
from reconciler.support.errors import ReconcileError

SIMPLE = spark_schema([ColumnDef("id", "BIGINT", False), ColumnDef("name", "STRING", True)])
RICH = spark_schema(
    [
        ColumnDef("id", "BIGINT", False),
        ColumnDef("price", "DECIMAL(5,2)", True),
        ColumnDef("day", "DATE", True),
        ColumnDef("at", "TIMESTAMP", True),
        ColumnDef("local_at", "TIMESTAMP_NTZ", True),
        ColumnDef("tags", "ARRAY<STRUCT<k: STRING NOT NULL, v: INT>>", True),
        ColumnDef("attrs", "MAP<STRING,DECIMAL(4,1)>", True),
        ColumnDef("code", "VARCHAR(3)", True),
    ]
)


def rows_of(frame: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(tuple(row) for row in frame.collect())


@pytest.fixture(params=["delta-spark", "delta-rs"])
def storage(spark: SparkSession, request: pytest.FixtureRequest) -> DeltaStorage:
    """The storage contract holds for both writers."""
    return DeltaStorage(spark, writer=request.param)


# -- schema: pure Python, no JVM ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("BIGINT", T.LongType()),
        ("decimal(5, 2)", T.DecimalType(5, 2)),
        ("DECIMAL", T.DecimalType(10, 0)),
        ("DATE", T.DateType()),
        ("TIMESTAMP", T.TimestampType()),
        ("TIMESTAMP_NTZ", T.TimestampNTZType()),
        ("ARRAY<INT>", T.ArrayType(T.IntegerType())),
        (
            "MAP<STRING,ARRAY<DECIMAL(4,1)>>",
            T.MapType(T.StringType(), T.ArrayType(T.DecimalType(4, 1))),
        ),
        (
            "STRUCT<a: INT NOT NULL,`b c`: STRING>",
            T.StructType(
                [T.StructField("a", T.IntegerType(), False), T.StructField("b c", T.StringType())]
            ),
        ),
        ("VARCHAR(10)", T.VarcharType(10)),
        ("INTERVAL DAY TO SECOND", T.DayTimeIntervalType(0, 3)),
    ],
)
def test_parse_type(text: str, expected: T.DataType) -> None:
    assert parse_type(text) == expected


@pytest.mark.parametrize("bad", ["BLOB", "DECIMAL(39,0)", "DECIMAL(3,4)", "ARRAY<INT", "INT INT"])
def test_parse_type_rejects(bad: str) -> None:
    with pytest.raises(TypeParseError):
        parse_type(bad)


def test_spark_schema_names_the_bad_column() -> None:
    with pytest.raises(ReconcileError, match="column 'z': unsupported type 'BLOB'"):
        spark_schema([ColumnDef("z", "BLOB", True)])


def test_varchar_is_stored_like_spark_does() -> None:
    field = RICH["code"]
    assert field.dataType == T.StringType()
    assert field.metadata == {CHAR_VARCHAR_METADATA_KEY: "varchar(3)"}
    arrow_field = arrow_schema(RICH).field("code")
    assert arrow_field.metadata == {CHAR_VARCHAR_METADATA_KEY.encode(): b"varchar(3)"}
    assert struct_from_json(RICH.json()) == RICH


def test_local_conf_is_quiet_small_and_overridable() -> None:
    conf = spark_conf(
        "local[2]", {"spark.sql.shuffle.partitions": 8, "spark.driver.extraJavaOptions": "-Dx=1"}
    )
    assert conf["spark.sql.shuffle.partitions"] == "8"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert "log4j2.configurationFile" in conf["spark.driver.extraJavaOptions"]
    assert conf["spark.driver.extraJavaOptions"].endswith("-Dx=1")
    cluster = spark_conf("spark://head:7077", {})
    assert "spark.sql.shuffle.partitions" not in cluster
    assert "spark.sql.warehouse.dir" not in cluster
    # Embedded Spark's heap is half the machine's memory (its tasks run in the driver),
    # unless reconcile.yaml says otherwise; a cluster's driver is its operator's.
    physical_mib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    assert conf["spark.driver.memory"] == f"{max(1024, physical_mib // 2)}m"
    assert spark_conf("local[2]", {"spark.driver.memory": "3g"})["spark.driver.memory"] == "3g"
    assert "spark.driver.memory" not in cluster
    # A step's queries and Delta's own projections stay compiled from step to step.
    assert int(conf["spark.sql.codegen.cache.maxEntries"]) >= 1000
    assert "spark.sql.codegen.cache.maxEntries" not in cluster


def test_session_settings_are_held_by_one_thread_at_a_time(spark: SparkSession) -> None:
    """Two views' MERGEs in two refresh threads: each statement sees its own tag, and the
    session is left as it was (not with the first thread's values restored by the second)."""
    key = "spark.databricks.delta.commitInfo.userMetadata"
    seen: dict[str, str | None] = {}
    first_inside, second_inside = threading.Event(), threading.Event()

    def first() -> None:
        with session_settings(spark, {key: "first"}):
            first_inside.set()
            second_inside.wait(0.5)  # in vain while the settings are held
            seen["first"] = spark.conf.get(key, None)

    def second() -> None:
        first_inside.wait(5)
        with session_settings(spark, {key: "second"}):
            second_inside.set()
            seen["second"] = spark.conf.get(key, None)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == {"first": "first", "second": "second"}
    assert spark.conf.get(key, None) is None


def test_a_failed_broadcast_is_one_line_naming_the_settings() -> None:
    error = Py4JError("An error occurred while calling o123.save: org.apache.spark.SparkExcep"
                      "tion: Not enough memory to build and broadcast the table to all worker "
                      "nodes. As a workaround, you can either disable broadcast ...")
    failure = engine_failure(error, "refreshing view report_17")
    assert failure is not None
    message = str(failure)
    assert "\n" not in message and "while refreshing view report_17" in message
    assert "spark.driver.memory" in message and "spark.sql.autoBroadcastJoinThreshold" in message


def test_missing_java_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(ReconcileError, match="Java not found"):
        get_spark(master="local[1]")


def test_a_java_is_asked_its_version_once_per_process(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    """Every session a process opens checks Java; the JVM started to print a version is
    started once per binary, and a binary too old is refused each time it is asked."""
    asked = tmp_path / "asked"
    for name, version in (("new", "17.0.15"), ("old", "1.8.0_402")):
        java = tmp_path / name / "bin" / "java"
        java.parent.mkdir(parents=True)
        java.write_text(f"#!/bin/sh\necho {name} >> {asked}\n"
                        f"echo 'openjdk version \"{version}\" 2025-04-15' >&2\n")
        java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "new"))
    assert [require_java(), require_java()] == [17, 17]
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "old"))
    for _ in range(2):
        with pytest.raises(ReconcileError, match="Java 8 found, Spark 4 needs Java 17"):
            require_java()
    assert asked.read_text().split() == ["new", "old"]


# -- session -----------------------------------------------------------------------------------


def test_session_is_shared_and_leaves_no_warehouse(spark: SparkSession) -> None:
    assert get_spark() is spark
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert not (Path.cwd() / "spark-warehouse").exists()


def test_embedded_session_has_delta_and_the_writer_can_be_chosen(
        spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """`make jars` fetched Delta's jars: the embedded session is set up as
    `configure_spark_with_delta_pip` would, and delta-spark is the default writer."""
    assert has_delta_extension(spark)
    assert spark.conf.get("spark.sql.catalog.spark_catalog").endswith("DeltaCatalog")
    monkeypatch.setenv("RECONCILE_DELTA_WRITER", "auto")
    assert DeltaStorage(spark).writer.name == "delta-spark"
    monkeypatch.setenv("RECONCILE_DELTA_WRITER", "delta-rs")
    assert DeltaStorage(spark).writer.name == "delta-rs"
    monkeypatch.setenv("RECONCILE_DELTA_WRITER", "parquet")
    with pytest.raises(ReconcileError, match="RECONCILE_DELTA_WRITER='parquet'"):
        DeltaStorage(spark)


# -- storage -----------------------------------------------------------------------------------


def test_versions_and_pinned_reads(
    spark: SparkSession, storage: DeltaStorage, tmp_path: Path
) -> None:
    path = tmp_path / "views" / "v"
    assert storage.latest_version(path) is None
    assert storage.create(path, SIMPLE) == 0
    assert storage.create(path, SIMPLE) == 0  # idempotent
    first = [(1, "a"), (2, "b")]
    assert storage.append(path, spark.createDataFrame(first, SIMPLE)) == 1
    assert storage.append(path, spark.createDataFrame([(3, "c")], SIMPLE)) == 2
    # columns are matched by name and cast, whatever order the data has
    replacement = spark.createDataFrame([("z", 9)], "name string, id int")
    assert storage.overwrite(path, replacement, SIMPLE) == 3
    assert storage.overwrite(path, spark.createDataFrame([], SIMPLE), SIMPLE) == 4
    assert storage.latest_version(path) == 4

    old = storage.read(path, 1, SIMPLE)  # lazily pinned before any later read
    assert rows_of(old) == first
    assert rows_of(storage.read(path, 2, SIMPLE)) == [*first, (3, "c")]
    assert rows_of(storage.read(path, 3, SIMPLE)) == [(9, "z")]
    assert rows_of(storage.read(path, 4, SIMPLE)) == []
    assert [storage.row_count(path, v) for v in range(5)] == [0, 2, 3, 1, 0]

    history = DeltaTable(str(path)).history()
    assert [entry["operation"] for entry in reversed(history)] == [
        "CREATE TABLE",
        "WRITE",
        "WRITE",
        "WRITE",
        "WRITE",
    ]
    assert [entry["operationParameters"].get("mode") for entry in reversed(history)][1:] == [
        "Append",
        "Append",
        "Overwrite",
        "Overwrite",
    ]
    # Any Delta reader opens it (delta-rs's scan also applies deletion vectors).
    assert pa.table(DeltaTable(str(path), version=2).scan()).num_rows == 3

    with pytest.raises(ReconcileError, match="another schema"):
        storage.create(path, spark_schema([ColumnDef("id", "INT", False)]))


def test_idempotent_append(spark: SparkSession, storage: DeltaStorage, tmp_path: Path) -> None:
    path = table_uri(tmp_path / "t")
    storage.create(path, SIMPLE)
    batch = spark.createDataFrame([(1, "a")], SIMPLE)
    assert storage.transaction_version(path, "conn") is None
    assert storage.append(path, batch, app_id="conn", txn_version=0) == 1
    assert storage.append(path, batch, app_id="conn", txn_version=0) == 1  # replayed batch
    assert (
        storage.append(path, spark.createDataFrame([], SIMPLE), app_id="conn", txn_version=1) == 2
    )  # an empty batch still advances
    assert storage.append(path, batch, app_id="other", txn_version=0) == 3
    assert storage.transaction_version(path, "conn") == 1
    assert storage.row_count(path, 3) == 2
    assert DeltaTable(path).transaction_version("conn") == 1

    # Read from the log whoever wrote it, also once a checkpoint carries the transactions.
    DeltaTable(path).create_checkpoint()
    storage.append(path, batch, app_id="conn", txn_version=5)
    assert storage.transaction_version(path, "conn") == 5
    assert storage.transaction_version(path, "other") == 0
    assert storage.transaction_version(path, "nobody") is None
    assert storage.transaction_version(tmp_path / "missing", "conn") is None


def test_types_round_trip(spark: SparkSession, storage: DeltaStorage, tmp_path: Path) -> None:
    path = tmp_path / "rich"
    rows = [
        (
            1,
            Decimal("123.45"),
            dt.date(2024, 2, 29),
            dt.datetime(2024, 3, 1, 12, 30, 15, 123456),
            dt.datetime(1999, 12, 31, 23, 59, 59),
            [("a", 1), ("b", None)],
            {"x": Decimal("1.5")},
            "abc",
        ),
        (2, None, dt.date(1500, 1, 1), None, None, None, None, None),
    ]
    source = spark.createDataFrame(rows, RICH)
    storage.create(path, RICH)
    version = storage.append(path, source)

    back = storage.read(path, version, RICH)
    # Spark file sources read every column as nullable; types are exact
    assert back.schema.simpleString() == RICH.simpleString()
    assert rows_of(back) == rows_of(source)

    logged = struct_from_json(DeltaTable(str(path)).schema().to_json())
    assert same_schema(logged, RICH)  # NOT NULL (also nested), decimal(5,2), varchar(3)...
    assert logged["id"].nullable is False
    assert logged["price"].dataType == T.DecimalType(5, 2)
    assert logged["code"].metadata[CHAR_VARCHAR_METADATA_KEY] == "varchar(3)"

    nulls = source.limit(1).withColumn("id", F.lit(None).cast("bigint"))
    with pytest.raises(ReconcileError, match="column 'id' is NOT NULL but a row has a NULL"):
        storage.append(path, nulls)
    assert storage.latest_version(path) == version


DECLARED = spark_schema(
    [
        ColumnDef("id", "BIGINT", False),
        ColumnDef("we`ird", "DECIMAL(5,2)", True),
        ColumnDef("local_at", "TIMESTAMP_NTZ", True),
        ColumnDef("point", "STRUCT<x: INT NOT NULL, y: INT>", False),
        ColumnDef("tags", "ARRAY<STRUCT<k: STRING, v: INT>>", True),
        ColumnDef("attrs", "MAP<STRING,DECIMAL(4,1)>", True),
    ]
)


def test_delta_spark_creates_with_its_own_ddl_what_that_declares(
        spark: SparkSession, tmp_path: Path) -> None:
    """Delta's writer creates a table with Delta's `CREATE TABLE` where its DDL declares the
    schema: that commit has Delta's checksum, so the first write rebuilds no state from
    the log. What the DDL cannot declare (a VARCHAR, a NOT NULL inside an array) delta-rs
    creates; a name with a space is declared with column mapping (issue 52). Either way
    the log holds exactly the schema asked for, the table takes rows, and creating it
    again is a no-op."""
    storage = DeltaStorage(spark, writer="delta-spark")
    spaced = spark_schema([ColumnDef("odd name", "INT", True)])
    undeclared = [RICH, spark_schema([ColumnDef("id", "BIGINT", False),
                                      ColumnDef("tags", "ARRAY<STRUCT<k: INT NOT NULL>>", True)])]
    for index, schema in enumerate([DECLARED, spaced, *undeclared]):
        path = tmp_path / f"t{index}"
        version = storage.create(path, schema, change_feed=True)
        checksum = path / "_delta_log" / f"{version:020d}.crc"
        assert checksum.exists() == (schema in (DECLARED, spaced)), schema.simpleString()
        mapping = DeltaTable(str(path)).metadata().configuration.get("delta.columnMapping.mode")
        assert mapping == ("name" if schema is spaced else None)
        assert same_schema(storage.stored_schema(storage.at(path)), schema)
        assert storage.create(path, schema, change_feed=True) == version
        assert DeltaTable(str(path)).metadata().configuration[
            "delta.enableChangeDataFeed"] == "true"
    rows = [(1, Decimal("1.50"), dt.datetime(2024, 1, 1), (1, None), [("a", 1)], {"x": None})]
    written = storage.append(tmp_path / "t0", spark.createDataFrame(rows, DECLARED))
    assert rows_of(storage.read(tmp_path / "t0", written, DECLARED)) == [
        (1, Decimal("1.50"), dt.datetime(2024, 1, 1), (1, None), [("a", 1)], {"x": None})]


def test_empty_table_read(spark: SparkSession, storage: DeltaStorage, tmp_path: Path) -> None:
    path = tmp_path / "empty"
    version = storage.create(path, RICH)
    frame = storage.read(path, version, RICH)
    assert frame.schema == RICH
    assert frame.count() == 0
    assert storage.row_count(path, version) == 0


def test_awkward_local_paths(spark: SparkSession, storage: DeltaStorage, tmp_path: Path) -> None:
    # delta-rs percent-encodes file paths; Hadoop would also glob {} * ?
    path = tmp_path / "with space {a,b} *?" / "v"
    storage.create(path, SIMPLE)
    version = storage.append(path, spark.createDataFrame([(1, "a")], SIMPLE))
    assert rows_of(storage.read(path, version, SIMPLE)) == [(1, "a")]
    with pytest.raises(ReconcileError, match=r"delta-rs cannot use a local path containing \["):
        storage.create(tmp_path / "x[1]", SIMPLE)


def test_delete_and_errors(spark: SparkSession, storage: DeltaStorage, tmp_path: Path) -> None:
    path = tmp_path / "gone"
    storage.create(path, SIMPLE)
    storage.delete(path)
    assert not path.exists()
    assert storage.latest_version(path) is None
    storage.delete(path)  # already gone: fine
    with pytest.raises(ReconcileError, match="no Delta table"):
        storage.append(path, spark.createDataFrame([(1, "a")], SIMPLE))
    storage.create(path, SIMPLE)
    with pytest.raises(ReconcileError, match="cannot load Delta version 7"):
        storage.read(path, 7, SIMPLE)
    with pytest.raises(ReconcileError, match="no column"):
        storage.overwrite(path, spark.createDataFrame([(1,)], "id bigint"), SIMPLE)


def test_a_version_is_opened_once_and_forgotten_with_its_table(
    spark: SparkSession, storage: DeltaStorage, tmp_path: Path
) -> None:
    """A committed version's log never changes, so it is opened once per storage; a table
    deleted and created again at the same place starts at version 0 again and is read as
    it now is, not as the kept version said."""
    path = tmp_path / "again"
    storage.create(path, SIMPLE)
    assert storage.append(path, spark.createDataFrame([(1, "a")], SIMPLE)) == 1
    assert storage.at(path, 1) is storage.at(path, 1)  # kept since the append's commit
    assert storage.at(path, 1).files == DeltaTable(str(path), version=1).file_uris()
    assert rows_of(storage.read(path, 1, SIMPLE)) == [(1, "a")]
    assert storage.at(path) is not storage.at(path)  # the latest is opened afresh
    storage.delete(path)
    storage.create(path, SIMPLE)
    assert storage.append(path, spark.createDataFrame([(2, "b"), (3, "c")], SIMPLE)) == 1
    assert rows_of(storage.read(path, 1, SIMPLE)) == [(2, "b"), (3, "c")]
    assert storage.row_count(path, 1) == 2


def test_kept_versions_are_bounded(storage: DeltaStorage, tmp_path: Path) -> None:
    """Only the most recently used versions stay open (a handle holds a file list)."""
    path = str(tmp_path / "many")
    rows = pa.table({"id": pa.array([1], pa.int32()), "name": pa.array(["a"])})
    for _ in range(KEPT_VERSIONS + 1):
        write_deltalake(path, rows, mode="append")
    first = storage.at(path, 0)
    assert storage.at(path, 0) is first
    for version in range(1, KEPT_VERSIONS + 1):
        storage.at(path, version)
    assert storage.at(path, 0) is not first  # dropped, opened again
    assert storage.at(path, KEPT_VERSIONS) is storage.at(path, KEPT_VERSIONS)


def test_s3_table_through_moto(
    spark: SparkSession, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    bucket = f"data-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=bucket)
    storage = DeltaStorage(spark)
    path = f"s3://{bucket}/grades/views/v"
    assert storage.create(path, SIMPLE) == 0  # the log alone: delta-rs, no Spark
    assert storage.overwrite(path, spark.createDataFrame([], SIMPLE), SIMPLE) == 1
    assert storage.row_count(path, 1) == 0
    # Data files are written by Spark's executors through Hadoop's S3A connector (the
    # set-up fetched hadoop-aws), never through the driver; delta-rs commits them.
    rows = spark.createDataFrame([(1, "a"), (2, "b")], SIMPLE)
    assert storage.append(path, rows, app_id="c", txn_version=0) == 2
    assert storage.append(path, rows, app_id="c", txn_version=0) == 2  # idempotent
    assert storage.row_count(path, 2) == 2
    assert sorted(storage.read(path, 2, SIMPLE).collect()) == sorted(rows.collect())
    storage.delete(path)
    assert storage.latest_version(path) is None


def test_spark_flags_replace_where_the_file_says_spark_runs(spark: SparkSession,
                                                            tmp_path: Path) -> None:
    """`--spark-remote` over a file that sets spark.master (and the reverse) is not a
    conflict: the flag says where Spark runs. An unreachable Connect server is one line,
    at once, without the URL's parameters."""
    from click.testing import CliRunner

    from reconciler.cli.main import cli
    from tests.projects import copy_example

    project = copy_example("grades", tmp_path)  # reconcile.yaml sets spark.master
    runner = CliRunner()
    started = time.monotonic()
    refused = runner.invoke(cli, ["-C", str(project), "apply", "--auto-approve",
                                  "--spark-remote", "sc://127.0.0.1:1/;token=SECRET"])
    assert refused.exit_code == 1
    assert refused.output.strip() == ("error: cannot reach Spark Connect at sc://127.0.0.1:1/: "
                                      "Connection refused; is the server running and the port "
                                      "open?")
    assert time.monotonic() - started < 30
    settings = project / "reconcile.yaml"
    settings.write_text(settings.read_text().replace("master: local[2]",
                                                     "remote: sc://127.0.0.1:1"))
    applied = runner.invoke(cli, ["-C", str(project), "apply", "--auto-approve",
                                  "--spark-master", "local[2]"])
    assert applied.exit_code == 0, applied.output
    assert "deployed" in applied.output


@pytest.mark.usefixtures("merge_even_small")
def test_touched_rows_count_appends_and_deletes_from_the_log(
        spark: SparkSession, storage: DeltaStorage, tmp_path: Path) -> None:
    """`refresh: auto` sizes a step's change from the log: the rows of the files added or
    removed, and the rows deletion vectors newly mark (Delta's Spark writer deletes so; the
    delta-rs path rewrites the file: its old rows and its new ones)."""
    path = tmp_path / "t"
    storage.create(path, SIMPLE)
    storage.append(path, spark.createDataFrame([(i, "x") for i in range(10)], SIMPLE))
    storage.append(path, spark.createDataFrame([(10, "y"), (11, "y")], SIMPLE))
    assert storage.touched_rows(path, 1, 2) == 2
    assert storage.touched_rows(path, 0, 2) == 12
    version = apply_changes(DeltaRelation(storage, str(path), 2, SIMPLE), None,
                            spark.createDataFrame([(3, "x")], SIMPLE))
    if storage.writer.marks_rows:
        assert storage.touched_rows(path, 2, version) == 1
    else:  # the rewritten files' rows, old and new, counted from their Parquet footers
        added, removed = storage.changed_files(path, 2)
        assert removed
        assert storage.touched_rows(path, 2, version) == sum(
            pq.ParquetFile(file.removeprefix("file://")).metadata.num_rows
            for file in (*added, *removed))
