"""Values a setting or a flag may take, in a module light enough for the CLI to import
before it parses its arguments (`--help` must not load pydantic or sqlglot)."""

from __future__ import annotations

import re
from typing import Literal, get_args

BootstrapPolicy = Literal["await_approval", "allow", "reject"]
POLICIES: tuple[str, ...] = get_args(BootstrapPolicy)

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d)?")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> float | None:
    """Seconds in a duration like `90s`, `30m`, `1h`, `2d` (a bare number is seconds); None
    when the text is not one."""
    match = _DURATION.fullmatch(text.strip())
    return None if match is None else float(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"]
