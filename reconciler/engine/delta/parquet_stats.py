"""Delta's per-file statistics of a Parquet file the engine commits, from its footer.

Delta's readers skip a file whose `minValues`/`maxValues` exclude a filter (a MERGE bounded
by the deleted keys among them), so a file committed with only its row count is read by
every bounded scan. Spark's Parquet writer keeps min, max and null count per row group in
the footer, which the commit reads anyway for the row count: this turns them into Delta's
`stats` JSON. Only top-level integer and date columns are described, whose footer values
are exact and whose JSON form is unambiguous; other columns are left out, and Delta then
reads the file for a filter on them (it never skips on a missing statistic).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def delta_stats(metadata: pq.FileMetaData) -> str:
    """The `stats` of an add action for the file whose footer is `metadata`."""
    stats: dict[str, Any] = {"numRecords": metadata.num_rows}
    minimums: dict[str, Any] = {}
    maximums: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    leaves = _leaf_indexes(metadata)
    for field in metadata.schema.to_arrow_schema():
        index = leaves.get(field.name)
        if index is None or not (pa.types.is_integer(field.type)
                                 or pa.types.is_date32(field.type)):
            continue
        described = _column_stats(metadata, index)
        if described is None:
            continue
        null_count, bounds = described
        nulls[field.name] = null_count
        if bounds is not None:
            minimums[field.name], maximums[field.name] = (_json_value(value) for value in bounds)
    if nulls:
        stats |= {"minValues": minimums, "maxValues": maximums, "nullCount": nulls}
    return json.dumps(stats)


def _leaf_indexes(metadata: pq.FileMetaData) -> dict[str, int]:
    """Column chunk index of each top-level primitive column, by name."""
    if metadata.num_row_groups == 0:
        return {}
    group = metadata.row_group(0)
    return {group.column(index).path_in_schema: index for index in range(group.num_columns)}


def _column_stats(metadata: pq.FileMetaData, index: int
                  ) -> tuple[int, tuple[Any, Any] | None] | None:
    """(null count, (min, max) or None when every value is null) of one column over the
    row groups; None when a row group's footer lacks what would make it exact."""
    null_count, low, high = 0, None, None
    for group_index in range(metadata.num_row_groups):
        group = metadata.row_group(group_index)
        statistics = group.column(index).statistics
        if statistics is None or not statistics.has_null_count:
            return None
        null_count += statistics.null_count
        if statistics.null_count == group.num_rows:
            continue  # only nulls: no bounds to widen
        if not statistics.has_min_max:
            return None
        low = statistics.min if low is None else min(low, statistics.min)
        high = statistics.max if high is None else max(high, statistics.max)
    return null_count, None if low is None else (low, high)


def _json_value(value: Any) -> Any:
    """A bound as Delta writes it: an integer as a number, a date as `YYYY-MM-DD`."""
    return value.isoformat() if isinstance(value, dt.date) else int(value)
