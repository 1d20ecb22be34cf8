"""The four sides of `bench/micro_batch_bench.py`, each one step of 1,000 new rows as its user
pays it: a one-shot `reconcile run` process, the continuous runner's step, a Structured
Streaming micro-batch, a full recompute (a `reconcile run` of a `refresh: full` twin).

The engine's sides are the real CLI in processes of their own (`python -m reconciler`,
nothing of the product imported); their Spark jobs are counted in Spark's event logs
(`spark.eventLog.enabled` in a `spark-defaults.conf` of `SPARK_CONF_DIR`, which every JVM of
the run reads, the bench's own too). The streaming side runs in the bench's own session,
its jobs counted by the scheduler.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.step_bench import SQL, STEP_ROWS, step_events  # noqa: E402
from bench.streaming_anchor import VIEWS, Streaming, jobs_started, users_frame  # noqa: E402

if TYPE_CHECKING:  # pyspark is imported once the session is started
    from pyspark.sql import DataFrame, SparkSession

ONE_SHOT, RUNNER, FULL = "p", "r", "full"
"""The project's three pipelines: the same program and input, each with an inbox of its own."""
PIPELINE_YAML = """name: {name}
sql: [program.sql]
refresh: {refresh}
bootstrap_policy: allow
connectors:
  - {{name: events_in, table: events, type: files, format: parquet, path: input/{name}}}
"""
USERS = ("INSERT INTO users SELECT cast(id AS int), concat('c', cast(id % 30 AS string)) "
         "FROM range(1000)")  # as `bench/step_bench.py` writes them
TIMEOUT = 3600.0
JOB_START = b'{"Event":"SparkListenerJobStart"'


def reconcile(project: Path, *args: str) -> str:
    """`reconcile -C project ARGS...` as a user runs it, a process of its own; its stdout."""
    done = subprocess.run([sys.executable, "-m", "reconciler", "-C", str(project), *args],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"reconcile {' '.join(args)} exited {done.returncode}:\n"
                           f"{done.stdout}{done.stderr}")
    return done.stdout


def event_logs(folder: Path) -> set[Path]:
    return set(folder.iterdir())


def job_starts(log: Path) -> int:
    """Spark jobs an event log says were started (Spark flushes the log at each)."""
    with log.open("rb") as lines:
        return sum(line.startswith(JOB_START) for line in lines)


def storage_bytes(folder: Path) -> int:
    """Bytes of every file under `folder` (as `du -sb`)."""
    return sum(os.path.getsize(os.path.join(directory, name))
               for directory, _, names in os.walk(folder) for name in names)


def arrive(file: Path, inbox: Path, name: str) -> float:
    """`file` appears whole in `inbox` (a hard link: one atomic step); the time it did."""
    os.link(file, inbox / name)
    return time.time()


def write_project(project: Path) -> None:
    for name, refresh in ((ONE_SHOT, "incremental"), (RUNNER, "incremental"),
                          (FULL, "full")):
        folder = project / "pipelines" / name
        folder.mkdir(parents=True)
        (folder / "program.sql").write_text(SQL)
        (folder / "pipeline.yaml").write_text(PIPELINE_YAML.format(name=name, refresh=refresh))
        (project / "input" / name).mkdir(parents=True)


@dataclass
class Figures:
    """One side's steps: seconds, Spark jobs, bytes its pipeline's storage grew by."""

    seconds: list[float] = field(default_factory=list)
    jobs: list[int] = field(default_factory=list)
    written: list[int] = field(default_factory=list)


