"""Compare the checkpointed program document with the desired one.

deepdiff finds every changed path; this module classifies those paths into
Feldera's `deployment_runtime_status_details` shape. Fingerprints are part of
the documents and precise to the column (`desired.model.fingerprint`), so a view that
reads a changed column shows up as a changed fingerprint and is classified as
modified, while a reader of other columns stays unchanged. The committed
document is first rewritten with the renames found (`plan.renames`) and its
fingerprints recomputed by this code, so a reconciler upgrade is never a
modification and a rename alone modifies nothing.

One change is not in any fingerprint: a table truncated because it cannot
evolve in place (`desired.model.table_evolution`) loses its rows, so every view downstream of
it is modified too (`rows_reset`), whatever columns it reads.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from reconciler.desired.analysis.lineage import LineageOf, view_lineage
from reconciler.desired.model.connectors import CONNECTOR_KEYS
from reconciler.desired.model.connectors import HANDLING_KEYS as CONNECTOR_HANDLING_KEYS
from reconciler.desired.model.fingerprint import rederive
from reconciler.desired.model.table_evolution import Evolution, evolution
from reconciler.desired.parsing.expectation_clauses import drop_conditions, expectation_changes
from reconciler.desired.settings.connector_roles import handling_changes, normal_entry
from reconciler.plan.diff_summary import CHANGES, ChangedNames, DiffSummary
from reconciler.plan.renames import apply_renames, find_renames
from reconciler.state.program import CommittedProgram
from reconciler.support.redaction import shown_value

_ARRAY_LIBRARIES = ("pandas", "numpy", "polars")


def _import_deepdiff() -> type:
    """Import DeepDiff without letting it pull in pandas and numpy.

    deepdiff imports them when installed, only to compare arrays and DataFrames; we
    compare JSON documents, and they cost ~0.5 s of every `plan`. If one is already
    loaded (an engine process), deepdiff gets it as usual.
    """
    blocked = [name for name in _ARRAY_LIBRARIES if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  # makes `import name` fail
    try:
        from deepdiff import DeepDiff
    finally:
        for name in blocked:
            del sys.modules[name]
    return DeepDiff


DeepDiff = _import_deepdiff()

Change = Literal["added", "removed", "modified", "unchanged"]

# Parts of an object that never make a relation or connector modified: the original
# SQL text (kept for diffs and reviews) and a connector's handling keys, which say how
# it reads or writes, not what (`desired.settings.connector_roles`, from `ConnectorSpec`'s fields:
# `on_error`, `on_bad_input`, bounds and client settings among its options, ...). They
# are removed before diffing (cheaper than deepdiff's per-path exclusion patterns); the
# document's evaluation order is not compared at all.
# A view's refresh mode (maintained or recomputed) is compared on its own
# (`refresh_changes`): it changes how steps keep the view, not its contents. A view's
# lineage (column fingerprints) is summed up by its fingerprint; reasons read it.
HANDLING_KEYS = CONNECTOR_HANDLING_KEYS
"""Connector keys that change how it reads, not what (`Connector.handling`): an apply
commits them with no reset (`handling_changes`)."""
IGNORED_KEYS = frozenset({"sql", "refresh", "lineage", *HANDLING_KEYS})

EMPTY_PROGRAM: dict[str, Any] = {"tables": {}, "views": {}, "connectors": {}}


@dataclass(frozen=True)
class ProgramDiff:
    """What changed between two program documents, object by object."""

    old: dict[str, Any]
    new: dict[str, Any]
    tables: dict[str, Change]
    views: dict[str, Change]
    connectors: dict[str, Change]
    changed_fields: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    rows_reset: frozenset[str] = frozenset()  # truncated tables and every view downstream
    renamed: dict[str, str] = field(default_factory=dict)  # new name -> old (plan.renames)
    evolutions: dict[str, Evolution] = field(default_factory=dict)  # each modified table's

    @cached_property
    def program(self) -> CommittedProgram:
        """`new` as typed records: what an apply, a preview or an environment runs."""
        return CommittedProgram.of(self.new)

    def keeps_rows(self, table: str) -> bool:
        """A table unchanged or evolving in place keeps its rows (and its inputs' offsets)."""
        change = self.tables.get(table)
        return change == "unchanged" or (change == "modified"
                                         and self.evolutions[table].possible)

    def fields(self, section: str, name: str) -> frozenset[str]:
        """Top-level fields of one object that deepdiff reported as changed."""
        return self.changed_fields.get((section, name), frozenset())

    def names(self, section: str, change: Change) -> list[str]:
        return sorted(name for name, kind in getattr(self, section).items() if kind == change)

    @property
    def has_program_changes(self) -> bool:
        return bool(self.renamed) or any(
            kind != "unchanged" for kind in (*self.tables.values(), *self.views.values()))

    @property
    def has_changes(self) -> bool:
        return self.has_program_changes or bool(self.refresh_changes) or bool(
            self.handling_changes) or bool(self.expectation_changes) or \
            self.summary.changes_connectors

    @cached_property
    def expectation_changes(self) -> dict[str, list[str]]:
        """Unchanged tables and views whose expectations changed (keep or fail: nothing is
        recomputed; `desired.parsing.expectation_clauses`): name -> what changed."""
        changes = {name: expectation_changes(self.old[section][name], self.new[section][name])
                   for section in ("tables", "views")
                   for name, change in getattr(self, section).items() if change == "unchanged"}
        return {name: found for name, found in changes.items() if found}

    @property
    def handling_changes(self) -> dict[str, list[str]]:
        """Unchanged connectors whose handling keys (`HANDLING_KEYS`) changed: name -> keys
        (a key a document leaves out read as its default)."""
        changes = {name: handling_changes(CONNECTOR_KEYS, self.old["connectors"][name],
                                          self.new["connectors"][name])
                   for name, change in self.connectors.items() if change == "unchanged"}
        return {name: keys for name, keys in changes.items() if keys}

    @cached_property
    def refresh_changes(self) -> dict[str, tuple[str, str]]:
        """Unchanged views whose refresh mode changes: (old, new). A manifest written before
        modes were recorded recomputed every view, hence `full`. Computed once: the plan's
        actions ask it for every view."""
        return {name: (self.old["views"][name].get("refresh", "full"),
                       self.new["views"][name].get("refresh", "full"))
                for name, change in self.views.items()
                if change == "unchanged" and self.old["views"][name].get("refresh", "full")
                != self.new["views"][name].get("refresh", "full")}

    @cached_property
    def summary(self) -> DiffSummary:
        """Feldera's diff shape; removed connectors of removed relations omitted. Computed
        once: `has_changes`, the plan's entry and an apply's manifest all ask for it."""
        return DiffSummary(
            *(ChangedNames(*(tuple(self._feldera_names(section, change)) for change in CHANGES))
              for section in ("tables", "views")),
            *(ChangedNames(*(tuple(self._connectors(direction, change)) for change in CHANGES))
              for direction in ("input", "output")))

    def status_details(self) -> dict[str, Any]:
        """`summary` as the manifest of an apply in flight records it."""
        return self.summary.document()

    def _feldera_names(self, section: str, change: Change) -> list[str]:
        """As Feldera lists them: a renamed relation is its old name removed, its new added."""
        renamed = {new: old for new, old in self.renamed.items() if new in self.new[section]}
        names = [name for name in self.names(section, change) if name not in renamed]
        if change == "added":
            names += renamed
        elif change == "removed":
            names += renamed.values()
        return sorted(names)

    def _connectors(self, direction: str, change: Change) -> list[str]:
        names = []
        for name, kind in self.connectors.items():
            if kind != change:
                continue
            document = (self.old if change == "removed" else self.new)["connectors"][name]
            if document["direction"] != direction:
                continue
            relation = document["relation"]
            if change == "removed" and relation not in self.new["tables"] \
                    and relation not in self.new["views"]:
                continue
            names.append(name)
        return sorted(names)


Texts = dict[tuple[str, str], dict[str, tuple[str, str]]]  # (section, name) -> key: old, new
_PLAIN = re.compile(r"[a-z0-9_]+")  # a name deepdiff's paths quote as ['name']
_MISSING = object()


def _comparable(old: dict[str, Any],
                new: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], Texts]:
    """What deepdiff needs to see of both documents: objects that differ, meaningful keys;
    and, left out of it, the relations whose only changes are one-line texts.

    Equal objects produce no report anyway; dropping them first with a plain `==`
    keeps a change in a 1,000-view program cheap to diff. An edit high in the graph
    changes the fingerprint, and nothing else, of hundreds of views downstream: each
    costs deepdiff about a third of a millisecond, and its report is one
    `values_changed` entry per key, which `_text_changes` writes as deepdiff would.
    """
    def keep(document: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
        return {section: {name: {k: v for k, v in entry.items() if k not in IGNORED_KEYS}
                          for name, entry in document.get(section, {}).items()
                          if other.get(section, {}).get(name) != entry
                          and (section, name) not in texts}
                for section in EMPTY_PROGRAM}

    texts: Texts = {}
    for section in ("tables", "views"):  # connectors: deepdiff's tree masks their values
        for name, entry in new.get(section, {}).items():
            before = old.get(section, {}).get(name)
            if before is not None and before != entry and _PLAIN.fullmatch(name):
                changed = _text_changes(before, entry)
                if changed:
                    texts[(section, name)] = changed
    return keep(old, new), keep(new, old), texts


def _text_changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """The meaningful keys in which `old` and `new` differ, when each is a one-line text on
    both sides (deepdiff reports such a change as old and new values alone, where it adds a
    line diff to texts of several lines); else none."""
    changed = {}
    for key in {*old, *new} - IGNORED_KEYS:
        before, after = old.get(key, _MISSING), new.get(key, _MISSING)
        if _identical(before, after):
            continue
        if not (type(before) is str and type(after) is str and _PLAIN.fullmatch(key)
                and "\n" not in before and "\n" not in after):
            return {}
        changed[key] = (before, after)
    return changed


def _identical(a: Any, b: Any) -> bool:
    """Equal, and of the same types throughout, as deepdiff compares (`1` is not `1.0`)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_identical(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_identical, a, b))
    return bool(a == b)


def diff_programs(old: dict[str, Any] | None, new: dict[str, Any],
                  lineage_of: LineageOf = view_lineage) -> ProgramDiff:
    """Classify a deepdiff of two program documents (`old` is None for a new pipeline).
    `lineage_of` derives the old document's fingerprints: `view_lineage`, or the new
    program's memo of it (`Program.analysis`), which its unchanged views share."""
    renamed = find_renames(old, new) if old else {}
    old = _current_split(rederive(apply_renames(old, renamed), lineage_of)) if old \
        else EMPTY_PROGRAM
    compared_old, compared_new, texts = _comparable(old, new)
    deep = DeepDiff(compared_old, compared_new, verbose_level=1, threshold_to_diff_deeper=0)
    changed: dict[tuple[str, str], set[str]] = defaultdict(set)
    for key, fields in texts.items():
        changed[key].update(fields)
    added: set[tuple[str, str]] = set()
    removed: set[tuple[str, str]] = set()
    for report, levels in deep.tree.items():
        for level in levels:
            path = level.path(output_format="list")
            key = (str(path[0]), str(path[1]))
            if len(path) == 2 and report == "dictionary_item_added":
                added.add(key)
            elif len(path) == 2 and report == "dictionary_item_removed":
                removed.add(key)
            else:
                changed[key].add(str(path[2]) if len(path) > 2 else "")
    sections: dict[str, dict[str, Change]] = {}
    for section in EMPTY_PROGRAM:
        kinds: dict[str, Change] = {}
        for name in {*old[section], *new[section]}:
            key = (section, name)
            kinds[name] = ("added" if key in added else "removed" if key in removed
                           else "modified" if key in changed else "unchanged")
        sections[section] = dict(sorted(kinds.items()))
    for section in ("tables", "views"):  # counting or failing on a row recomputes nothing
        for name, kind in sections[section].items():
            if kind == "modified" and _only_expectations(old[section][name], new[section][name],
                                                         changed[(section, name)]):
                sections[section][name] = "unchanged"
    evolutions = {name: evolution(old["tables"][name], new["tables"][name])
                  for name, kind in sections["tables"].items() if kind == "modified"}
    reset = _rows_reset(new, evolutions)
    for name in reset:
        if sections["views"].get(name) == "unchanged":
            sections["views"][name] = "modified"
    return ProgramDiff(
        old=old, new=new, tables=sections["tables"], views=sections["views"],
        connectors=sections["connectors"],
        changed_fields={key: frozenset(value) for key, value in changed.items()},
        raw=_shown_report(deep, texts), rows_reset=frozenset(reset), renamed=renamed,
        evolutions=evolutions,
    )


def _current_split(document: dict[str, Any]) -> dict[str, Any]:
    """A committed document's connectors with their options split as this code splits them
    (`connector_roles.normal_entry`): an option a newer version counts as handling is
    then no change of the connector's identity. Only the options move; the entry keeps
    its keys otherwise, as written."""
    connectors = {}
    for name, entry in document.get("connectors", {}).items():
        normal = normal_entry(CONNECTOR_KEYS, entry)
        connectors[name] = {**entry, "options": normal["options"],
                            "throughput_options": normal["throughput_options"]} \
            if "options" in entry else entry
    return {**document, "connectors": connectors}


def _only_expectations(old: dict[str, Any], new: dict[str, Any], fields: set[str]) -> bool:
    """Whether a relation changed only in expectations that keep or fail rows: its DROP ROW
    ones, and what it reads (a view's lineage), are as they were."""
    return (fields <= {"expectations", "fingerprint"} and "expectations" in fields
            and drop_conditions(old.get("expectations", []))
            == drop_conditions(new.get("expectations", []))
            and old.get("lineage") == new.get("lineage"))


def _shown_report(deep: Any, texts: Texts) -> dict[str, Any]:
    """deepdiff's report as JSON, with the text changes left out of it (`_comparable`) as
    it reports them, connector values as a plan shows them: the report quotes old and new
    values, and a connector's option or path may hold a secret."""
    raw: dict[str, Any] = json.loads(deep.to_json())
    for (section, name), fields in texts.items():
        for key, (before, after) in fields.items():
            raw.setdefault("values_changed", {})[f"root['{section}']['{name}']['{key}']"] = {
                "new_value": after, "old_value": before}
    for report in ("values_changed", "type_changes"):
        for level in deep.tree.get(report, []):
            path = level.path(output_format="list")
            entry = raw[report][level.path()]
            for side in ("old_value", "new_value"):
                if path[0] == "connectors" and side in entry:
                    entry[side] = shown_value(str(path[-1]), entry[side])
    return raw


def _rows_reset(new: dict[str, Any], evolutions: dict[str, Evolution]) -> set[str]:
    """Tables truncated (they cannot evolve in place) and every view downstream of one."""
    reset = {name for name, evolved in evolutions.items() if not evolved.possible}
    for name in new.get("order", []):
        view = new["views"].get(name)
        if view is not None and any(read in reset for read in view["reads"]):
            reset.add(name)
    return reset
