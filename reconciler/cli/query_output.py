"""Printing a query's rows as a table, JSON or CSV, one row at a time.

`reconcile query` streams its result (Spark hands it over a partition at a time),
so nothing here holds more than one row; `--format json` prints a JSON array of
row objects, with decimals as strings (exact) and dates and times in ISO 8601. A date or
time Python cannot hold (Spark's reach from year -290308 to +294247, Python's from 1 to
9999) is printed as Spark writes it (`+12345-01-01`, `engine.spark.query_rows`): no value
stops the command.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console


def print_rows(columns: Sequence[str], rows: Iterable[Sequence[Any]], output_format: str,
               console: Callable[[], Console]) -> None:
    """`rows` as `output_format` on stdout; rich (`console`, made only then) draws a table."""
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
        from rich.table import Table

        table = Table(*columns)
        for record in records:
            table.add_row(*("" if record[c] is None else str(record[c]) for c in columns))
        console().print(table)


def _plain(value: Any) -> Any:
    """JSON-friendly values: decimals as strings (exact), dates and times in ISO 8601."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    return value
