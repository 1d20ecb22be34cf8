"""Progress while Spark works: which stage, which object, how long.

Steps and bootstraps call `report(stage, item)`. On a terminal this drives a rich
progress line on stderr (gone when the command ends); elsewhere (a CI log, `| tee`,
cron) each report is one plain line on stderr, stamped with the UTC time, and a view's
end (`refreshed`) says how long its refresh took, so a slow first apply reads as
progress, not a hang. `--quiet` (or `RECONCILE_PROGRESS=off` in the environment) shows
nothing. Views refreshed at once report from several threads.

`--log-level` sets the rest of what a command says on stderr (`set_log_level`): `error`
and `warn` show no progress, `info` (the default) shows it, `debug` adds the package's
own log records, tracebacks and Spark's warnings (`--debug`: tracebacks only).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # rich is loaded only for a terminal's display (`terminal_progress`)
    from rich.progress import TaskID

Reporter = Callable[[str, str], None]


def no_progress(stage: str, item: str) -> None:
    """The reporter when nobody watches (CI logs, pipes, tests)."""


def shown_progress(quiet: bool) -> str:
    """How progress is shown: `off` (`--quiet`, `RECONCILE_PROGRESS=off`), `live` on a
    terminal, else `lines`."""
    if quiet or os.environ.get("RECONCILE_PROGRESS", "").lower() == "off":
        return "off"
    return "live" if sys.stderr.isatty() else "lines"


def line_progress(stamp: Callable[[], str] | None = None) -> Reporter:
    """One line per report on stderr: `12:04:31Z refresh revenue_by_day`, and at a view's
    end `12:04:33Z view revenue_by_day refreshed in 1.8 s`."""
    started: dict[str, float] = {}
    lock = threading.Lock()
    clock = stamp or (lambda: datetime.now(UTC).strftime("%H:%M:%SZ"))

    def report(stage: str, item: str) -> None:
        now = time.monotonic()
        with lock:
            if stage == "refreshed":
                seconds = now - started.pop(item, now)
                line = f"view {item} refreshed in {seconds:.1f} s"
            else:
                if stage == "refresh":
                    started[item] = now
                line = f"{stage} {item}"
            print(f"{clock()} {line}", file=sys.stderr, flush=True)

    return report


@contextmanager
def terminal_progress(mode: str) -> Iterator[Reporter]:
    """The reporter for `mode` (`shown_progress`): on a terminal, `stage: item` with
    elapsed time, per stage, on stderr."""
    if mode != "live":
        yield line_progress() if mode == "lines" else no_progress
        return
    from rich.console import Console  # a terminal's display only: `--help` does without
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("[bold]{task.fields[stage]}[/bold] {task.description}"),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        tasks: dict[str, TaskID] = {}
        lock = threading.Lock()

        def report(stage: str, item: str) -> None:
            if stage == "refreshed":
                return
            with lock:
                show(stage, item)

        def show(stage: str, item: str) -> None:
            for other, task in tasks.items():
                if other != stage:
                    progress.update(task, visible=False)
            if stage not in tasks:
                tasks[stage] = progress.add_task(item, stage=stage, total=None)
            progress.update(tasks[stage], description=item, visible=True)

        yield report


LOG_LEVELS = ("error", "warn", "info", "debug")
_spark_log_level = "error"


def spark_log_level() -> str:
    """The embedded Spark's log4j level (`engine.spark.session`, when it starts): `error` unless
    `--log-level debug` made it `warn` (Spark's `info` is pages per job)."""
    return _spark_log_level


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever `sys.stderr` is when a record comes (a test's capture, a
    redirected stream), not to the one there was when the handler was made."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def set_log_level(level: str) -> None:
    """Route the package's log records (`logging.getLogger("reconciler")`) to stderr at
    `level`, and Spark's with `debug`. Progress and tracebacks are the caller's
    (`cli.main.cli`)."""
    logger = logging.getLogger("reconciler")
    logger.setLevel({"warn": logging.WARNING}.get(level, getattr(logging, level.upper())))
    if not logger.handlers:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    global _spark_log_level
    _spark_log_level = "warn" if level == "debug" else "error"
