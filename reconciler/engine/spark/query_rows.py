"""A query's rows for printing, a partition at a time, each value as Python reads it.

`reconcile query` prints what Spark returns; Python's `date` and `datetime` hold years 1 to
9999, Spark's from -290308 to +294247, and a value outside Python's reach would stop the
command with a ValueError as the row is converted. Such a value comes as Spark's own text
instead (`+12345-01-01`): no value stops the command.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

PYTHON_RANGES = {"date": ("DATE'0001-01-01'", "DATE'9999-12-31'"),
                 "timestamp": ("TIMESTAMP'0001-01-02 00:00:00'",
                               "TIMESTAMP'9999-12-30 23:59:59.999999'"),
                 "timestamp_ntz": ("TIMESTAMP_NTZ'0001-01-01 00:00:00'",
                                   "TIMESTAMP_NTZ'9999-12-31 23:59:59.999999'")}
"""The dates and times Python's `date` and `datetime` hold, by Spark type (a timestamp is
shown in the local time zone: a day's margin)."""


def python_rows(frame: DataFrame) -> Iterator[tuple[Any, ...]]:
    """`frame`'s rows, a partition at a time, each value as Python reads it, except a date
    or time outside `PYTHON_RANGES`, which comes as Spark's text."""
    names = [f"c{index}" for index in range(len(frame.columns))]
    positional = frame.toDF(*names)  # two columns may share a name
    selected, texts = [], set()
    for name, field in zip(names, frame.schema.fields, strict=True):
        bounds = PYTHON_RANGES.get(field.dataType.typeName())
        if bounds is None:
            selected.append(F.col(name))
            continue
        fits = F.col(name).between(F.expr(bounds[0]), F.expr(bounds[1]))
        selected += [F.when(fits, F.col(name)).alias(name),
                     F.when(~fits, F.col(name).cast("string")).alias(f"t{name}")]
        texts.add(name)
    for row in positional.select(*selected).toLocalIterator():  # one partition at a time
        yield tuple(row[f"t{name}"] if name in texts and row[name] is None else row[name]
                    for name in names)
