"""A continuous runner through applies while input keeps arriving (issue 32's scenario).

Everything runs as a user would run it: the real CLI as subprocesses
(`python -m reconciler -C PROJECT ...`), nothing of the product imported here.

1. A fresh project in a temp folder: table `events (id, k, v)` fed by a `files` json
   connector from `input/`, a view `big` (`where v > {{ threshold }}`, a var) and an
   aggregate `by_k` (`count(*)`, `sum(v)` per `k`); `bootstrap_policy: allow`; `apply`.
2. `reconcile run --continuous --interval S --metrics-port P` starts (its output goes to
   `runner.log` in the temp folder).
3. A producer thread writes a new json file (`--rows-per-file` rows, ids consecutive from
   1) every `--file-period` seconds throughout, each written under a temp name outside
   `input/` and renamed into place.
4. `--applies` times: wait until `--files-per-apply` new files arrived since the last
   apply, change the var `threshold` (rotating values) and run `reconcile apply
   --auto-approve` (it waits for the runner's lock). Then, while input keeps arriving:
   wait until the runner has ingested every row written by the time the apply returned
   (the runner's `reconcile_rows_added_total` metric, then `reconcile query`), and check
   one committed snapshot (a single `reconcile query` reads every relation at the versions
   one manifest pins): ids are exactly 1..count(*) with no id twice (`group by id having
   count(*) > 1` empty), count(*) ends on a file boundary (no file partly ingested), `big`
   holds the same sorted ids as `select id from events where v > threshold`, and `by_k`
   equals `select k, count(*), sum(v) from events group by k`. One line per apply: apply
   duration, how long the runner took to catch up, rows so far, the checks, runner alive.
5. The producer stops; once the runner has everything, a last check, the metrics
   endpoint's `reconcile_*` samples (rows added must equal rows written, no failed
   step), SIGTERM: exit code 0 within `--stop-timeout`, the lock file
   `.reconcile/state/p/lock` gone, and a summary line. Exit code 1 if any check failed.

Usage: `.venv/bin/python bench/runner_bench.py [--applies 5] [--interval 2]
[--files-per-apply 5] [--rows-per-file 200] [--file-period 1] [--keep]`.
On 2 cores each `reconcile` command pays for its own JVM (seconds), so a run of the
defaults takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = "p"
PIPELINE_YAML = """name: p
bootstrap_policy: allow
vars: {{threshold: {threshold}}}
connectors:
  - {{name: events_in, table: events, type: files, format: json, path: input}}
"""
SQL = """create table events (id bigint, k int, v int);
create materialized view big as select id, v from events where v > {{ threshold }};
create materialized view by_k as
  select k, count(*) as n, sum(v) as total from events group by k;
