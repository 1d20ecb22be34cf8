"""Choosing objects of a pipeline: `--select` in dbt's graph syntax, for plan, apply, refresh.

`name` selects one table, view or connector; `name+` adds everything downstream that
reads it, `+name` everything upstream it reads, `+name+` both. A table or view brings
its own connectors along; an input connector sits upstream of its table and an output
connector downstream of its view.

A selected plan carries only the selected objects' changes: the others stay pending
for a later apply (Terraform's `-target`), and a note counts them. What an apply
commits is then a program that is part committed, part desired (`narrow`): selected
objects as the specs say, the others as the manifest holds them. For that program to
be one a step can run, two changes that touch (one reads the other, or a connector
feeds or follows a relation) are applied together or not at all: a selected change
next to an unselected changed neighbour is refused, in one line that says what to add
(`+name` or `name+`). A rename moves state under a new name that readers already use,
so a plan with a selection refuses an unselected rename. Removed objects are dropped
only when selected (by their old name).

`refresh` (`reconcile refresh`) marks the selected views modified even though their SQL
did not change: the bootstrap recomputes them from the state already stored, and their
readers only when selected too. Tables hold input, so they are never refreshed.
"""

from __future__ import annotations

import difflib
import graphlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from reconciler.desired.analysis.lineage import LineageOf
from reconciler.desired.model.program import Program
from reconciler.plan.actions import Action
from reconciler.plan.diff import ProgramDiff, diff_programs
from reconciler.support.errors import ReconcileError

_SELECTOR = re.compile(r"(\+?)([^+\s,]+)(\+?)")
REFRESH_REASON = "refresh requested: recomputed from the state already stored"


@dataclass(frozen=True)
class Selection:
    """What `--select` asked for, as written (part of the plan and of its id)."""

    selectors: tuple[str, ...]
    refresh: bool = False

    @classmethod
    def parse(cls, values: Iterable[str], *, refresh: bool = False) -> Selection | None:
        """`--select` values, each one or more selectors separated by spaces or commas;
        None when there are none (the whole pipeline)."""
        selectors = tuple(part for value in values for part in re.split(r"[\s,]+", value)
                          if part)
        for selector in selectors:
            if not _SELECTOR.fullmatch(selector):
                raise ReconcileError(f"--select {selector!r}: expected name, name+, +name or "
                                     "+name+")
        if not selectors:
            if refresh:
                raise ReconcileError("refresh needs --select: the views to recompute")
            return None
        return cls(selectors, refresh)

    @classmethod
    def from_document(cls, document: dict[str, Any] | None) -> Selection | None:
        """The selection a plan or a pending approval recorded (`document`)."""
        if not document:
            return None
        return cls(tuple(document["select"]), bool(document.get("refresh")))

    def document(self) -> dict[str, Any]:
        return {"select": list(self.selectors), "refresh": self.refresh}


def one_pipeline(programs: Sequence[Program], selection: Selection | None) -> None:
    """Names are a pipeline's own: a selection is for one pipeline at a time."""
    if selection is not None and len(programs) != 1:
        raise ReconcileError("--select chooses objects of one pipeline: add --pipeline "
                             f"({', '.join(program.pipeline for program in programs)})")


@dataclass(frozen=True)
class Narrowed:
    """A diff cut down to a selection: what the plan carries and what it leaves out."""

    selection: Selection
    diff: ProgramDiff
    selected: frozenset[str]
    left_out: tuple[str, ...]  # changed objects not selected, as "kind name"
    refreshed: frozenset[str]

    def actions(self, actions: Iterable[Action]) -> tuple[Action, ...]:
        """Only the selected objects' actions; a refreshed view's says why it is recomputed."""
        return tuple(replace(action, reasons=(REFRESH_REASON,))
                     if action.name in self.refreshed and action.action == "recompute"
                     and action.kind == "view" else action
                     for action in actions if action.name in self.selected)

    def notes(self) -> list[str]:
        chosen = " ".join(self.selection.selectors)
        if not self.left_out:
            return [f"--select {chosen}: nothing outside the selection changes"]
        return [f"--select {chosen}: {len(self.left_out)} change(s) left out and still "
                f"pending for a later apply: {', '.join(self.left_out)}"]


def narrow(full: ProgramDiff, committed: dict[str, Any], selection: Selection,
           lineage_of: LineageOf) -> Narrowed:
    """The diff between `committed` and the program an apply of `selection` commits."""
    graph = _Graph(full)
    selected = graph.resolve(selection)
    moved, changed = _changed(full)
    for name in sorted(changed):
        if name in full.renamed and name not in selected:
            raise ReconcileError(f"{graph.kind(name)} {name} is renamed from "
                                 f"{full.renamed[name]}: a rename is applied whole; add "
                                 f"{name} to --select")
    for reader, read in sorted(graph.edges()):
        if reader in moved and read in moved and (reader in selected) != (read in selected):
            raise ReconcileError(_refusal(graph, reader, read, reader in selected))
    diff = diff_programs(committed, _merged(full, selected, changed), lineage_of)
    refreshed = frozenset(name for name in selected if diff.views.get(name) == "unchanged"
                          and name in diff.new["views"]) if selection.refresh else frozenset()
    if refreshed:
        diff = replace(diff, views={name: "modified" if name in refreshed else change
                                    for name, change in diff.views.items()})
    left_out = tuple(f"{graph.kind(name)} {name}" for name in sorted(changed - selected))
    return Narrowed(selection, diff, frozenset(selected), left_out, refreshed)


def _refusal(graph: _Graph, reader: str, read: str, reader_selected: bool) -> str:
    if reader_selected:
        return (f"{graph.kind(reader)} {reader} depends on {graph.kind(read)} {read}, which "
                f"changes too but is not selected: select +{reader} (or add {read})")
    return (f"{graph.kind(reader)} {reader} depends on {graph.kind(read)} {read} and changes "
            f"with it but is not selected: select {read}+ (or add {reader})")