@dataclass
class Engine:
    """The project, its event logs and the runner's process."""

    project: Path
    logs: Path
    runner: subprocess.Popen[str] | None = None
    lines: list[tuple[float, str]] = field(default_factory=list)
    runner_log: Path | None = None
    """The runner's event log, found at its first step (its JVM starts then)."""
    server_log: Path | None = None
    """With `--warm`: the warm server's event log, which the one-shot processes' jobs go to."""

    def start_warm(self) -> str:
        """`reconcile spark start`: the one-shot processes attach to the project's warm
        server from now on (the runner keeps its own JVM: it is started with
        `--spark-master`); its event log found."""
        logs = event_logs(self.logs)
        said = reconcile(self.project, "spark", "start")
        deadline = time.monotonic() + 120.0
        while not (new := event_logs(self.logs) - logs) and time.monotonic() < deadline:
            time.sleep(0.1)
        [self.server_log] = new
        return said.strip()

    def stop_warm(self) -> None:
        if self.server_log is not None:
            reconcile(self.project, "spark", "stop")

    def storage(self, pipeline: str) -> int:
        return storage_bytes(self.project / ".reconcile" / "data" / pipeline)

    def one_shot(self, pipeline: str, file: Path, name: str) -> tuple[float, int, int]:
        """`file` lands in the inbox, then `reconcile run -p pipeline`, timed as a whole
        process: (seconds, Spark jobs, bytes written)."""
        before, logs = self.storage(pipeline), event_logs(self.logs)
        served = job_starts(self.server_log) if self.server_log else 0
        started = time.perf_counter()
        arrive(file, self.project / "input" / pipeline, name)
        said = reconcile(self.project, "run", "-p", pipeline)
        seconds = time.perf_counter() - started
        if "step committed" not in said or "events +1000;" not in said:
            raise RuntimeError(f"run -p {pipeline}: {said}")
        if self.server_log:
            jobs = job_starts(self.server_log) - served
        else:
            jobs = sum(job_starts(log) for log in self._finished(logs))  # its JVM is gone
        return seconds, jobs, self.storage(pipeline) - before

    def _finished(self, before: set[Path], timeout: float = 120.0) -> set[Path]:
        """The event logs started since `before`, once none is in progress."""
        deadline = time.monotonic() + timeout
        while True:
            new = event_logs(self.logs) - before
            if not any(log.name.endswith(".inprogress") for log in new) or \
                    time.monotonic() > deadline:
                return new
            time.sleep(0.1)

    def start_runner(self, interval: float, log: Path, master: str | None = None) -> None:
        """`reconcile run -p r --continuous --interval S` (`--spark-master`: a JVM of its
        own, not the warm server's), its output read by a thread that notes when each line
        arrived."""
        own = ["--spark-master", master] if master else []
        self.runner = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "-C", str(self.project), "run", "-p", RUNNER,
             "--continuous", "--interval", f"{interval:g}", *own], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        threading.Thread(target=self._read, args=(log,), daemon=True).start()
        self._said("no new input", 0.0, 600.0)

    def _read(self, path: Path) -> None:
        assert self.runner is not None and self.runner.stdout is not None
        with path.open("w") as log:
            for line in self.runner.stdout:
                self.lines.append((time.time(), line.rstrip("\n")))
                log.write(f"{self.lines[-1][0]:.3f} {line}")
                log.flush()

    def _said(self, text: str, since: float, timeout: float = TIMEOUT) -> tuple[float, str]:
        """The first runner line holding `text` that arrived after `since` (epoch)."""
        assert self.runner is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for at, line in list(self.lines):
                if at >= since and f"{RUNNER}: " in line and text in line:
                    return at, line
                if at >= since and f"{RUNNER}: step failed" in line:
                    raise RuntimeError(f"the runner: {line}")
            if self.runner.poll() is not None:
                raise RuntimeError(f"the runner exited ({self.runner.returncode})")
            time.sleep(0.02)
        raise RuntimeError(f"the runner said no '{text}' within {timeout:.0f} s")

    def runner_step(self, file: Path, name: str) -> tuple[float, int, int, float]:
        """`file` lands in the runner's inbox; seconds until the runner said its step was
        committed (subtracting nothing), jobs, bytes written, and the step's own seconds."""
        before, logs = self.storage(RUNNER), event_logs(self.logs)
        jobs = job_starts(self.runner_log) if self.runner_log else 0
        arrived = arrive(file, self.project / "input" / RUNNER, name)
        at, line = self._said("step committed", arrived)
        if "events +1000;" not in line:
            raise RuntimeError(f"the runner: {line}")
        if self.runner_log is None:
            [self.runner_log] = event_logs(self.logs) - logs
        own = float(line.split(") in ")[1].split("s;")[0])
        return (at - arrived, job_starts(self.runner_log) - jobs,
                self.storage(RUNNER) - before, own)

    def stop_runner(self) -> int:
        """SIGTERM: the runner finishes its step, releases its lock, exits (0)."""
        assert self.runner is not None
        self.runner.send_signal(signal.SIGTERM)
        return self.runner.wait(timeout=300)

    def views(self, spark: SparkSession, pipeline: str) -> dict[str, DataFrame]:
        """Each view as its pipeline's last committed manifest pins it."""
        manifest = json.loads(reconcile(self.project, "state", "show", "-p", pipeline))
        data = self.project / ".reconcile" / "data"
        return {view: spark.read.format("delta")
                .option("versionAsOf", manifest["relations"][view]["version"])
                .load(str(data / manifest["relations"][view]["path"])) for view in VIEWS}