"""
FIRST_THRESHOLD = 50
THRESHOLDS = (20, 80, 35, 65, 50)  # rotated by the applies: each differs from the last
GROUPS = 7
COMMAND_TIMEOUT = 900.0
CATCH_UP_TIMEOUT = 600.0


def row(i: int) -> dict[str, int]:
    return {"id": i, "k": i % GROUPS, "v": (i * 37) % 100}


def reconcile(project: Path, *args: str, timeout: float = COMMAND_TIMEOUT
              ) -> subprocess.CompletedProcess[str]:
    """`reconcile -C project ARGS...` as a user runs it: a process of its own."""
    return subprocess.run([sys.executable, "-m", "reconciler", "-C", str(project), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def must(result: subprocess.CompletedProcess[str], what: str) -> str:
    if result.returncode != 0:
        raise RuntimeError(f"{what} exited {result.returncode}:\n{result.stdout}"
                           f"{result.stderr}")
    return result.stdout


def query(project: Path, sql: str) -> list[dict[str, Any]]:
    out = must(reconcile(project, "query", "-p", PIPELINE, sql, "--format", "json"),
               "reconcile query")
    return json.loads(out[out.index("["):])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_project(project: Path, threshold: int) -> None:
    folder = project / "pipelines" / PIPELINE
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "program.sql").write_text(SQL)
    set_threshold(project, threshold)
    (project / "input").mkdir(exist_ok=True)
    (project / "staging").mkdir(exist_ok=True)


def set_threshold(project: Path, threshold: int) -> None:
    (project / "pipelines" / PIPELINE / "pipeline.yaml").write_text(
        PIPELINE_YAML.format(threshold=threshold))


class Producer(threading.Thread):
    """Writes a file of consecutive ids every `period` seconds, renamed into place whole."""

    def __init__(self, project: Path, rows_per_file: int, period: float) -> None:
        super().__init__(daemon=True)
        self.project, self.rows_per_file, self.period = project, rows_per_file, period
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.boundaries: list[int] = [0]  # rows written after each file (a set of ends)
        self.error: BaseException | None = None

    @property
    def written(self) -> int:
        with self.lock:
            return self.boundaries[-1]

    def boundaries_copy(self) -> list[int]:
        with self.lock:
            return list(self.boundaries)

    @property
    def files(self) -> int:
        with self.lock:
            return len(self.boundaries) - 1

    def run(self) -> None:
        try:
            next_at = time.monotonic()
            while not self.halt.is_set():
                first = self.written + 1
                name = f"events-{self.files + 1:06d}.json"
                staging = self.project / "staging" / name
                staging.write_text("".join(
                    json.dumps(row(i)) + "\n"
                    for i in range(first, first + self.rows_per_file)))
                staging.replace(self.project / "input" / name)
                with self.lock:
                    self.boundaries.append(first + self.rows_per_file - 1)
                next_at += self.period
                self.halt.wait(max(0.0, next_at - time.monotonic()))
        except BaseException as error:  # reported by the main loop
            self.error = error


def metrics_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        return reply.read().decode()


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the Prometheus text (0 when absent)."""
    for line in text.splitlines():
        match = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
        if not match or match.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(have.get(key) == value for key, value in labels.items()):
            return float(match.group(3))
    return 0.0


def snapshot_sql(threshold: int) -> str:
    """Every check's rows from one committed snapshot (one query, one manifest)."""
    return f"""
select 'stats' as part, count(*) as a, min(id) as b, max(id) as c,
       count(distinct id) as d from events
union all
select 'dup', id, count(*), null, null from events group by id having count(*) > 1
union all
select 'big', id, null, null, null from big
union all
select 'big_scratch', id, null, null, null from events where v > {threshold}
union all
select 'by_k', k, n, total, null from by_k
union all
select 'by_k_scratch', k, count(*), sum(v), null from events group by k
"""


def check_snapshot(rows: list[dict[str, Any]], boundaries: list[int]
                   ) -> tuple[int, list[str], str]:
    """(rows in the table, failed checks, what was compared) of a snapshot's rows."""
    parts: dict[str, list[dict[str, Any]]] = {}
    for item in rows:
        parts.setdefault(item["part"], []).append(item)
    [stats] = parts["stats"]
    count, low, high, distinct = stats["a"], stats["b"], stats["c"], stats["d"]
    failed = []
    if parts.get("dup"):
        failed.append(f"ids more than once: {[(r['a'], r['b']) for r in parts['dup'][:10]]}")
    if count and not (low == 1 and high == count == distinct):
        failed.append(f"ids are not exactly 1..{count}: min {low}, max {high}, "
                      f"distinct {distinct}")
    if count not in boundaries:
        failed.append(f"{count} rows is not a file boundary (a file partly ingested)")
    big = sorted(r["a"] for r in parts.get("big", []))
    scratch = sorted(r["a"] for r in parts.get("big_scratch", []))
    if big != scratch:
        failed.append(f"big != from scratch: {len(big)} vs {len(scratch)} ids, only in view "
                      f"{sorted(set(big) - set(scratch))[:10]}, only from scratch "
                      f"{sorted(set(scratch) - set(big))[:10]}")
    groups = sorted((r["a"], r["b"], r["c"]) for r in parts.get("by_k", []))
    groups_scratch = sorted((r["a"], r["b"], r["c"]) for r in parts.get("by_k_scratch", []))
    if groups != groups_scratch:
        failed.append(f"by_k != from scratch: {groups} vs {groups_scratch}")
    return count, failed, f"big = scratch ({len(big)} ids), by_k = scratch ({len(groups)} groups)"


