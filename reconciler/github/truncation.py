"""Fitting Markdown into GitHub's limits without breaking how it renders."""

from __future__ import annotations

COMMENT_LIMIT = 65_536
"""GitHub rejects issue comments longer than this (characters)."""
COMMENT_BUDGET = 65_000
"""What we aim for: a margin under the limit for characters GitHub may count differently."""
SUMMARY_BUDGET = 1_000_000
"""Step summaries over 1 MiB are rejected by the runner; bytes, with a margin."""


def fit_comment(head: str, markdown: str, tail: str, budget: int = COMMENT_BUDGET) -> str:
    """The whole comment if it fits, else the plan cut with a note; head and tail always stay."""
    whole = head + markdown + tail
    if len(whole) <= budget:
        return whole
    note = ("\n\n> **This plan is truncated** ({shown:,} of {total:,} characters shown) to stay "
            "under GitHub's comment limit. The full plan is in this run's step summary and in "
            "the `plan.json` / `plan.md` artifact.\n")
    room = budget - len(head) - len(tail) - len(note) - 40
    kept = truncate_markdown(markdown, room)
    return head + kept + note.format(shown=len(kept), total=len(markdown)) + tail


def truncate_markdown(markdown: str, room: int) -> str:
    """Cut at a line break within `room` characters and close what the cut left open
    (a code fence, a <details>), so the rest of the comment still renders."""
    cut = markdown[:max(room - 32, 0)]
    if "\n" in cut:
        cut = cut[:cut.rfind("\n")]
    closers = ""
    fences = sum(1 for line in cut.splitlines() if line.lstrip().startswith("```"))
    if fences % 2:
        closers += "\n```"
    open_details = cut.count("<details") - cut.count("</details>")
    closers += "\n\n</details>" * max(open_details, 0)
    return cut + closers
