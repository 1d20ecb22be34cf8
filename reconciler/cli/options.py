"""Options several `reconcile` commands share: where state lives, how long to wait for a
lock, the bootstrap policy, where Spark runs and which objects to choose (`--select`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import click

from reconciler.desired.settings.setting_values import POLICIES, duration_seconds

Command = TypeVar("Command", bound=Callable[..., Any])
"""A command's function, as an option decorator takes and returns it."""


class Decorator(Protocol):
    """An option (or several), as click's `option` makes it: any command's function in,
    the same function out."""

    def __call__(self, function: Command, /) -> Command: ...


backend_option = click.option("--backend", "backend_url",
                              help="State backend URL (overrides reconcile.yaml).")
LOCK_TIMEOUT = "5m"
"""How long apply, approve, execute and a continuous run wait for another run's lock."""


def lock_option(default: str | None) -> Decorator:
    return click.option("--lock-timeout", type=Duration(), default=default, show_default=True,
                        help="How long to wait for another run's lock (90s, 5m, 1h).")


class Duration(click.ParamType[float, Any]):
    """`90s`, `5m`, `1h`, `2d` or seconds, as a number of seconds."""

    name = "duration"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        seconds = value if isinstance(value, float) else duration_seconds(str(value))
        if seconds is None:
            self.fail(f"{value!r} is not a duration (e.g. 90s, 5m, 1h)", param, ctx)
        return seconds


POLICY_CHOICE = click.Choice(POLICIES)


def engine_options(function: Command) -> Command:
    function = click.option("--spark-remote", help="Spark Connect URL, e.g. sc://host:15002.")(
        function)
    return click.option("--spark-master", help="Spark master URL, e.g. spark://host:7077.")(
        function)


def _set_json(ctx: click.Context, _param: Any, value: bool) -> None:
    state = ctx.find_root().obj
    if value and state is not None:  # None: the arguments parsed alone (the docs' test)
        state.as_json = True


def json_flag(document: str = "the keys of the text") -> Decorator:
    """`--json` for a command that reports `document`: it sets `CliContext.as_json` (read
    through `pass_cli`), so the command prints through `CliContext.emit` and its errors as
    `{"error": ...}`, every command alike."""
    return click.option(
        "--json", is_flag=True, expose_value=False, callback=_set_json,
        help=f"Print one JSON object on stdout ({document}; errors as {{\"error\": ...}}).")


json_option = json_flag()


select_option = click.option(
    "--select", "-s", "select", multiple=True, metavar="SELECTOR",
    help="Only these tables, views or connectors (dbt's syntax: name, name+ adds what reads "
         "it, +name what it reads; repeat it or separate by spaces or commas). Other "
         "changes are left out and stay pending.")


def bootstrap_options(function: Command) -> Command:
    """The options of every command that may bootstrap (apply, approve, refresh): `--silent`,
    the lock's timeout, the backend, where Spark runs and `--json`."""
    silent = click.option("--silent", is_flag=True,
                          help="Do not send recomputed views' contents to output connectors.")
    for option in reversed((silent, lock_option(LOCK_TIMEOUT), backend_option, engine_options,
                            json_option)):
        function = option(function)
    return function
