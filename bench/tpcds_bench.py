"""TPC-DS through the reconciler: which of the queries given are maintained, each equal to
its query after steps that insert and delete, and what a refresh costs (issue 80).

The data is TPC-DS's own, from Trino's Java port of its generator `dsdgen`
(`io.trino.tpcds:tpcds` on Maven Central, fetched by `mvn` into the project's jar cache as
Delta's jars are), at `--scale` (0.1 by default), read into Parquet with the column types
of `bench/tpcds/tables.sql` (pyarrow, bench data preparation: no Spark). The seven fact
tables (the three sales, the three returns and inventory) are split by row order into
`--parts` slices (100: 1% each); everything else is one file per table.

The views are the `q*.sql` files of `--queries`, such as Apache Spark's TPC-DS texts
(`sql/core/src/test/resources/tpcds/` and `tpcds-v2.7.0/` of its repository, which this
repository does not copy), with their top-level ORDER BY and LIMIT dropped; a query the
reconciler refuses is set aside and its one-line reason printed. Then
`bench/tpch_bench.py`'s steps run, once per `--refresh` mode: the load (every slice but
the last `--steps`, then the views computed), and per step RF1 (one held-back slice of
each fact table arrives, 1% more) and RF2 (one loaded slice of each is deleted, through
`changes: true` connectors), every view compared with its query from scratch after each
step. Each step is the engine's `run_step` in the bench's one warm JVM, as the continuous
runner pays a step: its ingest of the new files included, no process start (a one-shot
`reconcile run` adds the JVM's start, `bench/micro_batch_bench.py`). Printed: how each
view is refreshed, its time and bytes per step beside
`refresh: full`'s, the refresh phase against recomputing every view (goal at most 0.5x),
the maintained views whose refresh was slower than their own recompute, and `auto`
against the faster of the two.

Usage: `python bench/tpcds_bench.py --queries DIR [--scale 0.1] [--parts 100]
[--steps 1] [--refresh incremental full auto] [--only q3 q7 ...]`. The data is generated once
per scale and parts under `--work` (default `/tmp/tpcds-bench`).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.tpch_bench import (  # noqa: E402 (after the path is set up)
    Workload,
    natural,
    run_modes,
    step_arguments,
)

TABLES_SQL = ROOT / "bench" / "tpcds" / "tables.sql"
FACTS = ("store_sales", "store_returns", "catalog_sales", "catalog_returns", "web_sales",
         "web_returns", "inventory")
DSDGEN = ("io.trino.tpcds", "tpcds", "1.4")
AIRLINE = ("io.airlift", "airline", "0.9")
"""The generator and the command-line parser its `Driver` needs (an optional dependency)."""


def columns() -> dict[str, list[tuple[str, Any]]]:
    """Each table's columns and their Arrow types, from `bench/tpcds/tables.sql`."""
    import pyarrow as pa
    import sqlglot
    from sqlglot import exp

    simple = {exp.DataType.Type.INT: pa.int32(), exp.DataType.Type.BIGINT: pa.int64(),
              exp.DataType.Type.DATE: pa.date32(), exp.DataType.Type.TEXT: pa.string(),
              exp.DataType.Type.VARCHAR: pa.string(), exp.DataType.Type.CHAR: pa.string(),
              exp.DataType.Type.DOUBLE: pa.float64()}
    tables = {}
    for create in sqlglot.parse(TABLES_SQL.read_text(), read="spark"):
        assert isinstance(create, exp.Create), create
        schema = create.this
        found = []
        for column in schema.expressions:
            kind = column.args["kind"]
            if kind.this == exp.DataType.Type.DECIMAL:
                precision, scale = (int(e.name) for e in kind.expressions)
                found.append((column.name, pa.decimal128(precision, scale)))
            else:
                found.append((column.name, simple[kind.this]))
        tables[schema.this.name] = found
    return tables


