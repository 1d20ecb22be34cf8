"""Breadth: a corpus of analytic views, each checked against its query from scratch.

`bench/breadth/views.sql` holds analytic queries of the kind a data engineer writes over
a retail star schema (`bench/breadth/tables.sql`): CTE-heavy reports, year-over-year
comparisons by self-joins of CTEs, rankings per partition and other window functions,
set operations (also inside subqueries and CTEs), rollups, cubes and grouping sets,
COUNT(DISTINCT), STDDEV/VARIANCE, MIN/MAX, EXISTS/IN, outer joins, nested derived
tables, views over views.

Random rows for every table are generated with a fixed seed (Python, written as Parquet
with pyarrow; a few thousand rows per fact table). A project under `--work` feeds each
table through a `files` connector, and each table but `date_dim` also through a
`changes: true` connector (rows with `_op` = insert or delete). Through the real CLI
(`reconcile plan --json`, `apply --auto-approve`, `run`, in this process so Spark is
started once):

* apply deploys the pipeline (tables and views, empty);
* the initial load (a run): every table's rows arrive;
* step 1 (a run): new rows in the three sales channels, returns and inventory, and
  deletions of old ones (`_op` = delete), inventory levels updated (a delete and an
  insert of the same key);
* step 2: the dimensions change too (items, customers, a store, a warehouse, promotions
  updated; new ones; a few deleted), with new and deleted facts (`--steps` more: odd
  steps change facts, even ones dimensions too).

After each run every view's stored contents are compared, through Spark (EXCEPT ALL both
ways), with its query run from scratch over the same committed versions of its inputs
(`tests/comparison.py`, as `bench/tpch_bench.py` does). Printed: each view's refresh
mode as the plan gives it (maintained, or recomputed and why), how many are maintained,
the fallback reasons counted, and whether every view equals its query after the load and
after every step; the views that differ are named (with a few rows each way) and the
exit code is 1.

Usage: `python bench/breadth_bench.py [--seed 7] [--steps 2] [--views REGEX]
[--work /tmp/breadth-bench]` (`make bench-breadth`). Each run makes a new project folder
under `--work`; `--views` keeps only the matching views (and those they read).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import json
import random
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PIPELINE = "breadth"
SQL = ROOT / "bench" / "breadth"

# Each table's columns as (name, pyarrow type name), in tables.sql order; keys first.
COLUMNS: dict[str, list[tuple[str, str]]] = {}
KEYS: dict[str, tuple[str, ...]] = {}

TYPES = {"INT": "int32", "STRING": "string", "DATE": "date32"}


def read_tables() -> None:
    """COLUMNS and KEYS from `tables.sql` (read with sqlglot, as the reconciler does)."""
    import sqlglot
    from sqlglot import exp

    for statement in sqlglot.parse((SQL / "tables.sql").read_text(), dialect="spark"):
        assert statement is not None  # the file holds no empty statement
        schema = statement.this
        name = schema.this.name
        COLUMNS[name] = []
        for item in schema.expressions:
            if isinstance(item, exp.ColumnDef):
                COLUMNS[name].append((item.name, item.args["kind"].sql(dialect="spark")))
            elif isinstance(item, exp.PrimaryKey):
                KEYS[name] = tuple(part.name for part in item.expressions)


def arrow_type(sql_type: str) -> Any:
    import pyarrow as pa

    if sql_type.startswith("DECIMAL"):
        precision, scale = map(int, re.findall(r"\d+", sql_type))
        return pa.decimal128(precision, scale)
    return getattr(pa, TYPES[sql_type])()


def write_rows(path: Path, table: str, rows: list[dict[str, Any]], ops: list[str] | None = None
               ) -> None:
    """`rows` of `table` as one Parquet file with the table's exact column types (and `_op`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields = [pa.field(name, arrow_type(sql_type)) for name, sql_type in COLUMNS[table]]
    columns = {f.name: pa.array([row[f.name] for row in rows], f.type) for f in fields}
    if ops is not None:
        fields.append(pa.field("_op", pa.string()))
        columns["_op"] = pa.array(ops, pa.string())
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns, schema=pa.schema(fields)), path)


# ---------------------------------------------------------------------------------------
# Random data
# ---------------------------------------------------------------------------------------

