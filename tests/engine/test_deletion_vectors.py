"""Deletions on Delta's own writer: rows marked in deletion vectors, a Z-set's multiset
semantics kept, and everything that reads the log (pinned reads, row counts, the change
feed, retention) seeing the marks.

The oracle is a Python multiset over a few dozen drawn rows: a table that holds equal
rows several times loses one copy per deletion, a deletion of a row it does not hold
removes nothing, and each step's inserted rows are added.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from reconciler.engine.delta import compaction, merge
from reconciler.engine.delta.compaction import compact
from reconciler.engine.delta.deletion_vectors import live_files
from reconciler.engine.delta.merge import apply_changes
from reconciler.engine.delta.relation import DeltaRelation
from reconciler.engine.delta.retention import collect_garbage
from reconciler.engine.delta.storage import DeltaStorage
from reconciler.state.layout import Layout
from reconciler.support.errors import ReconcileError

SCHEMA = T.StructType([T.StructField("k", T.IntegerType(), False),
                       T.StructField("v", T.StringType(), True)])
STEPS = 2  # the second MERGE runs on a table the first already marked rows in


def draw(rng: random.Random, n: int) -> list[tuple[int, str | None]]:
    """Rows from a small domain, so equal rows (and NULLs) are common."""
    return [(rng.randint(0, 4), rng.choice(["a", "b", None])) for _ in range(n)]


def held(storage: DeltaStorage, path: Path, version: int) -> Counter:
    # A few dozen rows of a test table: collected to compare with the oracle.
    return Counter(tuple(row) for row in storage.read(path, version, SCHEMA).collect())


def drawn_step(storage: DeltaStorage, path: Path, version: int, expected: Counter,
               rng: random.Random, step: int) -> tuple[int, Counter, list, list]:
    """A drawn change (8 deletions, 3 insertions) applied to the table at `version` as step
    `step`'s app transaction: the new version, the multiset it holds (checked against the
    oracle), and the insertions and deletions."""
    spark = storage.spark
    deletes, inserts = draw(rng, 8), draw(rng, 3)
    after = apply_changes(DeltaRelation(storage, str(path), version, SCHEMA),
                          spark.createDataFrame(inserts, SCHEMA),
                          spark.createDataFrame(deletes, SCHEMA), app_transaction=("steps", step))
    expected = expected - Counter(deletes) + Counter(inserts)
    assert held(storage, path, after) == expected, step
    return after, expected, inserts, deletes


@pytest.mark.usefixtures("merge_even_small")  # a table this small is rewritten (below)
def test_deletions_mark_rows_and_keep_multiset_semantics(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(31)
    storage = DeltaStorage(spark, writer="delta-spark")
    path = tmp_path / "p" / "tables" / "t"
    storage.create(path, SCHEMA, change_feed=True)
    expected = Counter(draw(rng, 40))
    versions = {storage.append(path, spark.createDataFrame(list(expected.elements()), SCHEMA)):
                Counter(expected)}
    version = max(versions)
    for step in range(STEPS):
        previous = Counter(expected)
        after, expected, inserts, deletes = drawn_step(storage, path, version, expected, rng,
                                                       step)
        assert storage.row_count(path, after) == expected.total()
        feed_inserts, feed_deletes = storage.read_change_feed(path, version, after, SCHEMA)
        net = Counter(tuple(r) for r in feed_inserts.collect())
        net.subtract(Counter(tuple(r) for r in feed_deletes.collect()))
        change = Counter(expected)
        change.subtract(previous)
        assert +net == +change and -net == -change, step
        # Applied once: the same step again records nothing new.
        assert apply_changes(DeltaRelation(storage, str(path), after, SCHEMA),
                             spark.createDataFrame(inserts, SCHEMA),
                             spark.createDataFrame(deletes, SCHEMA),
                             app_transaction=("steps", step)) == after
        versions[after], version = Counter(expected), after
    # No row was copied into a rewritten file: deleted rows are marked (a file whose rows
    # are all deleted is dropped whole).
    merges = [entry for entry in storage.require(str(path)).history()
              if entry["operation"] == "MERGE"]
    assert len(merges) == STEPS
    assert {entry["operationMetrics"]["numTargetRowsCopied"] for entry in merges} == {"0"}
    assert live_files(str(path), version).deleted_rows > 0
    # Every earlier version reads as it was.
    for at, rows in versions.items():
        assert held(storage, path, at) == rows, at

    # Retention keeps what the retained versions read, their deletion vectors included,
    # and removes the vectors a later one replaced once no retained version reads them.
    layout, steps = Layout(str(tmp_path), "p"), sorted(versions)[1:]
    kept = collect_garbage(layout, [{"relations": {"t": {"path": str(path), "version": at}}}
                                    for at in steps], min_age_seconds=0)
    assert not [file for file in kept.files if file.endswith(".bin")]
    for at in steps:
        assert held(storage, path, at) == versions[at], at
    latest = collect_garbage(layout, [{"relations": {"t": {"path": str(path),
                                                           "version": version}}}],
                             min_age_seconds=0)
    assert [file for file in latest.files if file.endswith(".bin")]
    assert held(storage, path, version) == expected

    # The delta-rs fallback reads files, not deletion vectors: it neither changes nor
    # compacts such a table (either would bring the marked rows back).
    fallback = DeltaStorage(spark, writer="delta-rs")
    with pytest.raises(ReconcileError, match="deletion vectors"):
        apply_changes(DeltaRelation(fallback, str(path), version, SCHEMA), None,
                      spark.createDataFrame(list(expected)[:1], SCHEMA))
    monkeypatch.setattr(compaction, "COMPACT_AFTER", 0)  # every small file is due
    assert compact(fallback, path) is None
    assert held(storage, path, storage.latest_version(path) or 0) == expected


def test_a_small_feed_tables_change_is_a_rewrite_read_from_its_files(
        spark: SparkSession, tmp_path: Path) -> None:
    """A table with the change data feed under `merge.OVERWRITE_SMALL_BYTES` takes a change
    with deletions as one rewrite by the engine's own commit (no MERGE, no vector), with
    the multiset semantics of the MERGE; its change is read from the files the rewrite
    replaced (`nets`, no feed read), and through Delta's feed reader it nets to the same."""
    rng = random.Random(47)
    storage = DeltaStorage(spark, writer="delta-spark")
    path = tmp_path / "p" / "tables" / "small"
    storage.create(path, SCHEMA, change_feed=True)
    expected = Counter(draw(rng, 40))
    version = storage.append(path, spark.createDataFrame(list(expected.elements()), SCHEMA))
    for step in range(STEPS):
        previous = Counter(expected)
        after, expected, _, _ = drawn_step(storage, path, version, expected, rng, step)
        change = Counter(expected)
        change.subtract(previous)
        for nets in (True, False):
            read = storage.change_since(path, version, after, SCHEMA, nets=nets)
            assert read.from_feed is not nets, (step, nets)
            net = Counter(tuple(row) for row in read.inserts.collect())
            net.subtract(Counter(tuple(row) for row in read.deletes.collect()))
            assert +net == +change and -net == -change, (step, nets)
        version = after
    operations = [entry["operation"] for entry in storage.require(str(path)).history()]
    assert "MERGE" not in operations and live_files(str(path), version).deleted_rows == 0


