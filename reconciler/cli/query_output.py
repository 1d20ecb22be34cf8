"""Printing a query's rows as a table, JSON or CSV, one row at a time.

`reconcile query` streams its result (Spark hands it over a partition at a time),
so nothing here holds more than one row; `--format json` prints a JSON array of
row objects, with decimals as strings (exact) and dates and times in ISO 8601. A date or
time Python cannot hold (Spark's reach from year -290308 to +294247, Python's from 1 to
9999) is printed as Spark writes it (`+12345-01-01`): no value stops the command.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

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
    from pyspark.sql import functions as F

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


def print_rows(columns: Sequence[str], rows: Iterable[Sequence[Any]], output_format: str,
               console: Console) -> None:
    records = ({name: _plain(value) for name, value in zip(columns, row, strict=True)}
               for row in rows)
    if output_format == "json":
        click.echo("[")
        for position, record in enumerate(records):
            click.echo(("," if position else "") + json.dumps(record))
        click.echo("]")
    elif output_format == "csv":
        writer = csv.DictWriter(sys.stdout, fieldnames=list(columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
    else:
        table = Table(*columns)
        for record in records:
            table.add_row(*("" if record[c] is None else str(record[c]) for c in columns))
        console.print(table)


def _plain(value: Any) -> Any:
    """JSON-friendly values: decimals as strings (exact), dates and times in ISO 8601."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    return value
