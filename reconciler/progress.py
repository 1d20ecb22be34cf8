"""Progress on a terminal while Spark works: which stage, which object, how long.

Steps and bootstraps call `report(stage, item)`; on a terminal this drives a
rich progress line on stderr (gone when the command ends), elsewhere nothing.
Views refreshed at once report from several threads; `refreshed` (a view's end,
for timing reporters) is not shown.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

Reporter = Callable[[str, str], None]


def no_progress(stage: str, item: str) -> None:
    """The reporter when nobody watches (CI logs, pipes, tests)."""


@contextmanager
def terminal_progress(enabled: bool) -> Iterator[Reporter]:
    """A reporter that shows `stage: item` with elapsed time, per stage, on stderr."""
    if not enabled:
        yield no_progress
        return
    columns = (SpinnerColumn(), TextColumn("[bold]{task.fields[stage]}[/bold] {task.description}"),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        tasks: dict[str, int] = {}
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