@pytest.mark.usefixtures("merge_even_small")
def test_rows_unique_by_a_key_are_deleted_by_it(spark: SparkSession, tmp_path: Path) -> None:
    """An aggregate's state: one row per group, deleted by its key alone (an update of a
    group deletes its old row and inserts the new one in the same commit)."""
    storage = DeltaStorage(spark, writer="delta-spark")
    path = tmp_path / "state"
    storage.create(path, SCHEMA)
    version = storage.append(path, spark.createDataFrame([(k, f"v{k}") for k in range(6)],
                                                         SCHEMA))
    after = apply_changes(DeltaRelation(storage, str(path), version, SCHEMA),
                          spark.createDataFrame([(2, "new"), (9, "v9")], SCHEMA),
                          spark.createDataFrame([(2, "v2"), (4, "v4"), (7, "v7")], SCHEMA),
                          unique_by=["k"])
    assert held(storage, path, after) == Counter(
        [(0, "v0"), (1, "v1"), (2, "new"), (3, "v3"), (5, "v5"), (9, "v9")])
    assert live_files(str(path), after).deleted_rows == 2


def test_distinct_rows_are_not_counted(spark: SparkSession, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A table with a PRIMARY KEY holds no equal rows: a deletion matches the whole row (a
    row the table does not hold removes nothing) and the table is not scanned for copies."""
    storage = DeltaStorage(spark, writer="delta-spark")
    path = tmp_path / "keyed"
    storage.create(path, SCHEMA)
    version = storage.append(path, spark.createDataFrame([(k, f"v{k}") for k in range(4)],
                                                         SCHEMA))

    def refuse(*_: object) -> None:
        raise AssertionError("distinct rows need no count of copies")

    monkeypatch.setattr(merge, "_surviving_copies", refuse)
    after = apply_changes(DeltaRelation(storage, str(path), version, SCHEMA),
                          spark.createDataFrame([(9, "v9")], SCHEMA),
                          spark.createDataFrame([(1, "v1"), (2, "other")], SCHEMA),
                          distinct=True)
    assert held(storage, path, after) == Counter([(0, "v0"), (2, "v2"), (3, "v3"), (9, "v9")])


@pytest.mark.usefixtures("merge_even_small")
def test_deletions_read_only_files_within_their_key_range(spark: SparkSession,
                                                          tmp_path: Path) -> None:
    """Rows that arrived in key order sit in files of disjoint key ranges: a deletion of a few
    keys makes Delta's MERGE skip the files outside the deleted keys' range. Proven by
    removing such a file from disk first: reading it would fail the MERGE."""
    storage = DeltaStorage(spark, writer="delta-spark")
    path = tmp_path / "ranged"
    storage.create(path, SCHEMA)
    files: list[set[str]] = []
    version = 0
    for start in range(0, 400, 100):  # four appends, four files of 100 keys each
        version = storage.append(path, spark.createDataFrame(
            [(k, f"v{k}") for k in range(start, start + 100)], SCHEMA).coalesce(1))
        files.append(set(storage.require(str(path)).file_uris()))
    [last_keys_file] = files[-1] - files[-2]  # keys 300 to 399
    Path(last_keys_file).unlink()
    after = apply_changes(DeltaRelation(storage, str(path), version, SCHEMA), None,
                          spark.createDataFrame([(150, "v150"), (160, "v160")], SCHEMA),
                          distinct=True)
    assert storage.row_count(path, after) == 398
    assert live_files(str(path), after).deleted_rows == 2


def test_decimal_and_date_keys_bound_the_merge(spark: SparkSession, tmp_path: Path) -> None:
    """The key range is written as SQL literals: a zero decimal with a scale (`0E-10` in
    Python) and dates must come out as Spark reads them."""
    schema = T.StructType([T.StructField("k", T.DecimalType(12, 10)),
                           T.StructField("d", T.DateType())])
    storage = DeltaStorage(spark, writer="delta-spark")
    rows = [(Decimal("0E-10"), dt.date(2020, 1, 1)), (Decimal("-1.5"), dt.date(2021, 6, 30)),
            (Decimal("2.25"), None)]
    for name in ("decimal", "date"):  # each deletes two rows, keeps the third
        path = tmp_path / name
        storage.create(path, schema if name == "decimal" else T.StructType(schema.fields[::-1]))
        frame = spark.createDataFrame(rows, schema)
        if name == "date":
            frame = frame.select("d", "k")
        version = storage.append(path, frame)
        doomed = frame.limit(0).unionByName(frame.filter("k <= 0" if name == "decimal"
                                                         else "d is not null"))
        after = apply_changes(DeltaRelation(storage, str(path), version, frame.schema), None,
                              doomed, distinct=True)
        assert storage.row_count(path, after) == 1, name


def _writers(spark: SparkSession, path: Path) -> list[str]:
    """Each commit's engine, oldest first (a test table's short history)."""
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version")
    return [row.engineInfo.split("/")[0].split(":")[0] for row in history.collect()]


def test_a_small_tables_rows_are_replaced_by_the_engines_commit_unless_rows_are_marked(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small table's change with deletions replaces its rows by the engine's own commit
    (one Spark job, not Delta's five), which Delta's reader reads back exactly; once a
    MERGE marked rows of it in a deletion vector, Delta's own writer replaces it (a
    delta-rs remove is not trusted to name the vector), and the marked rows stay deleted."""
    storage = DeltaStorage(spark, writer="delta-spark")
    path = tmp_path / "p" / "views" / "v"
    storage.create(path, SCHEMA)
    rows = [(k, "a") for k in range(6)]
    version = storage.append(path, spark.createDataFrame(rows, SCHEMA))
    version = apply_changes(DeltaRelation(storage, str(path), version, SCHEMA),
                            spark.createDataFrame([(9, "z")], SCHEMA),
                            spark.createDataFrame([(0, "a")], SCHEMA))
    assert _writers(spark, path)[-1] == "delta-rs"
    expected = Counter([*rows[1:], (9, "z")])
    assert Counter(tuple(r) for r in spark.read.format("delta").load(str(path)).collect()) \
        == expected
    monkeypatch.setattr(merge, "OVERWRITE_SMALL_BYTES", -1)  # a MERGE marks a row
    version = apply_changes(DeltaRelation(storage, str(path), version, SCHEMA), None,
                            spark.createDataFrame([(1, "a")], SCHEMA))
    assert storage.at(path).vectors, "the MERGE marked a row in a deletion vector"
    monkeypatch.undo()
    version = apply_changes(DeltaRelation(storage, str(path), version, SCHEMA), None,
                            spark.createDataFrame([(2, "a")], SCHEMA))
    assert _writers(spark, path)[-1] == "Apache-Spark"
    expected -= Counter([(1, "a"), (2, "a")])
    assert held(storage, path, version) == expected
    assert Counter(tuple(r) for r in spark.read.format("delta").load(str(path)).collect()) \
        == expected