def wait_for(check: Callable[[], bool], what: str, runner: subprocess.Popen[bytes],
             timeout: float = CATCH_UP_TIMEOUT, pause: float = 0.2) -> float:
    """Seconds until `check()` held; fails if the runner exits or time runs out."""
    started = time.monotonic()
    while not check():
        if runner.poll() is not None:
            raise RuntimeError(f"the runner exited ({runner.returncode}) before {what}")
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(pause)
    return time.monotonic() - started


def caught_up(project: Path, port: int, producer: Producer, target: int, threshold: int,
              runner: subprocess.Popen[bytes]) -> tuple[float, float, int, list[str], str]:
    """Wait until the runner ingested `target` rows, then check a committed snapshot that
    holds them: (catch-up seconds, check seconds, rows in it, failures, what was compared)."""
    def ingested() -> bool:
        return sample(metrics_text(port), "reconcile_rows_added_total", pipeline=PIPELINE,
                      table="events") >= target

    catch_up = wait_for(ingested, f"{target} rows ingested", runner)
    started = time.monotonic()
    while True:
        count, failed, compared = check_snapshot(
            query(project, snapshot_sql(threshold)), producer.boundaries_copy())
        if count >= target or failed:
            return catch_up, time.monotonic() - started, count, failed, compared
        if runner.poll() is not None:
            raise RuntimeError(f"the runner exited ({runner.returncode})")
        if time.monotonic() - started > CATCH_UP_TIMEOUT:
            failed.append(f"the metric said {target} rows were added, but the table holds "
                          f"{count} after {CATCH_UP_TIMEOUT:.0f}s")
            return catch_up, time.monotonic() - started, count, failed, compared


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--applies", type=int, default=5, help="applies in a row")
    parser.add_argument("--interval", type=float, default=2.0,
                        help="the runner's --interval, seconds")
    parser.add_argument("--files-per-apply", type=int, default=5,
                        help="new input files that arrive before each apply (at least)")
    parser.add_argument("--rows-per-file", type=int, default=200)
    parser.add_argument("--file-period", type=float, default=1.0,
                        help="seconds between two input files (the producer's pace)")
    parser.add_argument("--stop-timeout", type=float, default=120.0,
                        help="seconds SIGTERM may take to stop the runner")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder")
    args = parser.parse_args()

    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="runner-bench-"))
    project = work / "project"
    write_project(project, FIRST_THRESHOLD)
    print(f"project {project}; runner log {work / 'runner.log'}", flush=True)
    started = time.monotonic()
    must(reconcile(project, "apply", "--auto-approve"), "the first apply")
    print(f"first apply (threshold {FIRST_THRESHOLD}): {time.monotonic() - started:.1f}s",
          flush=True)

    port = free_port()
    log = (work / "runner.log").open("w")
    runner = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "-C", str(project), "run", "--continuous",
         "--interval", f"{args.interval:g}", "--metrics-port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    print(f"runner pid {runner.pid}: run --continuous --interval {args.interval:g} "
          f"--metrics-port {port}", flush=True)
    producer = Producer(project, args.rows_per_file, args.file_period)
    failures: list[str] = []
    threshold = FIRST_THRESHOLD
    done = 0
    try:
        wait_for(lambda: _serving(port), "the metrics endpoint", runner, timeout=300)
        producer.start()
        for number in range(1, args.applies + 1):
            wanted = producer.files + args.files_per_apply

            def produced(wanted: int = wanted) -> bool:
                return producer.files >= wanted or producer.error is not None

            wait_for(produced, "the producer", runner)
            if producer.error is not None:
                raise RuntimeError(f"the producer failed: {producer.error!r}")
            previous, threshold = threshold, THRESHOLDS[(number - 1) % len(THRESHOLDS)]
            set_threshold(project, threshold)
            started = time.monotonic()
            applied = reconcile(project, "apply", "--auto-approve")
            took = time.monotonic() - started
            target = producer.written
            said = " / ".join(line for line in applied.stdout.splitlines() if line.strip())
            if "waiting for the lock" in applied.stderr:
                said += "; waited for the runner's lock"
            if applied.returncode != 0 or "bootstrapped" not in applied.stdout:
                failures.append(f"apply {number} exited {applied.returncode}: "
                                f"{applied.stdout}{applied.stderr}")
                print(f"apply {number}/{args.applies}: FAILED ({applied.returncode}): "
                      f"{applied.stdout}{applied.stderr}", flush=True)
                break
            catch_up, check, count, failed, compared = caught_up(
                project, port, producer, target, threshold, runner)
            alive = runner.poll() is None
            if not alive:
                failed.append(f"the runner exited ({runner.returncode})")
            failures += [f"apply {number}: {f}" for f in failed]
            verdict = "checks ok" if not failed else "CHECKS FAILED: " + "; ".join(failed)
            print(f"apply {number}/{args.applies}: threshold {previous} -> {threshold}: "
                  f"apply {took:.1f}s ({said}); runner caught up with {target} rows "
                  f"{catch_up:.1f}s after it, checked in {check:.1f}s; {count} rows in the "
                  f"table ({producer.written} written so far), each id once, {compared}: "
                  f"{verdict}; runner {'alive' if alive else 'DEAD'} (pid {runner.pid})",
                  flush=True)
            if not alive:
                break
            done = number

        producer.halt.set()
        producer.join()
        target = producer.written
        catch_up, check, count, failed, compared = caught_up(
            project, port, producer, target, threshold, runner)
        failures += [f"final: {f}" for f in failed]
        if count != target:
            failures.append(f"final: the table holds {count} rows, {target} were written")
        print(f"producer stopped after {producer.files} files, {target} rows; runner caught "
              f"up {catch_up:.1f}s later; final snapshot: {count} rows, {compared}: "
              f"{'checks ok' if not failed else 'CHECKS FAILED: ' + '; '.join(failed)}",
              flush=True)

        text = metrics_text(port)
        print("metrics:")
        for line in text.splitlines():
            if line.startswith("reconcile_"):
                print(f"  {line}")
        added = sample(text, "reconcile_rows_added_total", pipeline=PIPELINE, table="events")
        if added != target:
            failures.append(f"reconcile_rows_added_total says {added:g} rows, {target} "
                            "were written")
        for result in ("failed", "paused"):
            steps = sample(text, "reconcile_steps_total", pipeline=PIPELINE, result=result)
            if steps:
                failures.append(f"{steps:g} step(s) {result}")
    except Exception as error:
        failures.append(str(error))
        print(f"ERROR: {error}", flush=True)
    finally:
        producer.halt.set()
        stopped = time.monotonic()
        code: int | None = None
        if runner.poll() is None:
            runner.send_signal(signal.SIGTERM)
            try:
                code = runner.wait(timeout=args.stop_timeout)
            except subprocess.TimeoutExpired:
                runner.kill()
                runner.wait()
                failures.append(f"the runner did not stop within {args.stop_timeout:g}s of "
                                "SIGTERM")
        else:
            failures.append(f"the runner had exited ({runner.returncode}) before SIGTERM")
        log.close()

    lines = (work / "runner.log").read_text().splitlines()
    if code is not None:
        print(f"SIGTERM: runner exited {code} in {time.monotonic() - stopped:.1f}s", flush=True)
        if code != 0:
            failures.append(f"the runner exited {code} after SIGTERM")
    lock = project / ".reconcile" / "state" / PIPELINE / "lock"
    if lock.exists():
        failures.append(f"the lock {lock} is still there")
    print(f"lock file {'STILL THERE' if lock.exists() else 'gone'}; runner log: "
          f"{sum('step committed' in line for line in lines)} steps committed, "
          f"{sum('step failed' in line for line in lines)} failed, "
          f"{sum('waiting for the lock' in line for line in lines)} waited for an apply's "
          "lock; last lines:")
    for line in lines[-3:]:
        print(f"  {line}")
    if failures or code != 0:
        print("runner log:")
        for line in lines:
            print(f"  {line}")
    wall = time.monotonic() - began
    if failures:
        print(f"FAILED ({len(failures)}), {wall:.0f}s:")
        for failure in failures:
            print(f"  - {failure}")
        print(f"(kept {work})")
        return 1
    print(f"runner alive through {done} applies; {producer.written} rows exactly once; "
          f"views equal from scratch after each; stopped cleanly by SIGTERM (exit 0, lock "
          f"released); {wall:.0f}s")
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"(kept {work})")
    return 0


def _serving(port: int) -> bool:
    try:
        metrics_text(port)
    except OSError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
