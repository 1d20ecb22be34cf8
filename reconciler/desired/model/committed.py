"""A committed program (a manifest's `program`) checked as if a pull request wrote it.

A step runs the program the manifest holds, not the checkout's: the view SQL, the
tables' `DEFAULT` literals and the expectations' conditions all reach Spark from the
state backend. Whoever can write the state prefix (but not the repository or the
runner) could otherwise store a view whose SQL runs a program (`TRANSFORM ... USING`)
and have every later `run` execute it with the runner's credentials, and commit it
again. So the state bucket is not trusted as code: before a runtime is made from a
manifest, every relation's stored `sql` is parsed and checked by the very code that
checks a pull request (`desired.model.program.build_program`: the statement kinds, the
names, the function allow-list, substitution, bare names, resolution, expectations,
the graph; each connector as pipeline.yaml would declare it), and what the engine reads
beside the SQL (each relation's definition, what a view reads, each connector's
definition) must be what those checks build from it.

A refusal is one line naming the manifest and the object. Checking costs a parse of
each statement (about a millisecond a view); a process checks a given document once
(`_checked`, by its hash): a continuous runner pays it once per commit, not per step.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from reconciler.desired.model.connectors import CONNECTOR_KEYS
from reconciler.desired.model.program import Program, build_program
from reconciler.desired.parsing.pipeline_sql import PipelineSource, SqlSource
from reconciler.desired.settings.connector_kinds import connector_kind
from reconciler.desired.settings.connector_roles import same_entry, spec_values
from reconciler.desired.settings.documents import YamlDocument
from reconciler.desired.settings.project import NAME_PATTERN, ConnectorSpec, PipelineSpec
from reconciler.support.errors import ReconcileError

_NAME = re.compile(NAME_PATTERN)
_checked: set[str] = set()  # hashes of documents that passed, in this process only


def check_committed_program(pipeline: str, document: Mapping[str, Any], where: str) -> None:
    """Refuse (ReconcileError naming `where`, the manifest, and the object) a committed
    program whose SQL a pull request could not commit, or whose stored definitions are not
    what its SQL says."""
    digest = hashlib.sha256(json.dumps([pipeline, document], sort_keys=True,
                                       default=str).encode("utf-8")).hexdigest()
    if digest in _checked:
        return
    try:
        # (nesting: desired.parsing.nesting)
        program = build_program(_source(pipeline, document, where))
    except ReconcileError as error:
        if error.source is None:
            raise
        # The state bucket's text is not the project's: no line of it is echoed.
        raise ReconcileError(error.message, file=error.file, line=error.line,
                             column=error.column) from None
    _compare(program, document, where)
    _checked.add(digest)


def earlier_program(pipeline: str, document: Mapping[str, Any], where: str,
                    current: PipelineSpec) -> Program:
    """The program an earlier manifest committed (`reconcile rollback`), built again from
    its stored SQL and connectors by the checks a pull request's goes through, under the
    pipeline's settings as they are now (`current`: its default `refresh`)."""
    check_committed_program(pipeline, document, where)
    return build_program(_source(pipeline, document, where, refresh=current.refresh))


def _source(pipeline: str, document: Mapping[str, Any], where: str,
            refresh: Any = "full") -> PipelineSource:
    """The stored statements as one SQL source per relation, so an error names it (with
    `refresh` as the pipeline's default: a check compares no view's mode)."""
    files = []
    for kind, section in (("table", "tables"), ("view", "views")):
        for name, entry in _mapping(document.get(section), where, section).items():
            sql = entry.get("sql") if isinstance(entry, Mapping) else None
            if not isinstance(sql, str) or not sql.strip():
                raise ReconcileError(f"{kind} '{name}' has no SQL", file=where)
            files.append(SqlSource(f"{where} ({kind} '{name}')", sql.rstrip().rstrip(";") + ";"))
    if not _NAME.match(pipeline):
        raise ReconcileError(f"pipeline name '{pipeline}' is not a valid name", file=where)
    spec = PipelineSpec(name=pipeline, refresh=refresh,
                        connectors=_connector_specs(document, where))
    return PipelineSource(spec=spec, directory=Path("."), spec_path=where,
                          spec_lines=YamlDocument({}), sql_files=tuple(files))


def _compare(program: Program, document: Mapping[str, Any], where: str) -> None:
    """What the engine reads beside the SQL must be what the SQL says."""
    tables, views = document["tables"], document["views"]
    for name, entry in tables.items():
        _same(f"table '{name}'", name in program.tables
              and _definition(entry, program.tables[name].definition())
              == program.tables[name].definition(), where)
    for name, entry in views.items():
        built = program.views.get(name)
        _same(f"view '{name}'", built is not None
              and _definition(entry, built.definition()) == built.definition()
              and tuple(entry.get("reads", ())) == built.reads, where)
    for name, entry in document.get("connectors", {}).items():
        built_connector = program.connectors[name]
        # Read with each key's default, options split as this version splits them: a
        # manifest an earlier version wrote (`on_error` among the definition's keys, an
        # option classified otherwise) is the same connector (`connector_roles`).
        _same(f"connector '{name}'", same_entry(CONNECTOR_KEYS, {
            **built_connector.definition(), **built_connector.handling()}, entry), where)
    order = document.get("order")
    if order is not None and sorted(order) != sorted([*tables, *views]):
        raise ReconcileError("the stored order names other relations than the program",
                             file=where)


def _definition(entry: Mapping[str, Any], like: Mapping[str, Any]) -> dict[str, Any]:
    """`entry` cut down to the keys of a definition (fingerprints, lineage and the mode are
    derived, and recomputed by whoever reads them)."""
    return {key: entry[key] for key in like if key in entry}


def _same(subject: str, matches: bool, where: str) -> None:
    if not matches:
        raise ReconcileError(f"{subject}: the stored definition is not what its SQL says",
                             file=where)


def _connector_specs(document: Mapping[str, Any], where: str) -> list[ConnectorSpec]:
    """Each stored connector as pipeline.yaml would declare it, so that it goes through the
    same checks (its name, its relation, its type and options)."""
    specs = []
    for name, entry in _mapping(document.get("connectors", {}), where, "connectors").items():
        entry = _mapping(entry, where, f"connector {name}")
        side = "table" if entry.get("direction") == "input" else "view"
        # Every field the entry holds as pipeline.yaml would (`connector_roles`: type,
        # format, path, on_error, changes, ...), then those it holds otherwise.
        declared = {**spec_values(CONNECTOR_KEYS, entry), "name": name,
                    side: entry.get("relation"), "type": entry.get("type"),
                    "options": {**entry.get("options", {}), **entry.get("throughput_options", {})}}
        try:
            kind = connector_kind(str(entry.get("type")))
            endpoint = entry.get(kind.endpoint_key) if kind.endpoint_key else None
            if isinstance(endpoint, Mapping):  # e.g. Kafka's servers and topics, not a path
                declared |= {"path": None, "env_options": entry.get("env_options", {}),
                             **kind.declared_fields(dict(endpoint), str(entry.get("direction")))}
            specs.append(ConnectorSpec.model_validate(declared))
        except (ValidationError, ValueError) as error:
            problem = (error.errors()[0]["msg"].removeprefix("Value error, ")
                       if isinstance(error, ValidationError) else str(error))
            named = f"connector '{name}'"
            raise ReconcileError(problem if problem.startswith(named) else f"{named}: {problem}",
                                 file=where) from None
    return specs


def _mapping(value: Any, where: str, section: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ReconcileError(f"the program's '{section}' is not a mapping", file=where)
    return value
