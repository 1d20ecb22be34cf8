"""Scale: ingest throughput against bare Spark, peak driver memory, storage over steps.

With default settings, on embedded Spark (`local[*]`, capped at 4 cores):

* **ingest**: a parquet input of N rows (4 columns, one file, as a user would drop
  it in) fed to a `files` connector; `reconcile run` in its own process, timed
  and with the peak RSS of its process tree (Python + the Spark JVM) sampled.
  The same files are copied by a bare `spark.read.parquet(...).write.parquet(...)`
  in a fresh process; the ratio is rows/s of ours over bare Spark's (goal >= 0.7),
  both timed as whole processes (JVM start included).
  A second pipeline adds a view projecting every row: ingested, computed and
  counted exactly through `reconcile query`.
* **growth**: a 1,000,000-row table, a filter view and a 20-group aggregate,
  then 30 steps of 1,000 new rows; storage after the first and the 30th step
  (goal: at most 1.5x), for retention settings given in `--retention`.

* **Spark Connect** (`--connect ROWS`): a Connect server started from the pyspark
  distribution on loopback; a table of ROWS rows ingested by embedded Spark, then a
  new view over all of them bootstrapped through the server; the peak RSS of the
  client process (goal: under 500 MB, as no rows reach the client).

Usage: `python bench/scale_bench.py [--rows 12000000 48000000] [--skip-growth]
[--connect 10000000]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

GENERATE = """
import sys
from pyspark.sql import SparkSession, functions as F
spark = SparkSession.builder.master("local[*]").config("spark.ui.enabled", "false").getOrCreate()
rows, target = int(sys.argv[1]), sys.argv[2]
(spark.range(rows).select(F.col("id"), (F.col("id") % 1000).cast("int").alias("k"),
                          ((F.col("id") * 7) % 100000).cast("int").alias("v"),
                          F.concat(F.lit("x"), (F.col("id") % 9973).cast("string")).alias("s"))
 .coalesce(1).write.mode("overwrite").parquet(target))
"""

BARE = """
import sys, time
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master(sys.argv[3]).config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
start = time.time()
spark.read.parquet(sys.argv[1]).write.mode("overwrite").parquet(sys.argv[2])
print(time.time() - start)
"""

TABLE = "create table events (id bigint not null, k int, v int, s string);\n"
VIEW = "create materialized view everything as select id, k, v, s from events;\n"
PIPELINE = """\
name: p
bootstrap_policy: allow
connectors:
  - name: events_in
    table: events
    type: files
    format: parquet
    path: {input}
"""


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and all its descendants (Linux /proc)."""
    total, stack = 0, [pid]
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    while stack:
        current = stack.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
        stack.extend(children.get(current, []))
    return total


def run_measured(args: list[str], cwd: Path | None = None) -> tuple[float, int, str]:
    """Run a command; its wall time, the peak RSS of its process tree, and its output."""
    start = time.time()
    process = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(process.pid))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = process.communicate()
    done.set()
    sampler.join()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{err[-3000:]}")
    return time.time() - start, peak, out


def project(folder: Path, input_folder: Path, sql: str, settings: str = "") -> Path:
    (folder / "pipelines/p").mkdir(parents=True)
    (folder / "pipelines/p/pipeline.yaml").write_text(PIPELINE.format(input=input_folder))
    (folder / "pipelines/p/program.sql").write_text(sql)
    (folder / "reconcile.yaml").write_text(settings)
    return folder


def reconcile(folder: Path, *args: str) -> tuple[float, int, str]:
    return run_measured([PYTHON, "-m", "reconciler", "-C", str(folder), *args], cwd=folder)


def ingest(rows: int, work: Path) -> dict[str, float]:
    data = work / f"input-{rows}"
    subprocess.run([PYTHON, "-c", GENERATE, str(rows), str(data)], check=True,
                   capture_output=True)
    size = sum(f.stat().st_size for f in data.rglob("*.parquet"))
    table_only = project(work / f"table-{rows}", data, TABLE)
    reconcile(table_only, "apply", "--auto-approve")
    seconds, peak, _ = reconcile(table_only, "run")
    # Both sides are whole processes (JVM start included), timed from outside.
    bare_seconds, _, _ = run_measured([PYTHON, "-c", BARE, str(data), str(work / "bare"),
                                       "local[4]"])
    with_view = project(work / f"view-{rows}", data, TABLE + VIEW)
    reconcile(with_view, "apply", "--auto-approve")
    view_seconds, view_peak, _ = reconcile(with_view, "run")
    _, _, counted = reconcile(with_view, "query", "-p", "p", "--format", "json",
                              "SELECT count(*) AS n, count(DISTINCT id) AS ids FROM everything")
    counts = json.loads(counted)[0]
    assert counts == {"n": rows, "ids": rows}, counts
    return {"rows": rows, "input_mb": size / 1e6, "run_s": seconds, "rows_per_s": rows / seconds,
            "bare_s": bare_seconds, "bare_rows_per_s": rows / bare_seconds,
            "peak_rss_mb": peak / 1e6, "with_view_run_s": view_seconds,
            "with_view_peak_rss_mb": view_peak / 1e6}


GROWTH_SQL = TABLE + textwrap.dedent("""\
    create materialized view big as select id, k, v, s from events where v > 50000;
    create materialized view groups as select k % 20 as g, count(*) as n, sum(v) as total
    from events group by k % 20;
    """)