FIRST_DAY, DAYS = dt.date(2021, 1, 1), 1095  # 2021-01-01 .. 2023-12-31
CATEGORIES = ("Books", "Electronics", "Home", "Sports", "Music", "Women", "Men", "Children")
STATES = ("CA", "TX", "NY", "WA", "GA", "IL", "OH", "FL")
CITIES = ("Midway", "Fairview", "Oakland", "Riverside", "Springfield", "Salem")
NAMES = ("Smith", "Jones", "Garcia", "Brown", "Miller", "Davis", "Lopez", "Wilson", "Moore",
         "Taylor", "Clark", "Lewis", "Young", "Hall", "King", "Wright")
REASONS = ("damaged", "wrong size", "not as described", "late delivery", "gift", "other")
CHANNELS = {  # table: (prefix, order column, customer column, place column, place table)
    "store_sales": ("ss", "ss_ticket_number", "ss_customer_sk", "ss_store_sk", "store"),
    "catalog_sales": ("cs", "cs_order_number", "cs_bill_customer_sk", "cs_warehouse_sk",
                      "warehouse"),
    "web_sales": ("ws", "ws_order_number", "ws_bill_customer_sk", "ws_warehouse_sk",
                  "warehouse"),
}


def money(value: float) -> Decimal:
    return Decimal(f"{value:.2f}")


@dataclass
class Change:
    """One step's input: rows appended through each table's plain connector, and rows with
    `_op` through its changes connector."""

    inserts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    changes: dict[str, list[tuple[str, dict[str, Any]]]] = field(default_factory=dict)

    def rows(self) -> dict[str, tuple[int, int]]:
        """Per table: rows inserted, rows deleted."""
        counts: dict[str, list[int]] = {}
        for table, rows in self.inserts.items():
            counts.setdefault(table, [0, 0])[0] += len(rows)
        for table, marked in self.changes.items():
            for op, _ in marked:
                counts.setdefault(table, [0, 0])[op == "delete"] += 1
        return {table: (inserted, deleted) for table, (inserted, deleted) in counts.items()}