def _changed(full: ProgramDiff) -> tuple[set[str], set[str]]:
    """The objects whose state changes (added, removed, modified or renamed relations and
    connectors: their neighbours must agree with them), and every object with something
    to apply (those, and unchanged ones whose refresh mode, expectations or handling
    options change, which no neighbour reads)."""
    moved = {name for section in ("tables", "views", "connectors")
             for name, change in getattr(full, section).items() if change != "unchanged"}
    moved |= set(full.renamed)
    return moved, moved | set(full.refresh_changes) | set(full.expectation_changes) | set(
        full.handling_changes)


def _merged(full: ProgramDiff, selected: set[str], changed: set[str]) -> dict[str, Any]:
    """The program an apply of the selection commits: selected and unchanged objects as
    desired, changed ones left out as committed (`full.old`: renames applied, its
    fingerprints derived again by this code, as the next diff derives them)."""
    document: dict[str, Any] = {key: value for key, value in full.new.items()
                                if key not in ("tables", "views", "connectors", "order")}
    for section in ("tables", "views", "connectors"):
        entries = {}
        for name in sorted({*full.old[section], *full.new[section]}):
            source = full.new if name in selected or name not in changed else full.old
            if name in source[section]:
                entries[name] = source[section][name]
        document[section] = entries
    document["order"] = _order(document, full)
    return document


def _order(document: dict[str, Any], full: ProgramDiff) -> list[str]:
    """Evaluation order of the merged program: dependencies first, otherwise as the desired
    order (then the committed one) has them."""
    rank: dict[str, int] = {}
    for name in (*full.new.get("order", []), *full.old.get("order", [])):
        rank.setdefault(name, len(rank))
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for name in document["tables"]:
        sorter.add(name)
    for name, view in document["views"].items():
        sorter.add(name, *view["reads"])
    sorter.prepare()
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=lambda name: (rank.get(name, len(rank)), name))
        order.extend(ready)
        sorter.done(*ready)
    return order


class _Graph:
    """Tables, views and connectors of both programs, and which reads which."""

    def __init__(self, full: ProgramDiff) -> None:
        self.kinds: dict[str, str] = {}
        self.reads: dict[str, set[str]] = {}
        # Edges of both programs: a change must agree with what an object reads before it
        # and after it (a view that stops reading a removed table still reads it until
        # its own change is applied). Kinds as the desired program has them.
        for document in (full.old, full.new):
            for name in document["tables"]:
                self.kinds[name] = "table"
                self.reads.setdefault(name, set())
        # A view and its parts (`desired.analysis.view_parts`) are one object to select: each part
        # is how its view is computed, attached to it as its connectors are.
        self.attached: dict[str, set[str]] = {}
        for document in (full.old, full.new):
            for name, entry in document["views"].items():
                self.kinds[name] = "view"
                self.reads.setdefault(name, set()).update(entry["reads"])
                if entry.get("part_of"):
                    self.attached.setdefault(entry["part_of"], set()).add(name)
                    self.attached.setdefault(name, set()).add(entry["part_of"])
        for name in self.kinds:
            self.attached.setdefault(name, set())
        relations = set(self.kinds)
        for document in (full.old, full.new):
            for name, entry in document["connectors"].items():
                relation = entry["relation"]
                self.attached.setdefault(relation, set()).add(name)
                if name in relations:  # named as a relation: that node stands for both
                    continue
                self.kinds[name] = f"{entry['direction']} connector"
                reader, read = ((name, relation) if entry["direction"] == "output"
                                else (relation, name))
                self.reads.setdefault(name, set())
                self.reads.setdefault(reader, set()).add(read)
        self.aliases = {old: new for new, old in full.renamed.items()}
        self.readers: dict[str, set[str]] = {name: set() for name in self.kinds}
        for name, reads in self.reads.items():
            for read in reads:
                self.readers.setdefault(read, set()).add(name)

    def kind(self, name: str) -> str:
        return self.kinds[name]

    def edges(self) -> Iterable[tuple[str, str]]:
        return ((name, read) for name, reads in self.reads.items() for read in reads)

    def resolve(self, selection: Selection) -> set[str]:
        """The selected names, closures and attached connectors included."""
        selected: set[str] = set()
        for selector in selection.selectors:
            match = _SELECTOR.fullmatch(selector)
            assert match is not None  # checked by Selection.parse
            upstream, name, downstream = match.groups()
            name = self.aliases.get(name, name)
            if name not in self.kinds:
                close = difflib.get_close_matches(name, sorted(self.kinds), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ReconcileError(f"--select {selector!r}: no table, view or connector "
                                     f"named '{name}'{hint}")
            if selection.refresh and self.kinds[name] != "view":
                raise ReconcileError(f"--select {selector!r}: {self.kinds[name]} {name} is "
                                     "not refreshable: its data is input; select the views "
                                     "to recompute")
            selected |= {name}
            if upstream:
                selected |= self._closure(name, self.reads)
            if downstream:
                selected |= self._closure(name, self.readers)
        pending = list(selected)
        while pending:  # a part brings its view, which brings its other parts
            name = pending.pop()
            if self.kinds[name] in ("table", "view"):
                new = self.attached.get(name, set()) - selected
                selected |= new
                pending.extend(new)
        return selected

    @staticmethod
    def _closure(name: str, edges: dict[str, set[str]]) -> set[str]:
        found: set[str] = set()
        stack = [name]
        while stack:
            for neighbour in edges.get(stack.pop(), ()):
                if neighbour not in found:
                    found.add(neighbour)
                    stack.append(neighbour)
        return found
