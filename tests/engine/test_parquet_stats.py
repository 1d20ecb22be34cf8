"""Delta statistics from Parquet footers (`engine/delta/parquet_stats.py`), against the rows."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reconciler.engine.delta.parquet_stats import delta_stats


def test_bounds_and_null_counts_equal_the_rows_over_row_groups(tmp_path: Path) -> None:
    rng = random.Random(7)
    for trial in range(20):
        rows = rng.randint(1, 60)

        def maybe(value: object) -> object:
            return None if rng.random() < 0.3 else value

        ints = [maybe(rng.randint(-10**12, 10**12)) for _ in range(rows)]
        shorts = [maybe(rng.randint(-300, 300)) for _ in range(rows)]
        days = [maybe(dt.date(2000, 1, 1) + dt.timedelta(days=rng.randint(0, 9000)))
                for _ in range(rows)]
        table = pa.table({"k": pa.array(ints, pa.int64()), "s": pa.array(shorts, pa.int16()),
                          "d": pa.array(days, pa.date32()),
                          "name": pa.array([maybe("x" * rng.randint(0, 5)) for _ in range(rows)]),
                          "nested": pa.array([{"k": 1}] * rows)})
        path = tmp_path / f"{trial}.parquet"
        pq.write_table(table, path, row_group_size=rng.randint(1, 20))
        stats = json.loads(delta_stats(pq.read_metadata(path)))

        assert stats["numRecords"] == rows
        for name, values in {"k": ints, "s": shorts, "d": days}.items():
            present = [value for value in values if value is not None]
            assert stats["nullCount"][name] == rows - len(present)
            if present:
                low, high = min(present), max(present)
                assert stats["minValues"][name] == (str(low) if name == "d" else low)
                assert stats["maxValues"][name] == (str(high) if name == "d" else high)
            else:
                assert name not in stats["minValues"] and name not in stats["maxValues"]
        for skipped in ("name", "nested"):  # a filter on them reads the file
            assert skipped not in stats["nullCount"] and skipped not in stats["minValues"]


def test_a_footer_without_statistics_gives_only_the_row_count(tmp_path: Path) -> None:
    path = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"k": [1, 2, 3]}), path, write_statistics=False)
    assert json.loads(delta_stats(pq.read_metadata(path))) == {"numRecords": 3}


DAYS_1970 = dt.date(1970, 1, 1)


def days(date: dt.date) -> int:
    return (date - DAYS_1970).days


DAY_EDGES = [-2**31, -719528, -719163, -719162, -141428, -1, 0, 1, 2932896, 2932897, 3789391,
             2**31 - 1]
"""Days since 1970 at and beyond each edge: int32's, year 0's first day, 0000-12-31,
0001-01-01, 1582-10-15, 1969-12-31, the epoch, 9999-12-31, 10000-01-01, +12345-01-01."""


def test_dates_and_integers_at_every_edge_never_fail_and_are_exact_or_left_out(
        tmp_path: Path) -> None:
    """Bounds come from the footer's physical values: a date Python's `date` cannot hold
    (year 0, 10000, +12345: Spark reads them) is no error (issue 78), and a bound outside
    0001-01-01..9999-12-31, which Delta could not parse back, leaves the column's bounds
    out (Delta then reads the file for any filter on it) while its null count stays."""
    rng = random.Random(78)
    low_ok, high_ok = days(dt.date(1, 1, 1)), days(dt.date(9999, 12, 31))
    integer_types = {"b": (pa.int8(), 8), "s": (pa.int16(), 16), "i": (pa.int32(), 32),
                     "l": (pa.int64(), 64)}
    for trial in range(60):
        rows = rng.randint(1, 8)
        nulls = rng.random() < 0.2  # some files hold only nulls

        def drawn(edges: list[int], rows: int = rows, nulls: bool = nulls) -> list[int | None]:
            return [None if nulls or rng.random() < 0.2 else
                    rng.choice([*edges, rng.randint(min(edges), max(edges))])
                    for _ in range(rows)]

        columns: dict[str, list[int | None]] = {"d": drawn(DAY_EDGES)}
        arrays = {"d": pa.array(columns["d"], pa.int32()).cast(pa.date32())}
        for name, (kind, bits) in integer_types.items():
            edges = [-2**(bits - 1), -2**(bits - 1) + 1, -1, 0, 1, 2**(bits - 1) - 2,
                     2**(bits - 1) - 1]
            columns[name] = drawn(edges)
            arrays[name] = pa.array(columns[name], kind)
        path = tmp_path / f"{trial}.parquet"
        pq.write_table(pa.table(arrays), path, row_group_size=rng.randint(1, 4))
        stats = json.loads(delta_stats(pq.read_metadata(path)))

        for name, values in columns.items():
            present = [value for value in values if value is not None]
            assert stats["nullCount"][name] == rows - len(present), (trial, name)
            in_range = present and (name != "d" or low_ok <= min(present) <= max(present)
                                    <= high_ok)
            if not in_range:
                assert name not in stats["minValues"] and name not in stats["maxValues"]
            elif name == "d":
                assert stats["minValues"][name] == str(DAYS_1970 + dt.timedelta(min(present)))
                assert stats["maxValues"][name] == str(DAYS_1970 + dt.timedelta(max(present)))
            else:
                assert (stats["minValues"][name], stats["maxValues"][name]) == (
                    min(present), max(present)), (trial, name)


def test_a_dotted_name_unsigned_and_rebased_dates_are_described_only_where_exact(
        tmp_path: Path) -> None:
    """A top-level `a.b` is not the struct `a`'s field `b` (both have the path `a.b`);
    unsigned integers (no Delta type) are left out; and in a file Spark wrote with LEGACY
    date rebasing, dates before 1582-10-15 are Julian days in the footer, not the rows'."""
    table = pa.table({"a.b": pa.array([1, 2, 3], pa.int64()), "a": [{"b": 50}] * 3,
                      "u": pa.array([0, 1, 2**64 - 1], pa.uint64()),
                      "d": pa.array([days(dt.date(1000, 1, 1)), 0, 1], pa.int32()
                                    ).cast(pa.date32())})
    path = tmp_path / "named.parquet"
    pq.write_table(table, path)
    stats = json.loads(delta_stats(pq.read_metadata(path)))
    assert stats["minValues"] == {"a.b": 1, "d": "1000-01-01"}
    assert stats["maxValues"] == {"a.b": 3, "d": "1970-01-02"}
    assert set(stats["nullCount"]) == {"a.b", "d"}

    rebased = tmp_path / "legacy.parquet"
    pq.write_table(table.replace_schema_metadata({"org.apache.spark.legacyDateTime": ""}),
                   rebased)
    stats = json.loads(delta_stats(pq.read_metadata(rebased)))
    assert "d" not in stats["minValues"] and stats["nullCount"]["d"] == 0
    pq.write_table(table.select(["d"]).slice(1).replace_schema_metadata(
        {"org.apache.spark.legacyDateTime": ""}), rebased)  # 1970 only: not rebased
    assert json.loads(delta_stats(pq.read_metadata(rebased)))["minValues"] == {
        "d": "1970-01-01"}