def growth(work: Path, retention: str, label: str) -> dict[str, float | str]:
    """1M rows, then 30 steps of 1,000 rows, in one process (one JVM) through the CLI."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from reconciler.cli.main import cli

    data = work / f"growth-input-{label}"
    subprocess.run([PYTHON, "-c", GENERATE, "1000000", str(data)], check=True,
                   capture_output=True)
    folder = project(work / f"growth-{label}", data, GROWTH_SQL,
                     f"retention: {retention}\n" if retention else "")
    runner = CliRunner()

    def invoke(*args: str) -> None:
        result = runner.invoke(cli, ["-C", str(folder), *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output

    def stored() -> int:
        return sum(f.stat().st_size for f in (folder / ".reconcile/data").rglob("*")
                   if f.is_file())

    invoke("apply", "--auto-approve")
    invoke("run")
    first = stored()
    start = time.time()
    for step in range(30):
        ids = range(10_000_000 + step * 1000, 10_000_000 + (step + 1) * 1000)
        batch = pa.table({"id": pa.array(ids, pa.int64()),
                          "k": pa.array([i % 1000 for i in ids], pa.int32()),
                          "v": pa.array([i * 97 % 100000 for i in ids], pa.int32()),
                          "s": pa.array([f"x{i}" for i in ids])})
        pq.write_table(batch, data / f"step-{step:02d}.parquet")
        invoke("run")
    after = stored()
    return {"retention": retention or "(defaults: serials 10, min_age 1h)",
            "after_first_mb": first / 1e6, "after_30_mb": after / 1e6, "ratio": after / first,
            "seconds_per_step": (time.time() - start) / 30}


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def connect_bootstrap(rows: int, work: Path) -> dict[str, float]:
    """Bootstrap a view over `rows` rows through a Spark Connect server; client peak RSS."""
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    port = free_port()
    server = subprocess.Popen(
        [str(spark_home / "bin/spark-submit"), "--class",
         "org.apache.spark.sql.connect.service.SparkConnectServer",
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         "--conf", "spark.ui.enabled=false", "spark-internal"],
        env={**os.environ, "SPARK_HOME": str(spark_home)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        import socket

        deadline = time.time() + 120
        while time.time() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(1)
        else:
            raise SystemExit("the Spark Connect server did not start")
        data = work / f"connect-input-{rows}"
        subprocess.run([PYTHON, "-c", GENERATE, str(rows), str(data)], check=True,
                       capture_output=True)
        folder = project(work / f"connect-{rows}", data, TABLE)
        reconcile(folder, "apply", "--auto-approve")
        reconcile(folder, "run")  # ingested by embedded Spark
        (folder / "pipelines/p/program.sql").write_text(TABLE + VIEW)
        seconds, peak, _ = reconcile(folder, "apply", "--auto-approve",
                                     "--spark-remote", f"sc://127.0.0.1:{port}")
        _, _, counted = reconcile(folder, "query", "-p", "p", "--format", "json",
                                  "SELECT count(*) AS n FROM everything")
        assert json.loads(counted)[0]["n"] == rows, counted
        return {"rows": rows, "seconds": seconds, "client_peak_rss_mb": peak / 1e6}
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[12_000_000, 48_000_000])
    parser.add_argument("--retention", nargs="*",
                        default=["", "{serials: 10, min_age: 0s}", "{serials: 2, min_age: 0s}"])
    parser.add_argument("--skip-growth", action="store_true")
    parser.add_argument("--connect", type=int, nargs="*", default=[],
                        help="rows for the Spark Connect bootstrap measurement")
    arguments = parser.parse_args()
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as folder:
        work = Path(folder)
        for rows in arguments.rows:
            result = ingest(rows, work)
            print(f"ingest {rows:>11,} rows ({result['input_mb']:.0f} MB parquet): "
                  f"reconcile run {result['run_s']:.1f} s ({result['rows_per_s']:,.0f} rows/s), "
                  f"bare Spark copy {result['bare_s']:.1f} s ({result['bare_rows_per_s']:,.0f} "
                  f"rows/s), ratio {result['rows_per_s'] / result['bare_rows_per_s']:.2f} "
                  f"(goal >= 0.7); peak RSS {result['peak_rss_mb']:.0f} MB; with a view of "
                  f"every row: {result['with_view_run_s']:.1f} s, peak RSS "
                  f"{result['with_view_peak_rss_mb']:.0f} MB, counts exact", flush=True)
        for rows in arguments.connect:
            result = connect_bootstrap(rows, work)
            print(f"Spark Connect: bootstrapping a view over {rows:,} rows took "
                  f"{result['seconds']:.1f} s; client peak RSS {result['client_peak_rss_mb']:.0f}"
                  " MB (goal < 500 MB)", flush=True)
        if not arguments.skip_growth:
            sys.path.insert(0, str(ROOT))
            for position, retention in enumerate(arguments.retention):
                grown = growth(work, retention, str(position))
                print(f"growth, retention {grown['retention']}: {grown['after_first_mb']:.1f} "
                      f"MB after step 1, {grown['after_30_mb']:.1f} MB after 30 steps of "
                      f"1,000 rows, ratio {grown['ratio']:.2f} (goal <= 1.5), "
                      f"{grown['seconds_per_step']:.1f} s/step", flush=True)


if __name__ == "__main__":
    main()