class Generator:
    """Random rows with a fixed seed; keeps the tables' current contents, so a step deletes
    only rows that are held (and each once) and new rows take fresh keys."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.held: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
        self.next_order = {table: 1 for table in CHANNELS}

    def key(self, table: str, row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(row[column] for column in KEYS[table])

    def add(self, change: Change, table: str, row: dict[str, Any], marked: bool = False) -> None:
        key = self.key(table, row)
        assert key not in self.held[table], (table, key)
        self.held[table][key] = row
        if marked:
            change.changes.setdefault(table, []).append(("insert", row))
        else:
            change.inserts.setdefault(table, []).append(row)

    def delete(self, change: Change, table: str, row: dict[str, Any]) -> None:
        del self.held[table][self.key(table, row)]
        change.changes.setdefault(table, []).append(("delete", row))

    def update(self, change: Change, table: str, row: dict[str, Any], **values: Any) -> None:
        """A delete of the row as held and an insert of it with `values`, one changes file."""
        self.delete(change, table, row)
        self.add(change, table, {**row, **values}, marked=True)

    def pick(self, table: str, count: int, where: Any = None) -> list[dict[str, Any]]:
        rows = [row for row in self.held[table].values() if where is None or where(row)]
        return self.rng.sample(rows, min(count, len(rows)))

    # Dimensions ----------------------------------------------------------------------

    def item(self, sk: int) -> dict[str, Any]:
        rng = self.rng
        category = rng.choice(CATEGORIES)
        return {"i_item_sk": sk, "i_item_id": f"ITEM{sk:06d}",
                "i_brand": f"brand#{rng.randint(1, 25)}",
                "i_class": f"{category.lower()}-{rng.randint(1, 3)}", "i_category": category,
                "i_manufact_id": rng.randint(1, 30),
                "i_current_price": money(rng.uniform(1, 200))}

    def customer(self, sk: int) -> dict[str, Any]:
        rng = self.rng
        return {"c_customer_sk": sk, "c_customer_id": f"CUST{sk:08d}",
                "c_first_name": rng.choice(("Ann", "Bob", "Cy", "Dee", "Eve", "Fay", "Gus")),
                "c_last_name": rng.choice(NAMES), "c_birth_year": rng.randint(1940, 2002),
                "c_state": rng.choice(STATES),
                "c_preferred_flag": rng.choices(("Y", "N", None), (4, 5, 1))[0]}

    def store(self, sk: int) -> dict[str, Any]:
        rng = self.rng
        return {"s_store_sk": sk, "s_store_name": f"store-{sk}", "s_city": rng.choice(CITIES),
                "s_state": rng.choice(STATES[:6]), "s_market_id": rng.randint(1, 4),
                "s_floor_space": rng.randint(5000, 20000)}

    def dimensions(self, change: Change) -> None:
        rng = self.rng
        for table in COLUMNS:
            self.held[table] = {}
        for offset in range(DAYS):
            day = FIRST_DAY + dt.timedelta(days=offset)
            self.add(change, "date_dim", {
                "d_date_sk": offset + 1, "d_date": day, "d_year": day.year,
                "d_qoy": (day.month - 1) // 3 + 1, "d_moy": day.month, "d_dom": day.day,
                "d_dow": day.isoweekday() % 7,  # 0 = Sunday
                "d_week_seq": (day - dt.date(2020, 12, 27)).days // 7 + 1})
        for sk in range(1, 201):
            self.add(change, "item", self.item(sk))
        for sk in range(1, 501):
            self.add(change, "customer", self.customer(sk))
        for sk in range(1, 11):
            self.add(change, "store", self.store(sk))
        for sk in range(1, 6):
            self.add(change, "warehouse", {
                "w_warehouse_sk": sk, "w_warehouse_name": f"warehouse-{sk}",
                "w_state": rng.choice(STATES), "w_sq_ft": rng.randint(50_000, 500_000)})
        for sk in range(1, 25):  # 21-24 are never used
            self.add(change, "promotion", {
                "p_promo_sk": sk, "p_promo_name": f"promo-{sk}",
                "p_channel_email": rng.choice("YN"), "p_channel_tv": rng.choice("YN"),
                "p_cost": money(rng.uniform(100, 5000))})

    # Facts ---------------------------------------------------------------------------

    def orders(self, change: Change, table: str, count: int, days: tuple[int, int]) -> None:
        """`count` new orders (tickets) of 1-4 lines each, sold on days in `days`."""
        rng = self.rng
        prefix, order_column, customer_column, place_column, place_table = CHANNELS[table]
        items = [row["i_item_sk"] for row in self.held["item"].values()]
        customers = [row["c_customer_sk"] for row in self.held["customer"].values()]
        places = [key[0] for key in self.held[place_table]]
        promotions = [key[0] for key in self.held["promotion"] if key[0] <= 20]
        prices = {row["i_item_sk"]: float(row["i_current_price"])
                  for row in self.held["item"].values()}
        for _ in range(count):
            order = self.next_order[table]
            self.next_order[table] += 1
            day = rng.randint(*days)
            customer = None if rng.random() < 0.04 else rng.choice(customers)
            place = rng.choice(places)
            for item in rng.sample(items, rng.randint(1, 4)):
                quantity = rng.randint(1, 100)
                price = money(prices[item] * rng.uniform(0.3, 1.0))
                extended = price * quantity
                wholesale = money(prices[item] * rng.uniform(0.2, 0.9))
                self.add(change, table, {
                    f"{prefix}_item_sk": item, order_column: order,
                    f"{prefix}_sold_date_sk": day, customer_column: customer,
                    place_column: place,
                    f"{prefix}_promo_sk": rng.choice(promotions) if rng.random() < 0.4 else None,
                    f"{prefix}_quantity": quantity, f"{prefix}_sales_price": price,
                    f"{prefix}_ext_sales_price": extended,
                    f"{prefix}_net_profit": extended - wholesale * quantity})

    def returns(self, change: Change, count: int) -> None:
        """Returns of `count` store sales lines that have none yet."""
        rng = self.rng
        returned = set(self.held["store_returns"])
        candidates = [row for key, row in self.held["store_sales"].items()
                      if key not in returned]
        for sale in rng.sample(candidates, min(count, len(candidates))):
            quantity = rng.randint(1, sale["ss_quantity"])
            self.add(change, "store_returns", {
                "sr_item_sk": sale["ss_item_sk"], "sr_ticket_number": sale["ss_ticket_number"],
                "sr_returned_date_sk": min(DAYS, sale["ss_sold_date_sk"] + rng.randint(1, 60)),
                "sr_customer_sk": sale["ss_customer_sk"], "sr_store_sk": sale["ss_store_sk"],
                "sr_return_quantity": quantity,
                "sr_return_amt": sale["ss_sales_price"] * quantity,
                "sr_reason": rng.choice(REASONS)})

    def inventory(self, change: Change, share: float) -> None:
        """Snapshots on the first day of each quarter for items 1-50 in every warehouse:
        `share` of the (date, item, warehouse) combinations not held yet."""
        rng = self.rng
        dates = [offset + 1 for offset in range(DAYS)
                 if (day := FIRST_DAY + dt.timedelta(days=offset)).day == 1
                 and day.month in (1, 4, 7, 10)]
        for date_sk in dates:
            for item in range(1, 51):
                for warehouse in range(1, 6):
                    if (date_sk, item, warehouse) not in self.held["inventory"] \
                            and rng.random() < share:
                        self.add(change, "inventory", {
                            "inv_date_sk": date_sk, "inv_item_sk": item,
                            "inv_warehouse_sk": warehouse,
                            "inv_quantity_on_hand": rng.randint(0, 500)})

    def initial(self) -> Change:
        change = Change()
        self.dimensions(change)
        self.orders(change, "store_sales", 1700, (1, DAYS))
        self.orders(change, "catalog_sales", 1200, (1, DAYS))
        self.orders(change, "web_sales", 900, (1, DAYS))
        self.returns(change, 500)
        self.inventory(change, 0.9)
        return change

    def facts_step(self, change: Change, scale: int) -> None:
        """New orders (mostly in the last year), deletions of old lines and returns, new
        and updated inventory levels."""
        rng = self.rng
        for table, orders in (("store_sales", 30), ("catalog_sales", 20), ("web_sales", 15)):
            self.orders(change, table, orders * scale, (DAYS - 365, DAYS))
            self.orders(change, table, orders * scale // 5, (1, DAYS))
            for row in self.pick(table, 40 * scale):
                self.delete(change, table, row)
        for row in self.pick("store_returns", 12 * scale):
            self.delete(change, "store_returns", row)
        self.returns(change, 15 * scale)
        for row in self.pick("inventory", 20 * scale):
            self.delete(change, "inventory", row)
        for row in self.pick("inventory", 30 * scale):
            self.update(change, "inventory", row,
                        inv_quantity_on_hand=rng.randint(0, 500))
        self.inventory(change, 0.2)

    def step(self, number: int) -> Change:
        change = Change()
        rng = self.rng
        if number % 2 == 0:  # the dimensions change, then facts that use the new rows
            for row in self.pick("item", 10):
                category = rng.choice(CATEGORIES)
                self.update(change, "item", row, i_category=category,
                            i_class=f"{category.lower()}-{rng.randint(1, 3)}",
                            i_brand=f"brand#{rng.randint(1, 25)}",
                            i_current_price=money(rng.uniform(1, 200)))
            for row in self.pick("item", 2, lambda row: row["i_item_sk"] > 50):
                self.delete(change, "item", row)
            top = max(key[0] for key in self.held["item"])
            for sk in range(top + 1, top + 6):
                self.add(change, "item", self.item(sk))
            for row in self.pick("customer", 15):
                self.update(change, "customer", row, c_state=rng.choice(STATES),
                            c_preferred_flag=rng.choice(("Y", "N")))
            for row in self.pick("customer", 3):
                self.delete(change, "customer", row)
            top = max(key[0] for key in self.held["customer"])
            for sk in range(top + 1, top + 11):
                self.add(change, "customer", self.customer(sk))
            for row in self.pick("store", 1):
                self.update(change, "store", row, s_state=rng.choice(STATES[:6]))
            top = max(key[0] for key in self.held["store"])
            self.add(change, "store", self.store(top + 1))
            for row in self.pick("warehouse", 1):
                self.update(change, "warehouse", row, w_state=rng.choice(STATES))
            for row in self.pick("promotion", 2):
                self.update(change, "promotion", row,
                            p_channel_email="N" if row["p_channel_email"] == "Y" else "Y",
                            p_channel_tv="N" if row["p_channel_tv"] == "Y" else "Y")
            self.facts_step(change, 1)
        else:
            self.facts_step(change, 2)
        return change


def write_change(root: Path, change: Change, name: str) -> None:
    for table, rows in change.inserts.items():
        write_rows(root / "input" / table / f"{name}.parquet", table, rows)
    for table, marked in change.changes.items():
        write_rows(root / "input" / f"{table}_changes" / f"{name}.parquet", table,
                   [row for _, row in marked], [op for op, _ in marked])


# ---------------------------------------------------------------------------------------
# The project, the CLI, the comparison
# ---------------------------------------------------------------------------------------


def corpus(pattern: str | None) -> str:
    """`views.sql`, or only its views whose name matches `pattern` and the views they read."""
    text = (SQL / "views.sql").read_text()
    if pattern is None:
        return text
    statements = {match[1]: match[0] for match in re.finditer(
        r"(?ms)^CREATE MATERIALIZED VIEW (\w+) AS\n.*?;$", text)}
    wanted = [name for name in statements if re.search(pattern, name)]
    if not wanted:
        sys.exit(f"no view of bench/breadth/views.sql matches {pattern!r}")
    kept: set[str] = set()
    while wanted:
        name = wanted.pop()
        if name not in kept:
            kept.add(name)
            wanted += [other for other in statements
                       if re.search(rf"\b{other}\b", statements[name])]
    return "\n\n".join(statement for name, statement in statements.items() if name in kept)


def project(root: Path, views: str) -> None:
    connectors = "".join(
        f"  - {{name: {table}_in, table: {table}, type: files, format: parquet, "
        f"path: input/{table}}}\n" for table in COLUMNS) + "".join(
        f"  - {{name: {table}_changes, table: {table}, type: files, format: parquet, "
        f"path: input/{table}_changes, changes: true}}\n"
        for table in COLUMNS if table != "date_dim")
    pipeline = root / "pipelines" / PIPELINE
    pipeline.mkdir(parents=True)
    (root / "reconcile.yaml").write_text("")
    (pipeline / "pipeline.yaml").write_text(
        # maintained whenever they can be: what this bench proves is the maintained rules
        f"name: {PIPELINE}\nbootstrap_policy: allow\nrefresh: incremental\n"
        f"sql: [tables.sql, views.sql]\n"
        f"connectors:\n{connectors}")
    shutil.copy(SQL / "tables.sql", pipeline / "tables.sql")
    (pipeline / "views.sql").write_text(views)
    for table in COLUMNS:
        (root / "input" / table).mkdir(parents=True)
        if table != "date_dim":
            (root / "input" / f"{table}_changes").mkdir(parents=True)


def reconcile(root: Path, *args: str, capture: bool = False) -> str:
    """`reconcile -C root ARGS` through the CLI's own entry point, in this process (so
    apply and run share this process's Spark); its output, when `capture`."""
    from reconciler.cli.main import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out) if capture else contextlib.nullcontext():
        try:
            cli.main(["-C", str(root), *args], prog_name="reconcile", standalone_mode=False)
        except SystemExit as error:
            if error.code:
                sys.exit(f"reconcile {' '.join(args)} failed (exit {error.code})"
                         + (f":\n{out.getvalue()}" if capture else ""))
    return out.getvalue()


