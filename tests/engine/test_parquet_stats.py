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