def start_streaming(spark: SparkSession, folder: Path, inbox: Path,
                    interval: float) -> Streaming:
    """The hand-written job: the users table and the four views as empty Delta tables, then a
    query over the inbox with Spark's file source (Parquet, schema given), `processingTime`
    trigger, `bench/streaming_anchor.py`'s `foreachBatch`. Its first batch is the load."""
    paths = {name: str(folder / name) for name in ("users", *VIEWS)}
    users_frame(spark).write.format("delta").save(paths["users"])
    spark.read.format("delta").load(paths["users"]).createOrReplaceTempView("users")
    schema = step_events(spark, 0, 1).schema
    spark.createDataFrame([], schema).createOrReplaceTempView("events")
    for view, query in VIEWS.items():  # in order: busy_kinds reads by_kind
        spark.sql(query).write.format("delta").save(paths[view])
        spark.read.format("delta").load(paths[view]).createOrReplaceTempView(view)
    streaming = Streaming(spark, paths)
    streaming.total_type = (spark.read.format("delta").load(paths["by_kind"])
                            .schema["total"].dataType.simpleString())
    streaming.query = (spark.readStream.schema(schema).parquet(str(inbox)).writeStream
                       .foreachBatch(streaming.each_batch)
                       .trigger(processingTime=f"{interval:g} seconds")
                       .option("checkpointLocation", str(folder / "_checkpoint")).start())
    return streaming


def batch_done(streaming: Streaming, after: int, rows: int) -> tuple[int, float]:
    """Wait for the first batch after `after` with input: (its id, when its writes were done:
    the trigger's start plus its `triggerExecution`, from the query's progress)."""
    query = streaming.query
    assert query is not None
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        for entry in query.recentProgress:
            if entry["batchId"] > after and entry["numInputRows"] > 0:
                if entry["numInputRows"] != rows:
                    raise RuntimeError(f"batch {entry['batchId']}: {entry['numInputRows']} rows")
                started = datetime.fromisoformat(entry["timestamp"]).timestamp()
                return entry["batchId"], started + entry["durationMs"]["triggerExecution"] / 1e3
        if not query.isActive:
            raise RuntimeError(f"the streaming query stopped: {query.exception()}")
        time.sleep(0.02)
    raise RuntimeError("no micro-batch within the timeout")


def micro_batch(streaming: Streaming, file: Path, inbox: Path, name: str,
                after: int) -> tuple[float, int, int]:
    """`file` lands in the streaming job's inbox: (seconds until its batch's writes were done,
    Spark jobs, the batch's id)."""
    jobs = jobs_started(streaming.spark)
    arrived = arrive(file, inbox, name)
    batch, done = batch_done(streaming, after, STEP_ROWS)
    return done - arrived, jobs_started(streaming.spark) - jobs, batch