def refresh_modes(root: Path) -> dict[str, str]:
    """Each view's refresh as `reconcile plan --json` gives it, in the corpus's order."""
    document = json.loads(reconcile(root, "plan", "--json", capture=True))
    (pipeline,) = document["pipelines"]
    return {action["name"]: action["refresh"] for action in pipeline["actions"]
            if action.get("refresh") is not None}


def reason_of(mode: str) -> str | None:
    """Why a view is recomputed each step (None: it is maintained)."""
    prefix = "recomputed each step: "
    return mode[len(prefix):] if mode.startswith(prefix) else None


def committed_runtime(root: Path, spark: Any) -> Any:
    """The pipeline's runtime at its committed manifest (what `reconcile query` reads)."""
    from reconciler.desired.settings.project import load_project
    from reconciler.engine.delta.storage import DeltaStorage
    from reconciler.engine.runtime import PipelineRuntime
    from reconciler.state.program import CommittedProgram
    from reconciler.state.reader import open_backend, pipeline_layout, read_manifest

    settings = load_project(root)
    layout = pipeline_layout(settings, PIPELINE)
    manifest, _ = read_manifest(open_backend(settings), PIPELINE, layout)
    assert manifest is not None, "not deployed"
    return PipelineRuntime(spark, DeltaStorage(spark), layout,
                           CommittedProgram.of(manifest.program),
                           dict(manifest.relations),
                           project_dir=settings.root)


