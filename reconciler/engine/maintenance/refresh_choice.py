"""`refresh: auto`: per view and per step, maintain or recompute, whichever looks cheaper.

As Databricks' Enzyme does, the choice is made before any job runs, from what the engine
already knows:

* the change's share of the view's inputs: the rows of the data files this step added to
  or removed from the tables the view reads (directly or through other views), from the
  Delta logs' per-file stats, over the rows those tables hold;
* the seconds the view's last maintained refresh and last recompute took (the first
  recompute: the bootstrap that computed the view), kept in the manifest beside the view
  (`RelationRecord.timings`), with the share that refresh saw.

The rule, in order:

1. A change of at least `RECOMPUTE_SHARE` of the inputs' rows is recomputed: a maintained
   refresh reads, joins and writes per changed row, and near a recompute's size it does
   more work than the recompute.
2. Once both ways have been timed: recompute when the last recompute took less than the
   last maintained refresh, scaled up by how much larger this change is than that one's
   (never down: a maintained refresh has the fixed cost of several Spark jobs). Each way's
   time is measured again whenever it is chosen, so a recompute that grows slower with
   the data loses the choice again. (A maintained refresh that had to start an aggregate's
   state, dropped by an earlier recompute, is not taken as a maintained time: it is a
   recompute and more.) An aggregate whose state a recompute dropped is maintained again
   only when maintaining costs under `RESTART_SHARE` of a recompute: starting its state is
   a recompute and more, paid back only over later steps, and near-equal times made `auto`
   flip between the two on TPC-DS at scale 0.1 (28 of the 42 views it maintained in one
   step restarted their state, each costing more than either way).
3. Timed only as a recompute (the step after its bootstrap, or a view always recomputed so
   far): recompute when that took less than a maintained refresh's fixed cost here, i.e.
   the pipeline's fastest maintained refresh of any view so far, or before there is one
   the writer's estimate (`DeltaWriter.maintained_refresh_seconds`: 1 s on 2 cores for
   either writer, measured on the step bench's views). A view that cheap
   to recompute cannot be maintained faster; one that grows past it is maintained at its
   next step, and timed.
4. Otherwise maintain (the change's size unknown, or never timed).

The choice and its reason go to the step's log line, the manifest's `last_step.choices`
and `reconcile status`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from reconciler.state.program import CommittedProgram

RECOMPUTE_SHARE = 0.25
"""A change touching at least this share of a view's inputs' rows is recomputed."""
RESTART_SHARE = 0.5
"""An aggregate without state is maintained again only when maintaining it costs less than
this share of a recompute (rule 2)."""



@dataclass(frozen=True)
class Choice:
    """Maintain or recompute one view at one step, and why (one clause, for logs)."""

    recompute: bool
    reason: str
    share: float | None  # the change's share of the inputs' rows, when known

    def describe(self) -> str:
        return f"{'recomputed' if self.recompute else 'maintained'} ({self.reason})"


def choose(share: float | None, timings: dict[str, Any] | None, fixed_cost: float,
           restarts: bool = False) -> Choice:
    """The rule above, for a change of `share` of the inputs' rows (None: unknown), with
    `fixed_cost` the least a maintained refresh costs here (`maintained_fixed_cost`);
    `restarts`: maintaining would first start the view's state again."""
    if share is None:
        return Choice(False, "the change's size is unknown", None)
    percent = f"{share:.1%} of its inputs' rows"
    if share >= RECOMPUTE_SHARE:
        return Choice(True, f"the change is {percent}", share)
    maintained = (timings or {}).get("maintained")
    recomputed = (timings or {}).get("recomputed")
    if maintained is None and recomputed is not None:
        cheap = recomputed["seconds"] < fixed_cost
        return Choice(cheap, f"the change is {percent}; a recompute took "
                      f"{recomputed['seconds']:.1f}s, a maintained refresh costs at least "
                      f"about {fixed_cost:.1f}s", share)
    if maintained is None or recomputed is None:
        return Choice(False, f"the change is {percent}", share)
    seen = maintained.get("share") or 0.0
    expected = maintained["seconds"] * max(1.0, share / seen if seen else 1.0)
    if restarts and expected >= RESTART_SHARE * recomputed["seconds"]:
        return Choice(True, f"the change is {percent}; maintaining it about {expected:.1f}s "
                      f"would first start its state again, a recompute took "
                      f"{recomputed['seconds']:.1f}s", share)
    if recomputed["seconds"] < expected:
        return Choice(True, f"the change is {percent}; a recompute took "
                      f"{recomputed['seconds']:.1f}s, maintaining it about {expected:.1f}s",
                      share)
    return Choice(False, f"the change is {percent}; maintaining it about {expected:.1f}s, a "
                  f"recompute took {recomputed['seconds']:.1f}s", share)


def maintained_fixed_cost(timings: Iterable[dict[str, Any] | None], estimate: float
                          ) -> float:
    """The fastest maintained refresh among the views' `timings` (what a maintained refresh
    costs at least on this cluster), or `estimate` if none was timed."""
    seconds = [entry["maintained"]["seconds"] for entry in timings
               if entry and "maintained" in entry]
    return min(seconds, default=estimate)


def timed(timings: dict[str, Any] | None, *, recompute: bool, seconds: float,
          share: float | None = None) -> dict[str, Any]:
    """The view's timings with this refresh's time as its way's last (a bootstrap's
    computing of the view counts as a recompute)."""
    updated = dict(timings or {})
    if recompute:
        updated["recomputed"] = {"seconds": round(seconds, 3)}
    else:
        updated["maintained"] = {"seconds": round(seconds, 3), "share": share}
    return updated


def input_tables(program: CommittedProgram, view: str) -> set[str]:
    """The tables a view reads, directly or through other views."""
    tables: set[str] = set()
    pending = [view]
    while pending:
        for read in program.views[pending.pop()].reads:
            if read in program.views:
                pending.append(read)
            else:
                tables.add(read)
    return tables


def change_share(tables: set[str], touched: dict[str, int | None],
                 rows: dict[str, int | None]) -> float | None:
    """The rows this step touched in `tables` over the rows they hold (None if either is
    unknown for one of them)."""
    changed = [touched.get(table, 0) for table in tables]
    held = [rows.get(table) for table in tables]
    if None in changed or None in held:
        return None
    return sum(changed) / max(1, sum(held))  # type: ignore[arg-type]  # no None: see above