def generate(work: Path, scale: float, parts: int,
             schema: dict[str, list[tuple[str, Any]]]) -> Path:
    """The generated Parquet files (once per scale and parts): `<table>.parquet`, and
    `<table>/<table>.<i>.parquet` (i from 1) for the fact tables."""
    import pyarrow.csv as csv
    import pyarrow.parquet as pq

    from reconciler.engine.spark.jars import Artifact, JarSet, fetch

    data = work / f"sf{scale:g}-p{parts}"
    if (data / "done").exists():
        return data
    raw = work / f"sf{scale:g}-raw"
    if not (raw / "done").exists():
        jars = fetch(JarSet(f"tpcds-{DSDGEN[2]}", tuple(
            Artifact(*coordinates, transitive=True) for coordinates in (DSDGEN, AIRLINE))))
        raw.mkdir(parents=True, exist_ok=True)
        subprocess.run(["java", "-cp", ":".join(map(str, jars)), "io.trino.tpcds.Driver",
                        "--scale", f"{scale:g}", "--directory", str(raw), "--overwrite",
                        "--do-not-terminate"], check=True, stdout=subprocess.DEVNULL)
        (raw / "done").touch()
    data.mkdir(parents=True, exist_ok=True)
    for table, found in schema.items():
        names = [name for name, _ in found]
        rows = csv.read_csv(
            raw / f"{table}.dat",
            read_options=csv.ReadOptions(column_names=names, encoding="latin1"),  # as dsdgen writes
            parse_options=csv.ParseOptions(delimiter="|", quote_char=False),
            convert_options=csv.ConvertOptions(column_types=dict(found), null_values=[""],
                                               strings_can_be_null=True))
        if table not in FACTS:
            pq.write_table(rows, data / f"{table}.parquet")
            continue
        (data / table).mkdir(exist_ok=True)
        size = -(-rows.num_rows // parts)
        for part in range(parts):
            pq.write_table(rows.slice(part * size, size),
                           data / table / f"{table}.{part + 1}.parquet")
    (data / "done").touch()
    return data


def without_order(query: str) -> str:
    """`query` without its top-level ORDER BY and LIMIT: a view holds every row."""
    import sqlglot

    tree = sqlglot.parse_one(query.strip().rstrip(";"), read="spark")
    tree.set("order", None)
    tree.set("limit", None)
    return tree.sql(dialect="spark", pretty=True)


def views_accepted(folder: Path, queries: Path, only: list[str] | None) -> None:
    """`folder`'s `tables.sql` and `views.sql`: each query of `queries` as a view, those the
    reconciler refuses (validate's first error, naming a line of views.sql) set aside."""
    from reconciler.support.errors import ReconcileError
    from tests.projects import program_of

    texts = {path.stem: without_order(path.read_text())
             for path in sorted(queries.glob("q*.sql"), key=lambda path: natural(path.stem))
             if not only or path.stem in only}
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(TABLES_SQL, folder / "tables.sql")
    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch)
        pipeline = project / "pipelines" / "tpcds"
        pipeline.mkdir(parents=True)
        (pipeline / "pipeline.yaml").write_text(
            "name: tpcds\nsql: [tables.sql, views.sql]\n")
        shutil.copy(TABLES_SQL, pipeline / "tables.sql")
        while True:
            lines: dict[str, range] = {}
            blocks: list[str] = []
            start = 1
            for name, text in texts.items():
                blocks.append(f"CREATE MATERIALIZED VIEW {name} AS\n{text};\n\n")
                lines[name] = range(start, start + blocks[-1].count("\n"))
                start = lines[name].stop
            (pipeline / "views.sql").write_text("".join(blocks))
            try:
                program_of(project)
                break
            except ReconcileError as error:
                at = re.search(r"views\.sql:(\d+)", str(error))
                named = [name for name, span in lines.items() if at and int(at[1]) in span]
                if not named:
                    raise
                print(f"set aside: {named[0]}: {error}", flush=True)
                del texts[named[0]]
        shutil.copy(pipeline / "views.sql", folder / "views.sql")
    print(f"{len(texts)} queries as views", flush=True)


def refresh_reasons(sql: Path) -> None:
    """Print how many views `validate` says are maintained, and each recomputed one's reason
    with a count per reason (no Spark: `validate` starts no JVM)."""
    from click.testing import CliRunner

    from reconciler.cli.main import cli

    with tempfile.TemporaryDirectory() as scratch:
        pipeline = Path(scratch) / "pipelines" / "tpcds"
        pipeline.mkdir(parents=True)
        (pipeline / "pipeline.yaml").write_text(
            "name: tpcds\nrefresh: auto\nsql: [tables.sql, views.sql]\n")
        for name in ("tables.sql", "views.sql"):
            shutil.copy(sql / name, pipeline / name)
        said = CliRunner().invoke(cli, ["-C", scratch, "validate", "--json"])
    [summary] = json.loads(said.stdout)["pipelines"]
    views = {name: how for name, how in summary["refresh"].items() if "part of view" not in how}
    recomputed = {name: how for name, how in views.items() if how.startswith("recomputed")}
    print(f"{len(views)} views: {len(views) - len(recomputed)} maintained, "
          f"{len(recomputed)} recomputed each step")
    reasons: dict[str, list[str]] = {}
    for name, how in recomputed.items():
        reasons.setdefault(how.removeprefix("recomputed each step: "), []).append(name)
    for reason, names in sorted(reasons.items(), key=lambda item: -len(item[1])):
        print(f"  {len(names)}  {reason}: {', '.join(names)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=Path, required=True,
                        help="a folder of q*.sql TPC-DS query texts")
    parser.add_argument("--only", nargs="+", help="these queries alone (names of files)")
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--parts", type=int, default=100)
    parser.add_argument("--reasons", action="store_true",
                        help="only print validate's maintained and recomputed views, with "
                             "each recomputed one's reason (no data, no Spark)")
    step_arguments(parser, steps=1, work="/tmp/tpcds-bench")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.reasons:
        sql = Path(tempfile.mkdtemp(prefix="sql-", dir=args.work))
        views_accepted(sql, args.queries, args.only)
        refresh_reasons(sql)
        return
    schema = columns()
    data = generate(args.work, args.scale, args.parts, schema)
    sql = Path(tempfile.mkdtemp(prefix="sql-", dir=args.work))
    views_accepted(sql, args.queries, args.only)
    run_modes(args, data, Workload("tpcds", (*FACTS, *(
        table for table in schema if table not in FACTS)), FACTS, sql, goal=0.5))


if __name__ == "__main__":
    main()
