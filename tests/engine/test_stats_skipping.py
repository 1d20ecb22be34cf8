"""Delta's data skipping over the engine's own statistics never skips a file holding a
matching row (issue 78): for every type the engine writes statistics for (byte, short, int,
long, date: `engine/delta/parquet_stats.py`), with values at and beyond each edge (the
integers' extremes, dates before 1970, of year 1, year 0, negative years, 9999-12-31,
10000 and beyond, as far as Spark's dates reach), NULLs and files holding only NULLs.

Hypothesis draws the files of a Delta table that Delta's writer created and the engine's
own commit appended to (Spark writes the Parquet files, delta-rs commits them with
`delta_stats`); Delta's reader then answers filters on each column, each a scan of its
own that skips files by those statistics, and the engine's bounded MERGE
(`engine/delta/merge.py`) deletes and inserts rows keyed on each type in turn. Each answer
must equal the oracle computed in Python from the drawn values, without any skipping.
"""

from __future__ import annotations

import functools
import uuid
from collections import Counter
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reconciler.engine.delta import merge
from reconciler.engine.delta.commit import WRITE_FOLDER_PREFIX
from reconciler.engine.delta.merge import apply_changes
from reconciler.engine.delta.relation import DeltaRelation
from reconciler.engine.delta.storage import DeltaStorage

DAY_EDGES = [-2**31, -106751992, -735525, -719528, -719163, -719162, -141428, -1, 0, 1,
             2932896, 2932897, 3789391, 2**31 - 1]
"""Days since 1970 at and beyond each edge of a date: int32's (Spark's first and last
date), -290308-12-21, -0044-03-15, 0000-01-01, 0000-12-31, 0001-01-01, 1582-10-15,
1969-12-31, the epoch, 1970-01-02, 9999-12-31, 10000-01-01, +12345-01-01."""

COLUMNS: dict[str, tuple[str, int, int]] = {  # name: (Spark type, lowest, highest)
    "b": ("tinyint", -2**7, 2**7 - 1),
    "s": ("smallint", -2**15, 2**15 - 1),
    "i": ("int", -2**31, 2**31 - 1),
    "l": ("bigint", -2**63, 2**63 - 1),
    "d": ("date", -2**31, 2**31 - 1),  # days since 1970
}
SCHEMA = T.StructType([T.StructField("id", T.IntegerType()),
                       T.StructField("b", T.ByteType()), T.StructField("s", T.ShortType()),
                       T.StructField("i", T.IntegerType()), T.StructField("l", T.LongType()),
                       T.StructField("d", T.DateType())])

SPARK_DATE_FILTER_FLOOR = -2**31 + 10**6
"""Spark cannot filter a date column by a literal near its first day: rebasing the literal
to the Julian calendar for the Parquet reader overflows (`integer overflow`, before any
statistic is read). The probes stay above; the rows do not (the engine's MERGE leaves such
a bound out: `merge._key_bounds`)."""


def edges(name: str) -> list[int]:
    if name == "d":
        return DAY_EDGES
    _, low, high = COLUMNS[name]
    return [low, low + 1, -1, 0, 1, high - 1, high]


def value(name: str) -> st.SearchStrategy[int | None]:
    _, low, high = COLUMNS[name]
    return st.one_of(st.none(), st.sampled_from(edges(name)), st.integers(low, high))


