"""A reset that would read again what its table keeps is refused, unless the plan says how
duplicates are avoided.

An input connector appends what it reads. Reset (what it reads changed: a Kafka
connector's servers, a `files` connector's format or parsing options) or replaced by a new
connector (a renamed one), its new generation reads from where a new connector starts: a
topic's earliest offsets, every file under its path, a Delta table's first version. When
the table it writes keeps its rows (unchanged, or evolving in place) and what it reads
now overlaps what a connector of that table read before (a topic in both, or a pattern
that may match one; the same path, or one inside the other), every row read before would
be appended a second time. Such a plan is refused, one line per connector, naming the
ways out:

- a Kafka connector's `startingOffsets: latest`: the new generation starts at the offsets
  the topic has when the apply runs (`engine.io.kafka_offsets.starting_offsets`), and the
  plan's reset says so;
- `on_reset: reread`: read it all again and append it again, knowingly; the plan's reset
  says so (`plan.actions`);
- `reconcile apply --full-refresh`: every table emptied and rebuilt from its sources;
- or the connector left as it was.

A table truncated in the same plan (it cannot evolve in place) or new starts empty, so
nothing is doubled there. Whether a connector ever ingested anything is not known
without the engine; a plan assumes it did.
"""

from __future__ import annotations

from typing import Any

from reconciler.desired.settings.connector_kinds import connector_kind, may_read_the_same
from reconciler.plan.actions import printable
from reconciler.plan.diff import ProgramDiff
from reconciler.support.redaction import redact_text


def reread_refusals(diff: ProgramDiff) -> list[str]:
    """One line for each reset or new input connector that would append again what its
    table keeps, with no way out chosen."""
    refusals = []
    for name, change in diff.connectors.items():
        if change not in ("modified", "added"):
            continue
        new = diff.new["connectors"][name]
        table = new["relation"]
        if new["direction"] != "input" or not diff.keeps_rows(table) or _avoided(new):
            continue
        before = [other for other, entry in diff.old["connectors"].items()
                  if entry.get("direction") == "input" and entry.get("relation") == table
                  and (other == name or diff.connectors.get(other) == "removed")
                  and may_read_the_same(entry, new)]
        if before:
            refusals.append(_refusal(name, new, change, [o for o in before if o != name]))
    return refusals


def _avoided(connector: dict[str, Any]) -> bool:
    """Whether the connector says how a reset avoids duplicates."""
    return connector.get("on_reset") == "reread" or (
        connector_kind(connector["type"]).reset_start(connector) == "latest")


def _refusal(name: str, connector: dict[str, Any], change: str, replaced: list[str]) -> str:
    where = redact_text(printable(str(connector.get("path"))))
    table = connector["relation"]
    kind = connector_kind(connector["type"])
    what = kind.reset_reads.format(where=where)
    subject = (f"input connector {name} is reset and" if change == "modified" else
               f"new input connector {name} (replacing {', '.join(sorted(replaced))})")
    return (f"{subject} would read {what} again into table {table}, which keeps the rows "
            f"read from there before: every one would be appended twice. Set "
            f"{kind.reset_advice()}on_reset: reread (append them again, knowingly), or run "
            "reconcile apply --full-refresh (rebuild every table from its sources), or leave "
            "the connector as it was")
