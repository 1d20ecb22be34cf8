"""What the example demos share: echo and run `reconcile` commands in one process.

Running the CLI in-process keeps one JVM for a whole demo (each `reconcile`
command started from a shell would start its own).
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from reconciler.cli.main import cli

console = Console(highlight=False)


def stage(title: str) -> None:
    console.rule(f"[bold cyan]{title}")


def reconcile(project: Path, *args: str) -> None:
    """Run one CLI command as a user would type it, and echo it."""
    first_lines = [a if "\n" not in a else a.splitlines()[0] + " ..." for a in args]
    console.print(f"[bold]$ reconcile {shlex.join(first_lines)}[/bold]", soft_wrap=True)
    try:
        cli(["-C", str(project), *args], standalone_mode=False)
    except SystemExit as exit_:
        parked = args[0] == "apply" and exit_.code == 3  # recorded, awaiting approval
        if exit_.code not in (0, None) and not parked:
            raise


@contextmanager
def project_copy(example: Path) -> Iterator[Path]:
    """A throw-away copy of an example, so demos are repeatable and leave the repo clean."""
    with tempfile.TemporaryDirectory(prefix=f"{example.name}-demo-") as folder:
        project = Path(folder) / example.name
        shutil.copytree(example, project, ignore=shutil.ignore_patterns(
            ".reconcile", "output", "demo.py", "__pycache__"))
        yield project
