"""The distributed writer (Spark writes, delta-rs commits) and retention, on real tables."""

from __future__ import annotations

import datetime as dt
import json
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from reconciler.desired.parsing.sql import ColumnDef
from reconciler.engine.delta.commit import WRITE_FOLDER_PREFIX
from reconciler.engine.delta.compaction import compact
from reconciler.engine.delta.retention import collect_garbage
from reconciler.engine.delta.storage import DeltaStorage
from reconciler.engine.spark.schema import spark_schema
from reconciler.state.layout import Layout
from tests.cli_helpers import in_storage, manifest, query, reconcile
from tests.projects import events_pipeline, write_files

SCHEMA = spark_schema([ColumnDef("id", "BIGINT", False), ColumnDef("amount", "DECIMAL(10,2)", True),
                       ColumnDef("at", "TIMESTAMP", True), ColumnDef("day", "DATE", True),
                       ColumnDef("name", "STRING", True)])


def sample(spark: SparkSession, rows: int) -> DataFrame:
    return spark.range(rows).select(
        F.col("id"), (F.col("id") / 4).cast("decimal(10,2)").alias("amount"),
        F.timestamp_seconds(F.col("id") * 3600 + F.lit(1_700_000_000)).alias("at"),
        F.date_add(F.lit(dt.date(2026, 1, 1)), (F.col("id") % 365).cast("int")).alias("day"),
        F.concat(F.lit("n-"), F.col("id").cast("string")).alias("name"))


