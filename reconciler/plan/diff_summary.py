"""A pipeline's change in Feldera's shape (`deployment_runtime_status_details`), typed.

`ProgramDiff.summary` makes it; the plan carries it (`pipelines[].diff`) and an apply in
flight records it in the manifest (`status_details`). Its JSON (`document`: lists sorted,
keys sorted, `program_diff_error` always null) is part of what `plan_id` hashes, so it is
written exactly as Feldera's shape and read back to the same record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Change = Literal["added", "removed", "modified"]
CHANGES: tuple[Change, ...] = ("added", "removed", "modified")
RELATIONS = ("tables", "views")
DIRECTIONS = ("input", "output")


@dataclass(frozen=True)
class ChangedNames:
    """The names of one section that an apply adds, removes and modifies, each sorted."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()

    def of(self, change: Change) -> tuple[str, ...]:
        names: tuple[str, ...] = getattr(self, change)
        return names


@dataclass(frozen=True)
class DiffSummary:
    """Tables, views and connectors added, removed and modified (a renamed relation is its
    old name removed and its new one added, as Feldera lists it)."""

    tables: ChangedNames
    views: ChangedNames
    input_connectors: ChangedNames
    output_connectors: ChangedNames

    def relation_changes(self) -> dict[str, Change]:
        """Each added, removed or modified table and view by name."""
        return {name: change for change in CHANGES
                for names in (self.tables, self.views) for name in names.of(change)}

    @property
    def changes_connectors(self) -> bool:
        return any(names.of(change) for names in (self.input_connectors, self.output_connectors)
                   for change in CHANGES)

    def document(self) -> dict[str, Any]:
        details: dict[str, Any] = {
            "program_diff": dict(sorted(
                (f"{change}_{section}", list(getattr(self, section).of(change)))
                for section in RELATIONS for change in CHANGES)),
            "program_diff_error": None,
        }
        for direction in DIRECTIONS:
            names: ChangedNames = getattr(self, f"{direction}_connectors")
            details |= {f"{change}_{direction}_connectors": list(names.of(change))
                        for change in CHANGES}
        return dict(sorted(details.items()))

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> DiffSummary:
        program = document["program_diff"]

        def relations(section: str) -> ChangedNames:
            return ChangedNames(*(tuple(program[f"{change}_{section}"]) for change in CHANGES))

        def connectors(direction: str) -> ChangedNames:
            return ChangedNames(*(tuple(document[f"{change}_{direction}_connectors"])
                                  for change in CHANGES))

        return cls(relations("tables"), relations("views"), connectors("input"),
                   connectors("output"))
