"""Delta's per-file statistics of a Parquet file the engine commits, from its footer.

Delta's readers skip a file whose `minValues`/`maxValues` exclude a filter (a MERGE bounded
by the deleted keys among them), so a file committed with only its row count is read by
every bounded scan. Spark's Parquet writer keeps min, max and null count per row group in
the footer, which the commit reads anyway for the row count: this turns them into Delta's
`stats` JSON. Only top-level signed integer and date columns are described, whose footer
values are exact and whose JSON form is unambiguous; other columns are left out, and Delta
then reads the file for a filter on them (it never skips on a missing statistic).

No row value can fail a commit here (issue 78): bounds come from the footer's physical
values (integers; days since 1970-01-01 for a date), never through Python's `date`, which
ends at year 9999 where Spark's dates do not. A bound Delta could not read back (a date
outside 0001-01-01..9999-12-31, which Delta writes and parses as `yyyy-MM-dd`) leaves that
column's bounds out, and so does anything unexpected in a column's footer: the column is
then read by every filter on it, which is slower, never wrong.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

_EPOCH = dt.date(1970, 1, 1)
DATE_DAYS = ((dt.date(1, 1, 1) - _EPOCH).days, (dt.date(9999, 12, 31) - _EPOCH).days)
"""The dates Delta's statistics can hold, as days since the epoch: 0001-01-01..9999-12-31,
what Delta's `yyyy-MM-dd` writes and parses back."""
GREGORIAN_DAYS = (dt.date(1582, 10, 15) - _EPOCH).days
"""The first day Spark's LEGACY rebase leaves as it is: a file written with
`datetimeRebaseModeInWrite=LEGACY` holds earlier dates as Julian days, not the row's."""
_LEGACY_DATES = b"org.apache.spark.legacyDateTime"
"""The footer key Spark writes when it rebased dates (LEGACY mode)."""

_INTEGER_BITS = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}
"""The integer types described: Spark's byte, short, int and long. Unsigned Parquet
integers (Delta has no such type, Spark writes none) are left out."""


def delta_stats(metadata: pq.FileMetaData) -> str:
    """The `stats` of an add action for the file whose footer is `metadata`."""
    stats: dict[str, Any] = {"numRecords": metadata.num_rows}
    minimums: dict[str, Any] = {}
    maximums: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    try:
        leaves = _leaf_indexes(metadata)
        legacy_dates = _LEGACY_DATES in (metadata.metadata or {})
        fields = list(metadata.schema.to_arrow_schema())
    except Exception:  # a schema pyarrow cannot map: the row count alone
        return json.dumps(stats)
    for field in fields:
        index = leaves.get(field.name)
        if index is None:
            continue
        try:
            described = _described(metadata, index, field.type, legacy_dates)
        except Exception:  # a footer we cannot read: the column is left out
            continue
        if described is None:
            continue
        null_count, bounds = described
        nulls[field.name] = null_count
        if bounds is not None:
            minimums[field.name], maximums[field.name] = bounds
    if nulls:
        stats |= {"minValues": minimums, "maxValues": maximums, "nullCount": nulls}
    return json.dumps(stats)


def _leaf_indexes(metadata: pq.FileMetaData) -> dict[str, int]:
    """Column chunk index of each top-level primitive column, by name. A leaf is top-level
    when its path is its own name: a struct `a`'s field `b` has the path `a.b` too, as a
    top-level column named `a.b` has, but its name is `b`."""
    schema = metadata.schema
    indexes: dict[str, int] = {}
    for index in range(len(schema)):
        column = schema.column(index)
        if column.path == column.name and column.max_repetition_level == 0:
            indexes[column.name] = index
    return indexes


def _described(metadata: pq.FileMetaData, index: int, kind: pa.DataType, legacy_dates: bool
               ) -> tuple[int, tuple[Any, Any] | None] | None:
    """(null count, (min, max) as Delta's JSON or None) of one column of a described type;
    None when it is of no such type or a row group's footer lacks what would make it exact."""
    if pa.types.is_date32(kind):
        low_days, high_days = DATE_DAYS
        if legacy_dates:
            low_days = max(low_days, GREGORIAN_DAYS)
        described = _column_stats(metadata, index, "INT32")
        if described is None or described[1] is None:
            return described
        low, high = described[1]
        if not low_days <= low <= high <= high_days:
            return described[0], None  # no bound Delta can read: the null count stays
        return described[0], (_date(low), _date(high))
    bits = _INTEGER_BITS.get(kind)
    if bits is None:
        return None
    described = _column_stats(metadata, index, "INT64" if bits == 64 else "INT32")
    if described is None or described[1] is None:
        return described
    low, high = described[1]
    if not -(2 ** (bits - 1)) <= low <= high < 2 ** (bits - 1):
        return described[0], None
    return described[0], (low, high)


def _column_stats(metadata: pq.FileMetaData, index: int, physical: str
                  ) -> tuple[int, tuple[int, int] | None] | None:
    """(null count, (min, max) of the physical values or None when every value is null) of
    one column over the row groups; None when a row group's footer lacks what would make it
    exact or stores the column other than as `physical` integers."""
    null_count, low, high = 0, None, None
    for group_index in range(metadata.num_row_groups):
        group = metadata.row_group(group_index)
        statistics = group.column(index).statistics
        if statistics is None or not statistics.has_null_count:
            return None
        if statistics.physical_type != physical:
            return None
        null_count += statistics.null_count
        if statistics.null_count == group.num_rows:
            continue  # only nulls: no bounds to widen
        if not statistics.has_min_max:
            return None
        group_low, group_high = statistics.min_raw, statistics.max_raw
        if not isinstance(group_low, int) or not isinstance(group_high, int):
            return None
        low = group_low if low is None else min(low, group_low)
        high = group_high if high is None else max(high, group_high)
    return null_count, None if low is None or high is None else (low, high)


def _date(days: int) -> str:
    """A date of 0001-01-01..9999-12-31, given as days since the epoch, as Delta writes it."""
    return (_EPOCH + dt.timedelta(days=days)).isoformat()