def test_executors_write_and_one_commit_carries_sizes_and_counts(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No table contents reach the driver: collect/toArrow/toPandas/toLocalIterator are
    forbidden during the writes (the file listing reads Parquet footers, not rows)."""
    collected: list[list[str]] = []

    def watching_collect(self: DataFrame) -> Any:
        collected.append(self.columns)
        return real_collect(self)

    def forbidden(self: DataFrame, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("table contents pulled into the driver")

    storage = DeltaStorage(spark, writer="delta-rs")
    path = tmp_path / "t"
    storage.create(path, SCHEMA)
    data = sample(spark, 5000).repartition(3)
    frame_class = type(data)  # the session's implementation (classic or Connect)
    real_collect = frame_class.collect
    monkeypatch.setattr(frame_class, "collect", watching_collect)
    monkeypatch.setattr(frame_class, "toArrow", forbidden)
    monkeypatch.setattr(frame_class, "toPandas", forbidden)
    monkeypatch.setattr(frame_class, "toLocalIterator", forbidden)
    version = storage.append(path, data, app_id="c", txn_version=0)
    overwritten = storage.overwrite(path, data.where("id < 100"), SCHEMA)
    monkeypatch.undo()

    assert collected == []
    log = DeltaTable(str(path), version=version)
    adds = pa.table(log.get_add_actions(flatten=True))
    assert adds.num_rows == 3  # one file per partition, committed together
    assert sum(adds.column("num_records").to_pylist()) == 5000
    sizes = {name: os.path.getsize(path / name) for name in adds.column("path").to_pylist()}
    assert sizes == dict(zip(adds.column("path").to_pylist(), adds.column("size_bytes").to_pylist(),
                             strict=True))
    assert all(name.startswith(WRITE_FOLDER_PREFIX) for name in sizes)
    assert storage.row_count(path, version) == 5000
    assert storage.row_count(path, overwritten) == 100
    assert DeltaTable(str(path)).transaction_version("c") == 0


def test_delta_rs_and_spark_read_the_same_rows(spark: SparkSession, tmp_path: Path) -> None:
    storage = DeltaStorage(spark, writer="delta-rs")
    path = tmp_path / "t"
    storage.create(path, SCHEMA)
    version = storage.append(path, sample(spark, 300))
    def instant(value: Any) -> Any:  # Spark gives naive local times, delta-rs aware UTC ones
        return value.timestamp() if isinstance(value, dt.datetime) else value

    by_spark = sorted(tuple(map(instant, row))
                      for row in storage.read(path, version, SCHEMA).collect())
    by_delta_rs = DeltaTable(str(path), version=version).to_pyarrow_table().to_pylist()
    assert sorted(tuple(map(instant, row.values())) for row in by_delta_rs) == by_spark
    assert by_spark[1][1] == Decimal("0.25") and by_spark[1][2] == 1_700_003_600
    file = DeltaTable(str(path)).file_uris()[0]
    written = pq.read_schema(file).field("at").type
    assert written == pa.timestamp("us", tz="UTC")  # TIMESTAMP_MICROS, not Spark's INT96


def test_an_uncommitted_write_is_invisible_and_collected(spark: SparkSession,
                                                         tmp_path: Path) -> None:
    """Files Spark wrote for a commit that never happened are read by nobody, and retention
    removes them once older than min_age."""
    storage = DeltaStorage(spark, writer="delta-rs")
    path = tmp_path / "p" / "tables" / "t"
    version = storage.create(path, SCHEMA)
    orphan = path / f"{WRITE_FOLDER_PREFIX}crashed"
    sample(spark, 50).write.parquet(str(orphan))  # what a killed writer leaves behind
    assert storage.read(path, version, SCHEMA).count() == 0
    layout = Layout(str(tmp_path), "p")
    pinned = [{"relations": {"t": {"path": str(path), "version": version, "kind": "table"}}}]
    kept = collect_garbage(layout, pinned, min_age_seconds=3600)
    assert kept.files == []  # too young: a write may still be on its way to its commit
    dry = collect_garbage(layout, pinned, min_age_seconds=0, dry_run=True)
    assert dry.files and all("crashed" in file for file in dry.files)
    assert any(orphan.glob("*.parquet"))
    done = collect_garbage(layout, pinned, min_age_seconds=0)
    assert sorted(done.files) == sorted(dry.files) and done.bytes > 0
    assert not any(orphan.rglob("*.parquet"))
    assert storage.read(path, version, SCHEMA).count() == 0


RETENTION_PROJECT = events_pipeline("""
    create table events (id bigint not null, k string, v int);
    create materialized view big as select id, k, v from events where v > 10;
    create materialized view totals as select k, count(*) as n, sum(v) as s from events
    group by k;
    """, settings="retention:\n  serials: 2\n  min_age: 0s\n  every: 3\n")


def storage_bytes(project: Path) -> int:
    root = project / ".reconcile/data"
    return sum(file.stat().st_size for file in root.rglob("*") if file.is_file())


def test_storage_does_not_grow_with_steps(spark: SparkSession, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """On the delta-rs writer, whose files are its rows (the files left are compared with
    the log's); retention of rows marked in deletion vectors: test_deletion_vectors."""
    monkeypatch.setenv("RECONCILE_DELTA_WRITER", "delta-rs")
    project = write_files(tmp_path, RETENTION_PROJECT)
    inbox = project / "input/events"
    inbox.mkdir(parents=True, exist_ok=True)
    reconcile(project, "apply", "--auto-approve")
    sizes = []
    for step in range(8):
        rows = [f'{{"id": {step * 100 + i}, "k": "k{i % 3}", "v": {i}}}' for i in range(60)]
        (inbox / f"part-{step}.json").write_text("\n".join(rows) + "\n")
        assert "step committed" in reconcile(project, "run")
        sizes.append(storage_bytes(project))
        serial = manifest(project, "p")["serial"]  # the apply's is 1
        dry = reconcile(project, "state", "gc", "-p", "p", "--dry-run")
        if serial % 3 == 0:  # `every: 3`: this step's pass left nothing to remove
            assert dry.startswith("p: would remove 0 file(s)"), (serial, dry)
        elif serial > 3:  # no pass: the version only the manifest before last pinned stays
            assert not dry.startswith("p: would remove 0 file(s)"), (serial, dry)
    # Two retained manifests: replaced files go; what is left is the table's and the filter
    # view's appended files, the aggregate's last two versions, plus a bounded Delta log.
    assert sizes[-1] < sizes[2] * 1.6, sizes
    data = project / ".reconcile/data/p"
    for grouped in (data / "views/totals", data / "state/totals"):  # rewritten each step
        folders = [d for d in grouped.iterdir() if d.name.startswith(WRITE_FOLDER_PREFIX)]
        assert len(folders) <= 2, folders
    appended = data / "views/big"  # maintained by appends: every file left is a live one
    on_disk = {str(file) for file in appended.rglob("*.parquet") if "_delta_log" not in str(file)}
    assert on_disk == set(DeltaTable(str(appended)).file_uris())
    assert query(project, "p", "SELECT count(*) AS n FROM big") == [{"n": 8 * 49}]
    assert query(project, "p", "SELECT sum(n) AS n FROM totals") == [{"n": 8 * 60}]
    # The previous manifest is retained, so its pinned versions still read.
    previous = manifest(project, "p")["serial"] - 1
    document = json.loads((project / f".reconcile/state/p/history/{previous}.json").read_text())
    for state in document["relations"].values():
        table = DeltaTable(in_storage(project, state["path"]), version=state["version"])
        assert table.to_pyarrow_table() is not None


def test_state_gc_reports_what_it_removes(spark: SparkSession, tmp_path: Path) -> None:
    files = dict(RETENTION_PROJECT)
    files["reconcile.yaml"] = "retention:\n  serials: 1\n  min_age: 1h\n"
    project = write_files(tmp_path, files)
    (project / "input/events").mkdir(parents=True, exist_ok=True)
    reconcile(project, "apply", "--auto-approve")
    for step in range(2):
        (project / f"input/events/part-{step}.json").write_text(
            f'{{"id": {step}, "k": "a", "v": 20}}\n')
        reconcile(project, "run")
    # Nothing is old enough; the pass (the first: the steps' serials are not multiples of
    # `every`) writes the logs' checkpoints, so the byte count below sees only deletions.
    assert "p: removed 0 file(s)" in reconcile(project, "state", "gc")
    settings = project / "reconcile.yaml"
    settings.write_text("retention:\n  serials: 1\n  min_age: 0s\n")
    dry = reconcile(project, "state", "gc", "--dry-run")
    assert "would remove" in dry and "views/big/" in dry, dry
    listed = json.loads(reconcile(project, "state", "gc", "--dry-run", "--json"))
    assert listed["dry_run"] and any("views/big/" in f for f in listed["pipelines"]["p"]["files"])
    before = storage_bytes(project)
    done = reconcile(project, "state", "gc", "-p", "p")
    assert done.startswith("p: removed ") and storage_bytes(project) < before, done
    assert query(project, "p", "SELECT count(*) AS n FROM big") == [{"n": 2}]


def test_many_small_appends_are_compacted_into_one_commit(spark: SparkSession,
                                                          tmp_path: Path) -> None:
    storage = DeltaStorage(spark, writer="delta-rs")
    path = tmp_path / "t"
    storage.create(path, SCHEMA)
    for batch in range(17):
        version = storage.append(path, sample(spark, 10).withColumn("id", F.col("id") + batch * 10)
                                 .coalesce(1), app_id="c", txn_version=batch)
    rows = sorted(tuple(row) for row in storage.read(path, version, SCHEMA).collect())
    assert len(DeltaTable(str(path), version=version).file_uris()) == 17
    compacted = compact(storage, path)
    assert compacted is not None and compacted > version
    assert len(DeltaTable(str(path)).file_uris()) == 1
    assert sorted(tuple(row) for row in storage.read(path, compacted, SCHEMA).collect()) == rows
    assert storage.row_count(path, compacted) == 170
    last = DeltaTable(str(path)).history(1)[0]
    assert last["operation"] == "WRITE"
    assert DeltaTable(str(path)).transaction_version("c") == 16  # kept by the compaction
    assert compact(storage, path) is None  # nothing small left
