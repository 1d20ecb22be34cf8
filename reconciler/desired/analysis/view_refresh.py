"""How each view is kept up to date: maintained, `auto`, or recomputed, and why.

`desired.analysis.shapes` says what a query is (a shape the engine maintains, or the reason it
cannot be); this module combines that with what the project asks (`refresh:` in
pipeline.yaml, a view's own `TBLPROPERTIES ('refresh' = 'full')`) and with its inputs
(whether they retract rows), into the `Refresh` the plan shows and the engine follows.
Kept apart from the shapes, since a shape is a property of the SQL alone and a refresh
is a decision that also depends on settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlglot import exp

from reconciler.desired.analysis.fallback import Fallback
from reconciler.desired.analysis.keyed import Columns, Keyed, occurrences
from reconciler.desired.analysis.shapes import Aggregate, Derived, Linear, Shape, analyse

RefreshPolicy = Literal["incremental", "incremental_strict", "auto", "full"]


@dataclass(frozen=True)
class Refresh:
    """How a view is kept up to date, and why when it is recomputed. `auto`: maintained,
    or recomputed at a step where that is cheaper (`engine.maintenance.refresh_choice`)."""

    mode: Literal["incremental", "auto", "full"]
    reason: str | None = None
    retracts: bool = True  # whether its changes can delete rows (readers' MIN/MAX need not)
    read_whole: tuple[str, ...] = ()  # keyed: relations whose change compares it in full

    def describe(self) -> str:
        if self.mode == "full":
            return f"recomputed each step: {self.reason}"
        return ("maintained or recomputed, whichever is cheaper" if self.mode == "auto"
                else "maintained incrementally") + (
            f" (a change to {', '.join(self.read_whole)} compares it in full)"
            if self.read_whole else "")


def refresh_of(query: str | exp.Query, columns: Columns, *, opted_out: bool,
               policy: RefreshPolicy, input_retracts: bool) -> Refresh:
    """The refresh of one view, given the policy and whether any of its inputs retracts."""
    if opted_out:
        return Refresh("full", "TBLPROPERTIES ('refresh' = 'full')")
    if policy == "full":
        return Refresh("full", "refresh: full in pipeline.yaml")
    try:
        shape = analyse(query, columns)
    except Fallback as reason:
        return Refresh("full", str(reason))
    mode: Literal["incremental", "auto"] = "auto" if policy == "auto" else "incremental"
    if isinstance(shape, Linear):
        return Refresh(mode, retracts=input_retracts)
    if not isinstance(shape, Aggregate):  # a match arriving retracts a NULL-padded row
        return Refresh(mode, retracts=True, read_whole=_read_whole(shape))
    # MIN/MAX over an input that deletes rows: the step recomputes the touched groups.
    input_retracts = input_retracts or not isinstance(shape.source, Linear)
    # A DISTINCT-only view over insert-only input only ever gains rows.
    retracts = input_retracts or bool(shape.calls) or shape.is_global
    return Refresh(mode, retracts=retracts, read_whole=_read_whole(shape.source))


def _read_whole(shape: Shape) -> tuple[str, ...]:
    """The relations a keyed shape reads whole (outside its key), sorted."""
    if isinstance(shape, Keyed):
        return tuple(sorted({table.name.lower() for table, key in
                             zip(occurrences(shape.select), shape.keys, strict=True)
                             if key is None}))
    if isinstance(shape, Derived):
        return _read_whole(shape.inner)
    return ()