def chunks(names: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(names), size):
        yield names[start:start + size]


def written_queries() -> dict[str, str]:
    """Each view's query as `views.sql` writes it: a view maintained through its parts
    (`desired/analysis/view_parts.py`) keeps its query over them, which is not what is checked."""
    import sqlglot

    found = {}
    for statement in sqlglot.parse((SQL / "views.sql").read_text(), dialect="spark"):
        if isinstance(statement, sqlglot.exp.Create) and statement.expression is not None:
            found[statement.this.name.lower()] = statement.expression.sql(dialect="spark")
    return found


def compare(root: Path, spark: Any, views: list[str]) -> list[str]:
    """The views whose stored contents differ from their query from scratch, as written
    (a few of each one's differing rows printed), found by Spark jobs of 20 views each."""
    from tests.comparison import comparable, differing

    runtime = committed_runtime(root, spark)
    runtime.register_queryable(runtime.relations)  # every relation at its pinned version
    written = written_queries()

    def scratch_of(view: str) -> Any:
        return spark.sql(written[view]) if view in written else runtime.evaluate(view)

    wrong = [name for group in chunks(views, 20) for name in differing(
        {view: (runtime.frame(view), scratch_of(view)) for view in group})]
    for view in wrong:
        stored, scratch = comparable(runtime.frame(view)), comparable(scratch_of(view))
        print(f"  {view}: stored, not from scratch:")
        stored.exceptAll(scratch).show(5, truncate=False)
        print(f"  {view}: from scratch, not stored:")
        scratch.exceptAll(stored).show(5, truncate=False)
    return wrong


