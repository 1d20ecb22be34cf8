"""The replies to an apply command: what was applied, or why it failed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.github.comment import fenced
from reconciler.github.guard import safe_login
from reconciler.operations.outcome import Outcome
from reconciler.plan.artifact import Plan


class ApplyFailed(Exception):
    """Applying a pipeline failed after others may have succeeded."""

    def __init__(self, pipeline: str, reason: str, done: list[Outcome], pending: list[str]):
        self.pipeline = pipeline
        self.reason = reason
        self.done = done
        self.pending = pending
        super().__init__(f"pipeline '{pipeline}': {reason}")



def _outcome_line(outcome: Outcome) -> str:
    """`grades`: **bootstrapped** (serial 3): recomputed `a`, `b`; created tables `t`."""
    details = outcome.details or {}
    extra = [f"{label} {', '.join(f'`{v}`' for v in _names(details[name]))}"
             for label, name in (("created tables", "created_tables"),
                                 ("evolved tables", "evolved_tables"),
                                 ("renamed", "renamed"),
                                 ("recomputed", "recomputed"),
                                 ("promoted from its environment", "promoted"),
                                 ("sent to outputs", "emitted"))
             if details.get(name)]
    message = outcome.message.removeprefix(f"{outcome.pipeline}: ")
    text = "; ".join(extra) if extra else message
    serial = f" (serial {outcome.serial})" if extra and outcome.serial is not None else ""
    return f"- `{outcome.pipeline}`: **{outcome.result}**{serial}: {text}"


def _names(values: Iterable[Any] | Mapping[str, Any]) -> list[str]:
    return [str(v) for v in (values.keys() if isinstance(values, Mapping) else values)]


def success_reply(login: str, plan: Plan, outcomes: list[Outcome]) -> str:
    head = f"### Applied\n\n@{safe_login(login)} approved plan `{plan.plan_id[:12]}`"
    if not outcomes:
        return head + ": it has no changes, so nothing was applied.\n"
    return head + ":\n\n" + "\n".join(_outcome_line(o) for o in outcomes) + "\n"


def failure_reply(login: str, failure: ApplyFailed) -> str:
    lines = [f"### Apply failed\n\n@{safe_login(login)}: applying `{failure.pipeline}` failed:",
             "", fenced(failure.reason), ""]
    if failure.done:
        lines += ["Applied before the failure:", *(_outcome_line(o) for o in failure.done), ""]
    if failure.pending:
        lines += [f"Not attempted: {', '.join(f'`{n}`' for n in failure.pending)}.", ""]
    lines.append(f"`{failure.pipeline}` keeps its last committed state (a failed bootstrap is "
                 "recorded as `Failed`). Fix the cause, push, and apply again: applying again "
                 "converges.")
    return "\n".join(lines) + "\n"
