"""What an operation did to one pipeline, as the CLI, the runner and the Action report it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class OutcomeKind(StrEnum):
    """How an operation ended: a `StrEnum`, so `--json`, the runner's reports and the
    Action's replies hold the same string as before there was a type."""

    NO_CHANGES = "no-changes"
    DEPLOYED = "deployed"
    AWAITING_APPROVAL = "awaiting-approval"
    CANCELLED = "cancelled"
    BOOTSTRAPPED = "bootstrapped"
    REFRESHED = "refreshed"
    STEPPED = "stepped"
    IDLE = "idle"
    # A bad input file held every connector with input (`details["bad_input"]`, which a
    # step that committed the other connectors' input also has).
    INPUT_FAILED = "input-failed"


@dataclass
class Outcome:
    """What an operation did, for the CLI and the GitHub Action to report."""

    pipeline: str
    result: OutcomeKind
    message: str
    serial: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