def describe_rows(rows: dict[str, tuple[int, int]]) -> str:
    return ", ".join(f"{table} +{inserted}" + (f"/-{deleted}" if deleted else "")
                     for table, (inserted, deleted) in sorted(rows.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--steps", type=int, default=2,
                        help="steps after the initial load (even steps change dimensions)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/breadth-bench"))
    parser.add_argument("--views", metavar="REGEX",
                        help="only the views whose name matches (and the views they read)")
    args = parser.parse_args()
    from reconciler.engine.spark.session import get_spark

    started = time.perf_counter()
    read_tables()
    args.work.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="breadth-", dir=args.work))
    project(root, corpus(args.views))
    modes = refresh_modes(root)
    views = list(modes)
    width = max(map(len, views))
    print(f"{len(views)} views in bench/breadth/views.sql; project in {root}\n")
    print(f"{'view':<{width}}  refresh (reconcile plan)")
    for view, mode in modes.items():
        print(f"{view:<{width}}  {mode}")
    print(flush=True)

    generator = Generator(args.seed)
    changes = [generator.initial()]
    changes += [generator.step(number) for number in range(1, args.steps + 1)]

    clock = time.perf_counter()
    reconcile(root, "apply", "--auto-approve")
    times = [f"apply {time.perf_counter() - clock:.0f} s"]
    print(times[0], flush=True)
    spark = get_spark()
    differ: dict[str, list[str]] = {}  # after the load and each step: the views that differ
    for number, change in enumerate(changes):
        label = "load" if number == 0 else f"step {number}"
        write_change(root, change, f"{number:02d}-{'load' if number == 0 else 'step'}")
        clock = time.perf_counter()
        reconcile(root, "run")
        seconds = time.perf_counter() - clock
        print(f"{label}: run {seconds:.0f} s ({describe_rows(change.rows())})", flush=True)
        clock = time.perf_counter()
        differ[label] = compare(root, spark, views)
        compared = time.perf_counter() - clock
        times.append(f"{label} {seconds:.0f} s + compare {compared:.0f} s")
        print(f"{label}: compared in {compared:.0f} s: "
              + (f"{len(differ[label])} differ: {', '.join(differ[label])}" if differ[label]
                 else f"all {len(views)} equal their queries"), flush=True)

    maintained = [view for view, mode in modes.items() if reason_of(mode) is None]
    reasons = Counter(reason for mode in modes.values() if (reason := reason_of(mode)))
    print(f"\nmaintained: {len(maintained)} of {len(views)} views "
          f"({100 * len(maintained) / len(views):.0f}%)")
    if reasons:
        print("recomputed each step, by reason:")
        for reason, count in reasons.most_common():
            print(f"  {count:4d}  {reason}")
    for label, wrong in differ.items():
        if wrong:
            print(f"differ after {label}: {', '.join(wrong)}")
    if not any(differ.values()):
        print(f"all {len(views)} equal their queries after the load and after "
              f"{', '.join(list(differ)[1:]) or 'no step'}")
    print(f"time: {'; '.join(times)}; total {time.perf_counter() - started:.0f} s")
    if any(differ.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
