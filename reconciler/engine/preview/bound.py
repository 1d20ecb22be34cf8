"""A time limit and a job budget for the data preview, whose SQL no one has reviewed yet.

The preview runs a pull request's view queries on the trusted Spark target, on every
push, before anyone has read them; a cross join of `explode(sequence(1, 100000000))`
is allow-listed SQL. So the preview runs under `PreviewBound`: every query it sends
goes through `run`, in a worker thread of its own whose jobs carry one job group
(classic Spark) or one tag (Spark Connect). A watchdog thread cancels that group or
tag, again and again until the query gives up, once the deadline has passed or the
preview has started more than `max_jobs` Spark jobs (classic: counted by the
status tracker; Connect, whose client sees no jobs: each query counts as one).

Two things would keep work out of reach of a cancellation, and are dealt with here:

* Spark's optimizer folds constant expressions on the driver, before any job
  starts: `sequence(1, 100000000)` becomes a 400 MB array there in seconds. While a
  bound is active the session excludes `ConstantFolding` and `ConvertToLocalRelation`
  (`spark.sql.optimizer.excludedRules`), so such expressions are evaluated by tasks,
  which a cancellation stops; results are the same, plans a little less tidy.
* Whatever still runs on the driver does not stop when cancelled: `run` waits at most
  until the deadline and a grace period, then leaves the query to its (daemon) thread,
  which the watchdog keeps cancelling, and reports the preview as out of time. The
  plan is posted either way; the process that made it ends, and its driver with it.

Spark fails a cancelled job at once, but its tasks stop only where they check for it,
between rows: a task expanding one huge generator row runs on until that row is done
(on a cluster, Spark's `spark.task.reaper.*` settings bound it).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from pyspark.sql import SparkSession

from reconciler.engine.spark.session import is_connect

T = TypeVar("T")

EXCLUDED_RULES = "spark.sql.optimizer.excludedRules"
DRIVER_SIDE_RULES = ("org.apache.spark.sql.catalyst.optimizer.ConstantFolding",
                     "org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation")
"""Rules that evaluate a query's expressions on the driver, out of a cancellation's reach."""

POLL_SECONDS = 0.1
GRACE_SECONDS = 5.0
"""How long `run` still waits after the deadline for a cancelled query to give up."""


class OutOfBound(Exception):
    """The preview ran out of time or jobs; `str()` says which, for the plan."""


class PreviewBound:
    """The deadline and job budget shared by every query of one preview (all pipelines)."""

    def __init__(self, spark: SparkSession, timeout_seconds: float, max_jobs: int) -> None:
        self.spark = spark
        self.timeout_seconds = timeout_seconds
        self.max_jobs = max_jobs
        self.deadline = time.monotonic() + timeout_seconds
        self.label = f"reconcile-preview-{uuid.uuid4().hex}"
        self.connect = is_connect(spark)
        self._queries = 0  # Connect: queries sent, each one job or more
        self._stop = threading.Event()
        self._active = threading.Event()  # a query is running: the watchdog may cancel it
        self._reason: str | None = None
        self._watchdog = threading.Thread(target=self._watch, name="preview-watchdog",
                                          daemon=True)
        self._saved_rules: str | None = None
        self._abandoned = False  # a query left running on the driver: keep cancelling

    def __enter__(self) -> PreviewBound:
        self._saved_rules = self.spark.conf.get(EXCLUDED_RULES, None)
        rules = [r for r in (self._saved_rules or "").split(",") if r]
        self.spark.conf.set(EXCLUDED_RULES, ",".join(dict.fromkeys([*rules,
                                                                     *DRIVER_SIDE_RULES])))
        self._watchdog.start()
        return self

    def __exit__(self, *_: object) -> None:
        if not self._abandoned:
            self._stop.set()
        if self._saved_rules is None:
            self.spark.conf.unset(EXCLUDED_RULES)
        else:
            self.spark.conf.set(EXCLUDED_RULES, self._saved_rules)

    @property
    def reason(self) -> str | None:
        """Why the preview stopped, once it ran out of time or jobs; else None."""
        if self._reason is None:
            self._reason = self._exhausted()
        return self._reason

    def run(self, query: Callable[[], T]) -> T:
        """`query()`'s result, computed under the bound; `OutOfBound` when it ran out
        before or while it ran (whatever error the cancelled query raised is that)."""
        if self.reason or self._spent():
            raise OutOfBound(self._reason or "")
        if self.connect:
            self._queries += 1
        outcome: dict[str, Any] = {}
        worker = threading.Thread(target=self._in_worker, args=(query, outcome),
                                  name="preview-query", daemon=True)
        self._active.set()
        worker.start()
        worker.join(max(0.0, self.deadline - time.monotonic()) + GRACE_SECONDS)
        if worker.is_alive():  # stuck on the driver: leave it to the watchdog
            self._reason, self._abandoned = self._reason or self._time_reason(), True
            raise OutOfBound(self._reason)
        self._active.clear()
        if self.reason:
            raise OutOfBound(self.reason)
        if "error" in outcome:
            raise outcome["error"]
        value: T = outcome["value"]
        return value

    def _in_worker(self, query: Callable[[], Any], outcome: dict[str, Any]) -> None:
        """Runs in the query's own thread: the group or tag is per thread in PySpark."""
        self._label_thread()
        try:
            outcome["value"] = query()
        except Exception as error:  # handed to `run`'s thread
            outcome["error"] = error

    def _label_thread(self) -> None:
        if self.connect:
            self.spark.addTag(self.label)
        else:
            self.spark.sparkContext.setJobGroup(self.label, "reconcile plan --preview",
                                                interruptOnCancel=True)

    def _watch(self) -> None:
        """Cancel the preview's queries while it is out of time or jobs."""
        while not self._stop.wait(POLL_SECONDS):
            if self._active.is_set() and self.reason:
                self._cancel()

    def _cancel(self) -> None:
        try:
            if self.connect:
                self.spark.interruptTag(self.label)
            else:
                self.spark.sparkContext.cancelJobGroup(self.label)
        except Exception:  # the session may be stopping: next poll
            pass

    def _exhausted(self) -> str | None:
        if time.monotonic() >= self.deadline:
            return self._time_reason()
        if self._jobs() > self.max_jobs:
            return self._jobs_reason()
        return None

    def _spent(self) -> bool:
        """Whether the budget has no job left for another query (it says why from now)."""
        if self._jobs() >= self.max_jobs:
            self._reason = self._jobs_reason()
        return self._reason is not None

    def _jobs_reason(self) -> str:
        return (f"the preview ran out of its job budget ({self.max_jobs} Spark jobs, "
                "preview.max_jobs in reconcile.yaml)")

    def _time_reason(self) -> str:
        return (f"the preview ran out of time ({self.timeout_seconds:g} s, "
                "preview.timeout_seconds in reconcile.yaml)")

    def _jobs(self) -> int:
        """Spark jobs the preview started (Connect: the queries it sent)."""
        if self.connect:
            return self._queries
        return len(self.spark.sparkContext.statusTracker().getJobIdsForGroup(self.label))