ROW = st.fixed_dictionaries({name: value(name) for name in COLUMNS})
FILES = st.lists(st.lists(ROW, min_size=1, max_size=4), min_size=2, max_size=5)
NULLS = dict.fromkeys(COLUMNS)
EDGES_EXAMPLE = [[{name: edges(name)[0] for name in COLUMNS}, NULLS],
                 [NULLS, NULLS],
                 [{name: edges(name)[-1] for name in COLUMNS}],
                 [{name: edges(name)[len(edges(name)) // 2] for name in COLUMNS}]]


def civil(days: int) -> str:
    """Days since 1970 as Spark writes the date (proleptic Gregorian, `+12345-01-01`,
    `0000-01-01`, `-0044-03-15`), without Python's `date`, which ends at year 9999."""
    z = days + 719468
    era = z // 146097
    day_of_era = z - era * 146097
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36524
                   - day_of_era // 146096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted + 2) // 5 + 1
    month = shifted + 3 if shifted < 10 else shifted - 9
    year = year_of_era + era * 400 + (month <= 2)
    sign = "-" if year < 0 else "+" if year > 9999 else ""
    return f"{sign}{abs(year):04d}-{month:02d}-{day:02d}"


def test_civil_dates_are_sparks(spark: SparkSession) -> None:
    """The oracle's dates are Spark's: each edge as `cast(date as string)` writes it."""
    days = spark.createDataFrame([(day,) for day in DAY_EDGES], "n int")
    written = days.select(F.expr("cast(date_from_unix_date(n) as string)")).collect()
    assert [row[0] for row in written] == [civil(day) for day in DAY_EDGES]


def literal(name: str, raw: int) -> str:
    return f"DATE'{civil(raw)}'" if name == "d" else str(raw)


def numbered(files: list[list[dict[str, Any]]], first_id: int) -> list[list[dict[str, Any]]]:
    """The drawn files' rows, each with an id of its own."""
    ids = iter(range(first_id, first_id + sum(map(len, files))))
    return [[{"id": next(ids), **row} for row in file] for file in files]


def frame(spark: SparkSession, files: list[list[dict[str, Any]]]) -> DataFrame:
    """The rows of `files`, one Spark partition (so one Parquet file) per file: partition
    `n` of a range picks the `n`th file out of a literal. Dates are made by Spark from
    their days, which no Python `date` holds beyond year 9999."""
    types = {"id": "int", **{name: "int" if name == "d" else kind
                             for name, (kind, _, _) in COLUMNS.items()}}
    literal = F.array(*(F.array(*(F.struct(*(F.lit(row[name]).cast(kind).alias(name)
                                             for name, kind in types.items()))
                                  for row in file)) for file in files))
    picked = spark.range(0, len(files), 1, len(files)).select(
        F.explode(F.element_at(literal, F.col("id").cast("int") + 1)).alias("row"))
    return picked.select("row.*").withColumn("d", F.date_from_unix_date("d"))


def matches(raw: int | None, operator: str, probe: int | None) -> bool:
    if operator == "is null":
        return raw is None
    if raw is None or probe is None:
        return False
    return {"=": raw == probe, "<=": raw <= probe, ">=": raw >= probe}[operator]


def assert_filters_skip_no_matching_file(spark: SparkSession, uri: str,
                                         files: list[list[dict[str, Any]]]) -> None:
    """Each filter, a scan of its own with Delta's data skipping, counts the rows the
    oracle counts. The probes are where a wrong bound would skip a file: each file's
    lowest and highest value of each column (equal to; at least the lowest, at most the
    highest) and its NULLs. (A scan plans its files in a Spark job: a few dozen probes.)"""
    rows = [row for file in files for row in file]
    probes: set[tuple[str, str, int | None]] = set()
    for name in COLUMNS:
        floor = SPARK_DATE_FILTER_FLOOR if name == "d" else COLUMNS[name][1]
        for file in files:
            values = sorted(row[name] for row in file
                            if row[name] is not None and row[name] >= floor)
            if values:
                probes |= {(name, "=", values[0]), (name, "=", values[-1]),
                           (name, ">=", values[0]), (name, "<=", values[-1])}
        probes.add((name, "is null", None))
    ordered = sorted(probes, key=str)
    table = spark.read.format("delta").load(uri)
    scans = [table.where(f"{name} {operator}" if probe is None else
                         f"{name} {operator} {literal(name, probe)}").select(
        F.lit(index).alias("probe")) for index, (name, operator, probe) in enumerate(ordered)]
    union = functools.reduce(DataFrame.unionByName, scans)
    counted: dict[int, int] = dict(union.groupBy("probe").count().collect())  # (counts)
    assert {probe: counted.get(index, 0) for index, probe in enumerate(ordered)} == {
        probe: sum(matches(row[probe[0]], probe[1], probe[2]) for row in rows)
        for probe in ordered}


def held(spark: SparkSession, uri: str) -> Counter[tuple[Any, ...]]:
    rows = spark.read.format("delta").load(uri).selectExpr(
        "id", *(f"unix_date({name})" if name == "d" else name for name in COLUMNS)).collect()
    return Counter(tuple(row) for row in rows)


def as_tuples(rows: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(row[key] for key in ("id", *COLUMNS)) for row in rows)


@pytest.mark.parametrize("key", list(COLUMNS))
@settings(max_examples=1, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(files=FILES, data=st.data())
@example(files=EDGES_EXAMPLE, data=None)  # every extreme and an all-NULL file
def test_delta_never_skips_a_file_holding_a_matching_row(
        spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, key: str,
        files: list[list[dict[str, Any]]], data: Any) -> None:
    storage = DeltaStorage(spark, writer="delta-spark")
    uri = str(tmp_path_factory.mktemp("skipping") / uuid.uuid4().hex)
    version = storage.create(Path(uri), SCHEMA)
    files = numbered(files, 0)
    rows = [row for file in files for row in file]
    version = storage.append(Path(uri), frame(spark, files))
    paths = storage.at(uri).add_actions().column("path").to_pylist()
    # The engine's own commit wrote them (its folder), one file per drawn file.
    assert all(path.startswith(WRITE_FOLDER_PREFIX) for path in paths)
    assert len(paths) == len(files), paths

    # The engine's MERGE bounded by the deleted keys, rows unique by (key, id).
    if data is None:  # the explicit example: its extreme rows and a NULL row
        doomed = [*[row for row in rows if row[key] is not None][:2], rows[1]]
        drawn: list[dict[str, Any]] = [{name: rows[0][name] for name in COLUMNS}]
    else:
        doomed = data.draw(st.lists(st.sampled_from(rows), unique_by=lambda row: row["id"],
                                    min_size=1, max_size=3))
        drawn = data.draw(st.lists(ROW, max_size=2))
    [added] = numbered([drawn], len(rows))
    with patch.object(merge, "OVERWRITE_SMALL_BYTES", -1):  # a large table's MERGE
        apply_changes(DeltaRelation(storage, str(Path(uri)), version, SCHEMA),
                      frame(spark, [added]) if added else None, frame(spark, [doomed]),
                      unique_by=(key, "id"))
    doomed_ids = {row["id"] for row in doomed}
    files = [[row for row in file if row["id"] not in doomed_ids] for file in files]
    assert held(spark, uri) == as_tuples([*(row for file in files for row in file), *added])
    # The engine's files (their deleted rows marked in deletion vectors) and Delta's own.
    assert_filters_skip_no_matching_file(spark, uri, [*files, added])
