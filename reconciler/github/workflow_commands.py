"""Talking to the runner: log lines, annotations, step outputs and the step summary.

Log lines always start with a fixed prefix and the runner's workflow commands
are switched off while Spark runs pull-request SQL, so text from a pull request
can never be read by the runner as a ``::workflow-command::``.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from uuid import uuid4

import click

from reconciler.github.truncation import SUMMARY_BUDGET, truncate_markdown
from reconciler.support.errors import error_class


def log(message: str) -> None:
    """One log line; the fixed prefix keeps any text in it from being a workflow command."""
    click.echo("reconcile: " + " ".join(str(message).split()))


def annotate(level: str, message: str) -> None:
    """An error/warning annotation on the run, escaped as the Actions toolkit does."""
    escaped = str(message).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    click.echo(f"::{level} title=reconcile::{escaped}")


def mask(value: str | None) -> None:
    """Ask the runner to hide a secret in every later log line."""
    if value and "\n" not in value:
        click.echo(f"::add-mask::{value}")


def mask_url_parameters(url: str | None) -> None:
    """Hide the parameter values of a URL (`sc://host:15002/;token=...`, `?sig=...`)."""
    for value in re.findall(r"[;?&][^=;?&]+=([^;?&#]+)", url or ""):
        mask(value)


def log_traceback(error: BaseException) -> None:
    """Where `error` came from, for the run log: frames and classes, every line prefixed.

    The messages are left out: a public repository's run logs are public, and an
    engine error can quote a row of the pipeline's data.
    """
    for link in _chain(error):
        click.echo(f"reconcile:   | {error_class(link)} at:", err=True)
        for line in "".join(traceback.format_tb(link.__traceback__)).splitlines():
            click.echo(f"reconcile:   | {line}", err=True)


def _chain(error: BaseException) -> list[BaseException]:
    """The error and its causes, the innermost first (as Python prints them)."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.insert(0, current)
        current = current.__cause__ or current.__context__
    return chain


class Outputs:
    """Step outputs, appended to $GITHUB_OUTPUT at once so a crash still leaves them."""

    def __init__(self, path: Path | None):
        self.path = path
        self.values: dict[str, str] = {}

    def set(self, name: str, value: str | bool | None) -> None:
        text = ("true" if value else "false") if isinstance(value, bool) else str(value or "")
        self.values[name] = text
        if self.path is None:
            return
        delimiter = f"ghadelimiter_{uuid4().hex}"  # multi-line safe, and unguessable
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(f"{name}<<{delimiter}\n{text}\n{delimiter}\n")


def write_summary(path: Path | None, markdown: str) -> None:
    """Append to the step summary, cut to what the runner accepts."""
    if path is None:
        return
    room = SUMMARY_BUDGET
    while len(markdown.encode()) > SUMMARY_BUDGET:  # bytes: a character may take four
        room = room * 3 // 4
        markdown = truncate_markdown(markdown, room) + (
            "\n\n> **Truncated**: the full plan is in the `plan.json` / `plan.md` artifact.\n")
    with path.open("a", encoding="utf-8") as handle:
        handle.write(markdown.rstrip("\n") + "\n\n")


@contextmanager
def workflow_commands_off() -> Iterator[None]:
    """Stop the runner from obeying `::command::` lines while Spark runs the PR's SQL.

    Spark, the JVM and py4j write to the job log directly, and what they print can
    quote SQL from the pull request; a quoted `::set-output` must stay just text.
    """
    token = uuid4().hex
    print(f"::stop-commands::{token}", flush=True)
    try:
        yield
    finally:
        print(f"::{token}::", flush=True)
