"""Bootstrap vs full refresh on a pipeline with a 1,000,000-row table and 10 views.

Deploys the pipeline on embedded Spark, ingests the table from parquet files
through a `files` connector, then changes one leaf view and times, in the same
process and Spark session:
  * `reconcile apply` (bootstrap: recomputes the leaf from the stored state), and
  * `reconcile apply --full-refresh` (drops all state, re-ingests, recomputes all).
Prints both and the ratio (target: bootstrap at most 20% of a full refresh).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reconciler.cli.main import cli

ROWS = 1_000_000
FILES = 4
USERS = 10_000

SQL = """
create table events (id bigint not null, user_id bigint, amount double, day date,
                     category string);
create materialized view user_totals as
  select user_id, sum(amount) as total, count(*) as n from events group by user_id;
create materialized view category_totals as
  select category, sum(amount) as total, count(*) as n from events group by category;
create materialized view daily_totals as
  select day, sum(amount) as total from events group by day;
create materialized view category_days as
  select category, day, count(*) as n from events group by category, day;
create materialized view big_events as select * from events where amount > 990;
create materialized view top_users as
  select user_id, total from user_totals where total > {{ threshold }};
create materialized view user_buckets as
  select cast(n / 10 as int) as bucket, count(*) as users from user_totals group by 1;
create materialized view busy_days as select day from daily_totals where total > 0;
create materialized view category_share as
  select c.category, c.total / s.total as share
  from category_totals c cross join (select sum(total) as total from category_totals) s;
create materialized view big_event_users as
  select user_id, count(*) as n from big_events group by user_id;
"""


def write_input(folder: Path) -> None:
    folder.mkdir(parents=True)
    per_file = ROWS // FILES
    for index in range(FILES):
        start = index * per_file
        ids = pa.array(range(start, start + per_file), pa.int64())
        table = pa.table({
            "id": ids,
            "user_id": pa.array([i % USERS for i in range(start, start + per_file)], pa.int64()),
            "amount": pa.array([(i * 37) % 1000 + 0.5 for i in range(start, start + per_file)]),
            "day": pa.array([19000 + i % 365 for i in range(start, start + per_file)],
                            pa.int32()).cast(pa.date32()),
            "category": pa.array([f"c{i % 20}" for i in range(start, start + per_file)]),
        })
        pq.write_table(table, folder / f"part-{index}.parquet")


def reconcile(project: Path, *args: str) -> float:
    started = time.perf_counter()
    cli(["-C", str(project), *args], standalone_mode=False)
    return time.perf_counter() - started


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        write_input(project / "input" / "events")
        pipeline = project / "pipelines" / "bench"
        pipeline.mkdir(parents=True)
        (pipeline / "pipeline.yaml").write_text(
            "name: bench\nvars: {threshold: 50000}\nconnectors:\n"
            "  - {name: events_in, table: events, type: files, format: parquet, "
            "path: input/events}\n")
        (pipeline / "program.sql").write_text(SQL)
        print(f"deploy: {reconcile(project, 'apply', '--auto-approve'):.1f} s", file=sys.stderr)
        print(f"ingest {ROWS:,} rows: {reconcile(project, 'run'):.1f} s", file=sys.stderr)
        spec = pipeline / "pipeline.yaml"
        spec.write_text(spec.read_text().replace("50000", "60000"))
        bootstrap = reconcile(project, "apply", "--auto-approve")
        full = reconcile(project, "apply", "--auto-approve", "--full-refresh")
    print(f"rows: {ROWS:,}, views: 10, changed: 1 leaf view (top_users)")
    print(f"bootstrap:    {bootstrap:6.2f} s")
    print(f"full refresh: {full:6.2f} s")
    print(f"ratio bootstrap / full refresh: {bootstrap / full:.3f} (target <= 0.20)")


if __name__ == "__main__":
    main()