def test_a_small_tables_append_is_the_engines_commit_read_by_the_change_feed(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An append to a small table with the change data feed, after a MERGE marked one of its
    rows, is the engine's own commit (Delta's would compute the snapshot first): Delta's
    reader and its change feed read it back, and its app transaction makes a replay add
    nothing. `RECONCILE_ENGINE_COMMIT_BYTES=0` leaves the append to Delta's writer."""
    storage = DeltaStorage(spark, writer="delta-spark")
    path = tmp_path / "p" / "tables" / "t"
    storage.create(path, SCHEMA, change_feed=True)
    rows = [(k, "a") for k in range(4)]
    version = storage.append(path, spark.createDataFrame(rows, SCHEMA), app_id="i", txn_version=1)
    monkeypatch.setattr(merge, "OVERWRITE_SMALL_BYTES", -1)  # a MERGE marks a row
    marked = apply_changes(DeltaRelation(storage, str(path), version, SCHEMA), None,
                           spark.createDataFrame([(0, "a")], SCHEMA))
    assert storage.at(path).vectors, "the MERGE marked a row in a deletion vector"
    added = spark.createDataFrame([(7, "b"), (8, "b")], SCHEMA)
    appended = storage.append(path, added, app_id="i", txn_version=2)
    assert _writers(spark, path)[-1] == "delta-rs"
    assert storage.append(path, added, app_id="i", txn_version=2) == appended, "a replay"
    expected = Counter([*rows[1:], (7, "b"), (8, "b")])
    assert Counter(tuple(r) for r in spark.read.format("delta").load(str(path)).collect()) \
        == expected
    feed = (spark.read.format("delta").option("readChangeFeed", "true")
            .option("startingVersion", marked + 1).load(str(path)))
    assert Counter((r.k, r.v, r._change_type) for r in feed.collect()) == Counter(
        [(7, "b", "insert"), (8, "b", "insert")])

    monkeypatch.setenv("RECONCILE_ENGINE_COMMIT_BYTES", "0")
    DeltaStorage(spark, writer="delta-spark").append(path, added, app_id="i", txn_version=3)
    assert _writers(spark, path)[-1] == "Apache-Spark"
    monkeypatch.setenv("RECONCILE_ENGINE_COMMIT_BYTES", "half")
    with pytest.raises(ReconcileError, match="RECONCILE_ENGINE_COMMIT_BYTES='half'"):
        DeltaStorage(spark, writer="delta-spark")
