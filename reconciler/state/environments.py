"""A pipeline's pull-request environments, as the state backend records them.

An environment (`operations.environments`) is a pull request's program computed over
production's committed state at one serial (`base_serial`): the relations the change adds or
modifies are the environment's own Delta tables under its folder (`relations`), every other
one is production's, at the version that serial pins. The record is all that ties the
environment's files and catalog database to production: retention keeps every file the base
serial pins while the record exists (`operations.commit.collect_garbage`), and an update
compares the new program with `program`, the one the environment was last built from, so
that only what changed since is computed again.

The record comes from the state backend, which a pull request cannot write, but is checked
as a manifest is: typed fields, and every path the environment owns under its own folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reconciler.state.relations import RelationRecord
from reconciler.support.errors import ReconcileError


@dataclass(frozen=True)
class Environment:
    """One environment: where it is, what it was built from, what it holds."""

    name: str
    pipeline: str
    database: str
    lineage: str  # its catalog views' (`engine.publish`): production's lineage and its name
    root: str  # its folder: `<environments.storage>/<name>` (a `Layout` root)
    base_serial: int  # the production serial whose versions it reads
    desired_fingerprint: str  # the program it was built from (`plan.document`)
    program: dict[str, Any]  # that program's document, for the next update's diff
    relations: dict[str, RelationRecord] = field(default_factory=dict)  # its own tables
    created: str = ""
    updated: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "pipeline": self.pipeline, "database": self.database,
                "lineage": self.lineage, "root": self.root,
                "base_serial": self.base_serial,
                "desired_fingerprint": self.desired_fingerprint, "program": self.program,
                "relations": {name: record.to_json()
                              for name, record in sorted(self.relations.items())},
                "created": self.created, "updated": self.updated}

    @classmethod
    def from_json(cls, entry: Any, where: str) -> Environment:
        if not isinstance(entry, dict):
            raise ReconcileError("an environment's record is not an object", file=where)
        text = {key: entry.get(key) for key in ("name", "pipeline", "database", "lineage",
                                                "root", "desired_fingerprint", "created",
                                                "updated")}
        serial, program, relations = (entry.get("base_serial"), entry.get("program"),
                                      entry.get("relations"))
        if any(not isinstance(value, str) for value in text.values()) \
                or not isinstance(serial, int) or isinstance(serial, bool) \
                or not isinstance(program, dict) or not isinstance(relations, dict):
            raise ReconcileError(f"environment {str(text['name'])[:80]!r}: its record needs "
                                 "text fields, a base serial, a program and relations",
                                 file=where)
        records = {name: RelationRecord.from_json(record, f"relation '{name}'", where)
                   for name, record in relations.items()}
        root = str(text["root"]).rstrip("/") + "/"
        for name, record in records.items():
            if not record.path.startswith(root) or ".." in record.path.split("/") or (
                    record.state is not None and not record.state.path.startswith(root)):
                raise ReconcileError(f"environment {text['name']!r}: relation '{name}' is "
                                     "not under the environment's folder", file=where)
        return cls(**text, base_serial=serial, program=program,  # type: ignore[arg-type]
                   relations=records)


def environments_of(document: dict[str, Any], where: str) -> dict[str, Environment]:
    """The records of `environments.json`, by name."""
    found = {name: Environment.from_json(entry, where) for name, entry in document.items()}
    for name, environment in found.items():
        if environment.name != name:
            raise ReconcileError(f"environment {name!r} is recorded as "
                                 f"{environment.name!r}", file=where)
    return found


def environments_document(environments: dict[str, Environment]) -> dict[str, Any]:
    return {name: environment.to_json() for name, environment in sorted(environments.items())}
