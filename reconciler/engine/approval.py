"""The program the last approved apply committed, recorded where a state-bucket writer cannot.

The manifest is the commit point, and the state backend is a bucket prefix that others may
be able to write: a pipeline's CI role, a backup job, a person with a narrow IAM policy.
Its SQL is checked as if a pull request wrote it (`desired.model.committed`), but a check of
*safety* cannot tell an approved program from another safe one: someone who can write only
the state prefix could point an existing output connector at their own broker, send a
`KAFKA_*` secret to it, or redefine the view an output emits, and the next `run` would do
it with no approval at all.

So every command that commits a program someone approved (a first deployment, a
bootstrap, a full refresh, an apply that finds the specs equal to the committed program,
`state rm`) first records it in the pipeline's *storage* folder, at
`<storage>/<pipeline>/approval` (`Layout.approval`): the lineage, the serial it was
approved at, a digest of the whole program document, each relation's fingerprint and each
connector's entry. Storage is where the pipeline's data lives; whoever can write it owns
the data already, and a writer of the state prefix alone cannot forge this record. A step
(`run`, `execute`, the runner) refuses a manifest whose program is not the recorded one,
naming the first connector or relation that differs.

The record is written before the manifest it approves: a crash between the two leaves the
old program committed under a newer record, which steps refuse until the interrupted
command (or `reconcile apply` with specs equal to the committed program) runs again. A
bootstrap's intermediate manifests keep the old program but are not `Running`, so no step
runs on them.

A pipeline deployed before the record existed has none: its first step records the
program it finds (trust on first use) and says so once on stderr.

Reading the record is one small storage read per process and program (`_verified`
remembers a match), with no JVM.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from reconciler.desired.model.fingerprint import stable_hash
from reconciler.engine.delta.files import FileStore
from reconciler.state.layout import Layout
from reconciler.support.errors import ReconcileError

RECORD_FORMAT = 1
_verified: set[tuple[str, str, str]] = set()  # (storage root, pipeline, digest) matched


def record_approval(layout: Layout, lineage: str, serial: int,
                    program: Mapping[str, Any]) -> None:
    """Record `program` as the one the pipeline of `lineage` runs from `serial` on."""
    record = {"format": RECORD_FORMAT, "lineage": lineage, "serial": serial,
              "program": stable_hash(program), **_summary(program)}
    store = FileStore.for_root(layout.root)
    store.write_bytes(layout.approval(), json.dumps(record, sort_keys=True).encode("utf-8"))
    _verified.add((layout.root, layout.pipeline, record["program"]))


def check_approval(layout: Layout, lineage: str, serial: int,
                   program: Mapping[str, Any], *, record_missing: bool = True) -> None:
    """Refuse (one line naming the pipeline and what differs) a committed program that is not
    the one the last approved command recorded; record it when nothing was ever recorded,
    unless a read-only caller (`status`) says not to (`record_missing`)."""
    digest = stable_hash(program)
    if (layout.root, layout.pipeline, digest) in _verified:
        return
    record = _read(layout)
    if record is None and not record_missing:
        return
    if record is None:
        logging.getLogger("reconciler").warning(
            "%s: no approval record in storage (deployed by an older version): recording the "
            "committed program (serial %d) as approved", layout.pipeline, serial)
        record_approval(layout, lineage, serial, program)
        return
    if record.get("lineage") != lineage or record.get("program") != digest:
        raise ReconcileError(
            f"pipeline '{layout.pipeline}': the committed manifest (serial {serial}) is not "
            f"the program the last approved apply recorded (serial {record.get('serial')}): "
            f"{_difference(record, lineage, program)}, so the state backend was written outside "
            "reconcile; no step runs it. `reconcile plan` shows it against the specs and "
            "`reconcile apply` commits the specs again")
    _verified.add((layout.root, layout.pipeline, digest))


def _summary(program: Mapping[str, Any]) -> dict[str, Any]:
    """What the refusal names: each relation's fingerprint, each connector's entry."""
    relations = {f"{kind} '{name}'": entry.get("fingerprint")
                 for kind, section in (("table", "tables"), ("view", "views"))
                 for name, entry in (program.get(section) or {}).items()}
    return {"relations": relations, "connectors": dict(program.get("connectors") or {})}


def _difference(record: Mapping[str, Any], lineage: str, program: Mapping[str, Any]) -> str:
    """The first object that differs, in words; never a value (a path or a server may be
    what an attacker wrote, and messages reach pull requests)."""
    if record.get("lineage") != lineage:
        return "its lineage differs (another deployment's state)"
    found = _summary(program)
    for name in sorted({*record.get("connectors", {}), *found["connectors"]}):
        old, new = record.get("connectors", {}).get(name), found["connectors"].get(name)
        if old != new:
            what = "added" if old is None else "removed" if new is None else "changed"
            return f"connector '{name}' {what}"
    for name in sorted({*record.get("relations", {}), *found["relations"]}):
        if record.get("relations", {}).get(name) != found["relations"].get(name):
            return f"{name} differs"
    return "its program differs"


def _read(layout: Layout) -> dict[str, Any] | None:
    store = FileStore.for_root(layout.root)
    try:
        data = store.read_bytes(layout.approval())
    except FileNotFoundError:
        return None
    try:
        record = json.loads(data)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        raise ReconcileError(f"pipeline '{layout.pipeline}': the approval record in storage "
                             "is not valid JSON; run `reconcile apply` to record it again")
    return record


def approved_lineage(layout: Layout) -> str | None:
    """The lineage the pipeline's approval record in storage holds; None without one. A
    destroy drops the catalog views of this lineage only (`operations.destroy`)."""
    record = _read(layout)
    lineage = None if record is None else record.get("lineage")
    return lineage if isinstance(lineage, str) else None
