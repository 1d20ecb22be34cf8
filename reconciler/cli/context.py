"""What every `reconcile` command shares: its context, and how its errors end it.

The group turns the product's errors into one line on stderr and exit code 1 (`--debug`
shows the traceback instead; an error that points at a token is followed by its source
line and a caret, `ReconcileError.excerpt`), Spark dying under a command into one line
naming what it was doing, and SIGINT and SIGTERM into one line and exit codes 130 and 143,
as a shell reports them, once the command has unwound and released its locks
(`errors.Terminated`).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from reconciler.support.errors import ReconcileError, Terminated, private_message, public_message
from reconciler.support.progress import Reporter, shown_progress, terminal_progress
from state_backends import StateBackendError

if TYPE_CHECKING:
    from rich.console import Console


@dataclass
class CliContext:
    project_dir: Path
    debug: bool
    context: click.Context
    quiet: bool = False  # no progress (`progress.shown_progress`)
    as_json: bool = False  # the command's `--json`: one object on stdout (`emit`)
    emitted: bool = False  # whether that object was printed (an error prints one otherwise)

    during: str | None = None  # the stage and object Spark works on, for failure messages

    def enter(self, manager: Any) -> Any:
        """Enter a context manager for the rest of the command (closed when it ends)."""
        return self.context.with_resource(manager)

    def emit(self, document: Any) -> None:
        """The command's one JSON object on stdout (progress and errors stay on stderr)."""
        click.echo(json.dumps(document, indent=2, sort_keys=True, default=str))
        self.emitted = True

    def progress(self) -> Reporter:
        """The progress reporter (a live line on a terminal, plain lines elsewhere) that also
        remembers the stage."""
        shown = self.enter(terminal_progress(shown_progress(self.quiet)))

        def report(stage: str, item: str) -> None:
            self.during = f"{stage} {item}"
            shown(stage, item)

        return report


pass_cli = click.make_pass_decorator(CliContext)
WARM_SPARK_COMMANDS = frozenset({"apply", "approve", "run", "execute", "query", "plan"})
"""Commands whose Spark may be the project's warm server (`engine.spark.warm`); never
`github`, the Action's, which runs where its trusted settings say."""


class ReconcileGroup(click.Group):
    """A click group that turns product errors into one line and exit code 1."""

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if ctx.parent is None and name in WARM_SPARK_COMMANDS:  # the local CLI only
            from reconciler.engine.spark.warm import allow_attach

            allow_attach()
        return name, command, rest

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (KeyboardInterrupt, Terminated) as stop:  # 130 and 143, as a shell reports
            signal, code = ("SIGTERM", 143) if isinstance(stop, Terminated) else ("SIGINT", 130)
            state = ctx.obj if isinstance(ctx.obj, CliContext) else None
            during = f" during {state.during}" if state and state.during else ""
            click.echo(f"error: interrupted by {signal}{during}; locks released, the last "
                       "committed state stands", err=True)
            sys.exit(code)
        except (ReconcileError, StateBackendError) as error:
            state = ctx.obj if isinstance(ctx.obj, CliContext) else None
            if state and state.debug:
                raise
            click.echo(f"error: {private_message(error)}", err=True)  # row values: here only
            for shown in error.excerpt() if isinstance(error, ReconcileError) else ():
                click.echo(shown, err=True)  # the line and a caret under the token
            if state and state.as_json and not state.emitted:  # scripts read stdout
                state.emit({"error": public_message(error)})
            sys.exit(1)
        except Exception as error:
            # Spark dying (out of memory, a killed JVM, a lost Connect server) is one line,
            # not pages of Java; anything else is a bug and keeps its traceback.
            from reconciler.engine.spark.failures import engine_failure

            state = ctx.obj if isinstance(ctx.obj, CliContext) else None
            failure = engine_failure(error, state.during if state else None)
            if failure is None or (state and state.debug):
                raise
            click.echo(f"error: {failure}", err=True)
            sys.exit(1)


def console() -> Console:
    """rich's console for what a command prints on stdout (plans, query results)."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def outcomes_json(outcomes: list[Any]) -> dict[str, Any]:
    """`{"pipelines": [...]}`: each operation's outcome (`operations.outcome.Outcome`) with the keys
    its text line is made from: pipeline, result, message, serial, details."""
    return {"pipelines": [asdict(outcome) for outcome in outcomes]}
