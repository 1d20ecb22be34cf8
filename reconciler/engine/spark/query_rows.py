"""Rows that come back to Python (a query's, a preview's samples, a failed expectation's
keys), each value one Python can hold.

Python's `date` and `datetime` hold years 1 to 9999, Spark's from -290308 to +294247, and a
value outside Python's reach would stop the command with a ValueError as the row is
converted. Such a value comes as Spark's own text instead (`+12345-01-01`): no value stops
a command. `reconcile query` keeps Python's values where they fit (`python_rows`: its JSON
prints dates and times in ISO 8601); a few rows shown in a message or a plan take Spark's
text for every type but numbers, strings and booleans (`text_safe_columns`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reconciler.engine.spark.schema import quoted

AS_PYTHON_READS = (T.NumericType, T.StringType, T.BooleanType)
"""Types whose values come back to Python as they are, whatever the value."""


def text_safe_columns(frame: DataFrame, names: list[str], prefix: str = "") -> list[Column]:
    """`names` of `frame` (under alias `prefix`) to collect a few rows of: a column of
    `AS_PYTHON_READS` as it is, any other (a date, a timestamp, an array of them) as
    Spark's text, which every value has."""
    types = {field.name.lower(): field.dataType for field in frame.schema.fields}
    return [F.col(prefix + quoted(name)) if isinstance(types.get(name.lower()), AS_PYTHON_READS)
            else F.col(prefix + quoted(name)).cast("string").alias(name) for name in names]

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
