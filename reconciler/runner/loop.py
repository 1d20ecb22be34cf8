"""`reconcile run --continuous`: a step every interval, as a service.

A pipeline is changed by applies while it runs, so the runner outlives them:

* **Applies.** A step that finds the pipeline locked waits for the lock (the
  backend's `lock_timeout`, Terraform's `-lock-timeout`), then runs with the
  program the apply committed: each step reads the manifest afresh.
* **Pauses.** A pipeline left `AwaitingApproval` or `Failed` is paused (said
  once, checked again every interval) while the others go on; `reconcile
  approve` or an apply resumes it.
* **Faults.** A failed step commits nothing (the manifest is the only commit
  point), so the next attempt starts from the last committed state. A lock the
  step could not release (the backend went away) is released before the next
  attempt, or that attempt would wait for the runner's own lock. Failures
  back off exponentially, with jitter, up to `BACKOFF_MAX`; `max_failures` rounds
  in a row that all failed end the runner with exit code 1 and the last cause.
* **Signals.** SIGTERM or SIGINT lets the step under way finish (or fail before
  its commit), then the runner returns: its lock is released, exit code 0. A
  second signal stops at once; the lock is released on the way out.

Each step prints one line (the operation's message); a pipeline with no new
input says so once, not every interval.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from types import FrameType
from typing import TYPE_CHECKING, Any

from reconciler.operations.outcome import OutcomeKind
from reconciler.support.errors import PipelinePaused, QuotesData, ReconcileError, public_message
from state_backends.base import default_who

if TYPE_CHECKING:
    from reconciler.runner.metrics import RunnerMetrics

BACKOFF_MAX = 300.0
"""The longest wait between rounds after failures, in seconds."""
MAX_FAILURES = 5
"""Rounds in a row in which every step failed before the runner gives up."""
HEARTBEAT = 60.0
"""The longest a runner goes without writing its report (`RunnerReports`)."""


class RunnerReports:
    """What the runner says of each pipeline for `reconcile status` (`runner.json` in the
    backend): its state (`running`, `waiting_for_lock`, `paused`, `failing`, `stopped`),
    since when, why, and the input connectors a bad file holds.

    Written when something changes, and at least every `HEARTBEAT` seconds so that a
    runner that died shows as silent; a write that fails (the backend is away) is
    skipped, the next one tries again."""

    def __init__(self, write: Callable[[str, dict[str, Any]], None], interval: float):
        self.write, self.interval = write, interval
        self.last: dict[str, tuple[tuple[Any, ...], dict[str, Any], float]] = {}

    def say(self, pipeline: str, state: str, detail: str = "",
            bad_input: dict[str, str] | None = None) -> None:
        key = (state, detail, tuple(sorted((bad_input or {}).items())))
        now = time.time()
        previous = self.last.get(pipeline)
        if previous is not None and previous[0] == key and now - previous[2] < HEARTBEAT:
            return
        since = previous[1]["since"] if previous is not None and previous[0][0] == state \
            else _iso(now)
        report = {"state": state, "detail": detail, "bad_input": dict(bad_input or {}),
                  "since": since, "updated_at": _iso(now), "who": default_who(),
                  "pid": os.getpid(), "interval": self.interval}
        try:
            self.write(pipeline, report)
        except Exception:  # the backend is away: the step's own error says so
            return
        self.last[pipeline] = (key, report, now)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def run_continuously(step: Callable[[str], Any], names: Sequence[str], interval: float, *,
                     echo: Callable[[str], None], release: Callable[[str, str], None],
                     max_failures: int = MAX_FAILURES,
                     metrics: RunnerMetrics | None = None,
                     reports: RunnerReports | None = None) -> None:
    """Run `step(name)` for each pipeline every `interval` seconds until a signal stops it.

    `step` returns an outcome with a `message` and a `result` (`stepped`, `idle` when
    there was no new input, `input-failed` when a bad file held every connector that had
    input); it raises `PipelinePaused` for a pipeline that is not running.
    `release(name, lock_id)` releases a lock a failed step left behind. `metrics` and
    `reports`, when given, record every step's result."""
    record = metrics.record if metrics is not None else lambda *_: None
    say = reports.say if reports is not None else lambda *_, **__: None
    stop = threading.Event()
    said: dict[str, str] = {}  # what each pipeline last said, so a repeat stays quiet
    stranded: dict[str, str] = {}  # our locks a failed step could not release
    said_held: set[str] = set()  # "pipeline: error" of each connector a bad file holds
    failures, last_error = 0, ""
    with _stop_on_signals(stop, echo):
        while not stop.is_set():
            failed = 0
            for name in names:
                if stop.is_set():
                    break
                try:
                    if name in stranded:
                        release(name, stranded[name])
                        del stranded[name]
                    outcome = step(name)
                    record(name, outcome.result, outcome)
                    held = outcome.details.get("bad_input", {})
                    say(name, "running", bad_input=held)
                    idle = outcome.result == OutcomeKind.IDLE
                    message = f"{name}: idle" if idle else outcome.message
                    if outcome.result == OutcomeKind.STEPPED or (
                            idle and said.get(name) != message):
                        echo(outcome.message)
                    for error in sorted(held.values()):  # each once while it holds
                        if f"{name}: {error}" not in said_held:
                            echo(f"{name}: input held: {error}")
                    said_held = {line for line in said_held if not line.startswith(
                        f"{name}: ")} | {f"{name}: {error}" for error in held.values()}
                except PipelinePaused as paused:
                    record(name, "paused")
                    say(name, "paused", str(paused))
                    message = f"{name}: paused: {paused} (checked every {interval:g}s)"
                    if said.get(name) != message:
                        echo(message)
                except Exception as error:  # any fault: nothing was committed, try again
                    if lock := getattr(error, "unreleased_lock", None):  # state_backends
                        stranded[name] = lock
                    record(name, "failed")
                    failed += 1
                    message = last_error = f"{name}: step failed: {public_message(error)}"
                    say(name, "failing", public_message(error))  # runner.json: public
                    echo(f"{name}: step failed: {_logged(error)}")
                said[name] = message
            failures = failures + 1 if failed and failed == len(names) else 0
            if failures >= max_failures:
                raise ReconcileError(f"{failures} rounds of steps in a row failed; last: "
                                     f"{last_error}")
            pause = interval if not failures else min(BACKOFF_MAX, interval * 2 ** failures)
            stop.wait(pause * (random.uniform(0.8, 1.2) if failures else 1.0))
    for name in names:
        say(name, "stopped")
    echo("stopped: the last step finished, the lock is released")


def _logged(error: BaseException) -> str:
    """A failed step in the runner's own log: an expectation's violating rows are for
    whoever runs it (their keys help find the rows); anything else as others see it."""
    return error.detail if isinstance(error, QuotesData) else public_message(error)


@contextmanager
def _stop_on_signals(stop: threading.Event, echo: Callable[[str], None]) -> Iterator[None]:
    """SIGTERM and SIGINT set `stop` (the current step finishes); a second one interrupts."""

    def handle(number: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt  # the lock's context manager releases it on the way out
        stop.set()
        echo(f"{signal.Signals(number).name}: stopping after the current step "
             "(again to stop at once)")

    previous = {number: signal.signal(number, handle)
                for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
