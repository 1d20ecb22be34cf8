"""Whether a modified table can evolve in place, and how (pure: no Spark).

Feldera empties a table on any column change: its connectors re-read the
source, and rows that came from elsewhere (our `execute` inserts) are lost. A
Delta table holds its rows itself, so most column changes keep them:

- a column added after the kept ones, nullable or with a `DEFAULT`: a
  metadata-only commit when nullable (old rows read NULL); with a default, the
  rows are rewritten with it (Delta has no "existing rows' default");
- a widening type change (`INT` -> `BIGINT`, `FLOAT` -> `DOUBLE`,
  `DECIMAL(p,s)` -> `DECIMAL(p',s')` keeping every digit, ...): rewritten with a
  cast, which cannot fail or lose a value;
- a dropped column, or `NOT NULL` dropped: rows kept, rewritten (or, on Delta's
  writer, changed in the log alone: `engine.bootstrap.evolution`);
- a column's `DEFAULT` changed: nothing is written (it applies to rows written
  from then on).

Everything else (narrowing, reordering, `NOT NULL` added, a new `NOT NULL`
column without a default, a primary key or `materialized` change) cannot keep
the rows meaningfully: the table is truncated and its connectors re-ingest, as
before, and `reason` says why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_INTEGRAL_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 19}
_INTEGRAL_ORDER = list(_INTEGRAL_DIGITS)
_DECIMAL = re.compile(r"DECIMAL(?:\((\d+),(\d+)\)|\((\d+)\))?")
_VARCHAR = re.compile(r"VARCHAR\((\d+)\)")


@dataclass(frozen=True)
class Evolution:
    """How a table's rows are carried from its old columns to its new ones."""

    added: tuple[dict[str, Any], ...] = ()
    dropped: tuple[str, ...] = ()
    widened: dict[str, tuple[str, str]] = field(default_factory=dict)
    relaxed: tuple[str, ...] = ()
    defaults: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    reason: str | None = None  # set when the table cannot evolve: why it is truncated

    @property
    def possible(self) -> bool:
        return self.reason is None

    @property
    def metadata_only(self) -> bool:
        """Only nullable columns without a default are added: no data file changes."""
        return (not self.dropped and not self.widened and not self.relaxed
                and all(column.get("default") is None for column in self.added))

    def describe(self) -> list[str]:
        """The plan's reasons, one per column change."""
        reasons = [f"column {column['name']} added: {column['type']}"
                   + (f" DEFAULT {column['default']}" if column.get("default") is not None
                      else "") for column in self.added]
        reasons += [f"column {name} removed" for name in self.dropped]
        reasons += [f"column {name}: {old} -> {new}" for name, (old, new) in
                    self.widened.items()]
        reasons += [f"column {name}: NOT NULL dropped" for name in self.relaxed]
        reasons += [f"column {name}: DEFAULT {old or 'none'} -> {new or 'none'} (for rows "
                    "written from now on)" for name, (old, new) in self.defaults.items()]
        return reasons


def evolution(old: dict[str, Any], new: dict[str, Any]) -> Evolution:
    """How table document `old` becomes `new` keeping its rows, or why it cannot."""
    if old["primary_key"] != new["primary_key"]:
        return Evolution(reason="the primary key changes")
    if old["materialized"] != new["materialized"]:
        return Evolution(reason="'materialized' changes")
    old_columns = {column["name"]: column for column in old["columns"]}
    new_names = [column["name"] for column in new["columns"]]
    kept = [name for name in old_columns if name in new_names]
    if new_names[:len(kept)] != kept:
        return Evolution(reason="columns are reordered or added before existing ones")
    added = tuple(new["columns"][len(kept):])
    for column in added:
        if not column["nullable"] and column.get("default") is None:
            return Evolution(reason=f"new column {column['name']} is NOT NULL without a "
                                    "DEFAULT")
    widened: dict[str, tuple[str, str]] = {}
    relaxed: list[str] = []
    defaults: dict[str, tuple[str | None, str | None]] = {}
    for column in new["columns"][:len(kept)]:
        before = old_columns[column["name"]]
        if before.get("default") != column.get("default"):
            defaults[column["name"]] = (before.get("default"), column.get("default"))
        if before["type"] != column["type"]:
            if not widens(before["type"], column["type"]):
                return Evolution(reason=f"column {column['name']}: {before['type']} -> "
                                        f"{column['type']} is not a widening")
            widened[column["name"]] = (before["type"], column["type"])
        if before["nullable"] and not column["nullable"]:
            return Evolution(reason=f"column {column['name']}: NOT NULL added")
        if not before["nullable"] and column["nullable"]:
            relaxed.append(column["name"])
    dropped = tuple(name for name in old_columns if name not in new_names)
    return Evolution(added=added, dropped=dropped, widened=widened, relaxed=tuple(relaxed),
                     defaults=defaults)


def widens(old: str, new: str) -> bool:
    """Whether every value of type `old` is exactly a value of type `new`."""
    if old in _INTEGRAL_DIGITS:
        if new in _INTEGRAL_DIGITS:
            return _INTEGRAL_ORDER.index(new) > _INTEGRAL_ORDER.index(old)
        if new == "DOUBLE":
            return old != "BIGINT"  # a double holds 53 bits exactly
        decimal = _decimal(new)
        return decimal is not None and decimal[0] - decimal[1] >= _INTEGRAL_DIGITS[old]
    if old == "FLOAT":
        return new == "DOUBLE"
    if old == "DATE":
        return new == "TIMESTAMP_NTZ"
    before, after = _decimal(old), _decimal(new)
    if before is not None and after is not None:
        return (after != before and after[1] >= before[1]
                and after[0] - after[1] >= before[0] - before[1])
    if old.startswith("VARCHAR(") or old.startswith("CHAR("):
        length = _VARCHAR.fullmatch(new)
        old_length = int(old[old.index("(") + 1:-1])
        return new == "STRING" or (length is not None and int(length.group(1)) > old_length)
    return False


def _decimal(type_text: str) -> tuple[int, int] | None:
    """(precision, scale) of a DECIMAL type string; Spark's default is (10, 0)."""
    match = _DECIMAL.fullmatch(type_text)
    if match is None:
        return None
    if match.group(1):
        return int(match.group(1)), int(match.group(2))
    if match.group(3):
        return int(match.group(3)), 0
    return 10, 0
