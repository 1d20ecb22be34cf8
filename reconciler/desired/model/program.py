"""The pipeline program: tables, views and connectors, checked as a graph and fingerprinted.

A relation's fingerprint hashes its canonical definition together with the
fingerprints of the columns it reads (`desired.model.fingerprint`), so a change of
meaning propagates to exactly the views downstream that read it (like
Feldera's persistent ids or SQLMesh's parent hashes, but per column), while
comments, whitespace and keyword or identifier case do not count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from graphlib import CycleError, TopologicalSorter
from typing import Any

from sqlglot import exp

from reconciler.desired.analysis.memo import Analysis, ViewFacts
from reconciler.desired.analysis.output_key import check_declared_key
from reconciler.desired.analysis.view_parts import split_view
from reconciler.desired.analysis.view_refresh import Refresh, RefreshPolicy, refresh_of
from reconciler.desired.model.connectors import Connector, build_connectors
from reconciler.desired.model.fingerprint import derive, stable_hash
from reconciler.desired.model.resolution import check_view_resolution
from reconciler.desired.parsing.expectation_clauses import Expectation, check_columns, with_drops
from reconciler.desired.parsing.nesting import refuse_deep_recursion
from reconciler.desired.parsing.pipeline_sql import PipelineSource
from reconciler.desired.parsing.safety import check_bare_names
from reconciler.desired.parsing.sql import (
    ColumnDef,
    Location,
    TableStatement,
    ViewStatement,
    parse_file,
)
from reconciler.desired.settings.connector_options import (
    cleanup_option,
    cleanup_refusal,
)
from reconciler.desired.settings.project import PublishSpec
from reconciler.support.errors import ReconcileError, did_you_mean

PROGRAM_FORMAT = 1

@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[str, ...]
    materialized: bool
    location: Location
    sql: str
    fingerprint: str
    expectations: tuple[Expectation, ...] = ()

    def definition(self) -> dict[str, Any]:
        """What makes a table a different table: columns, key and materialization; and its
        expectations, when it has any (a document without them compares equal)."""
        return {
            "columns": [{"name": c.name, "type": c.type, "nullable": c.nullable,
                         **({"default": c.default} if c.default is not None else {})}
                        for c in self.columns],
            "primary_key": list(self.primary_key),
            "materialized": self.materialized,
            **_expectations(self.expectations),
        }


@dataclass(frozen=True)
class View:
    name: str
    query: str
    materialized: bool
    reads: tuple[str, ...]
    location: Location
    sql: str
    fingerprint: str
    refresh: Refresh = field(default_factory=lambda: Refresh("full", "not analysed"))
    lineage: dict[str, Any] | None = None  # column fingerprints read and given (derived)
    expectations: tuple[Expectation, ...] = ()
    part_of: str | None = None  # the view whose subquery this is (`desired.analysis.view_parts`)

    def definition(self) -> dict[str, Any]:
        """What makes a view a different view. Its refresh mode is not part of it: how a view
        is kept up to date does not change its contents."""
        return {"query": self.query, "materialized": self.materialized,
                **_expectations(self.expectations),
                **({"part_of": self.part_of} if self.part_of else {})}

    def describe_refresh(self) -> str:
        """How each step keeps it, and for a part whose (`desired.analysis.view_parts`)."""
        return self.refresh.describe() + (f"; part of view {self.part_of}" if self.part_of else "")


def _expectations(expectations: tuple[Expectation, ...]) -> dict[str, Any]:
    """A relation's expectations as its document holds them
    (`desired.parsing.expectation_clauses`)."""
    return {"expectations": [e.document() for e in expectations]} if expectations else {}


@dataclass(frozen=True)
class Program:
    """A validated pipeline program; relations in dependency order."""

    pipeline: str
    tables: dict[str, Table]
    views: dict[str, View]
    connectors: dict[str, Connector]
    order: tuple[str, ...] = field(default=())
    bootstrap_policy: str = "await_approval"  # from pipeline.yaml; not part of the program
    publish: PublishSpec | None = None  # pipeline.yaml: where it is published; not either
    renamed: dict[str, str] = field(default_factory=dict)  # pipeline.yaml: {old: new}
    # What analysing it found (`desired.analysis.memo`): what an apply keeps in the manifest,
    # and where a plan looks up the lineage of the committed program's views. Not part of
    # the program.
    analysis: Analysis | None = field(default=None, compare=False, repr=False)

    @property
    def fingerprint(self) -> str:
        """Fingerprint of the whole program, connectors included (plan staleness check)."""
        return stable_hash(self.document(with_sql=False))

    def relation(self, name: str) -> Table | View:
        return self.tables[name] if name in self.tables else self.views[name]

    def readers(self, name: str) -> list[str]:
        """Views that read `name` directly."""
        return sorted(view.name for view in self.views.values() if name in view.reads)

    def check_file_cleanup(self, allowed: bool) -> None:
        """Refuse, at the option's line in pipeline.yaml, an option that deletes or moves
        input files, unless the settings in force allow it (`connector_options`)."""
        if allowed:
            return
        for connector in self.connectors.values():
            key = cleanup_option(connector.options)
            if key is not None:
                where = connector.option_location(key)
                raise cleanup_refusal(f"connector '{connector.name}'", key,
                                      connector.options[key], file=where.file, line=where.line)

    def document(self, *, with_sql: bool = True) -> dict[str, Any]:
        """The JSON form stored in the manifest and compared by the diff."""
        tables = {}
        for table in self.tables.values():
            entry = {**table.definition(), "fingerprint": table.fingerprint}
            if with_sql:
                entry["sql"] = table.sql
            tables[table.name] = entry
        views = {}
        for view in self.views.values():
            entry = {**view.definition(), "reads": list(view.reads),
                     "fingerprint": view.fingerprint, "refresh": view.refresh.mode,
                     "lineage": view.lineage}
            if with_sql:
                entry["sql"] = view.sql
            views[view.name] = entry
        connectors = {c.name: {**c.definition(), **c.handling()}
                      for c in self.connectors.values()}
        renamed = {"renamed": dict(sorted(self.renamed.items()))} if self.renamed else {}
        return {"format": PROGRAM_FORMAT, "tables": tables, "views": views,
                "connectors": connectors, "order": list(self.order), **renamed}


def build_program(source: PipelineSource, memo: Mapping[str, Any] | None = None) -> Program:
    """Parse every SQL file, check names and the graph, and fingerprint each relation.

    `memo` is a committed manifest's analysis memo (`Manifest.analysis`,
    `desired.analysis.memo`), or None. A view whose statement and inputs are those of an
    entry there takes its analysis results (resolution, refresh, lineage, output columns)
    from it: the same deterministic functions of the same inputs. Every statement is still
    parsed and safety-checked: a memo never vouches for those. Only a caller that trusts
    the memo's writer passes one (a plan, from a backend no pull request can write:
    `plan.planner`); apply analyses every view. The program keeps what was found
    (`Program.analysis`) for the manifest.
    """
    analysis = Analysis(memo)
    statements: dict[str, TableStatement | ViewStatement] = {}
    for sql_file in source.sql_files:
        for statement in parse_file(sql_file):
            previous = statements.get(statement.name)
            if previous is not None:
                raise statement.location.error(
                    f"duplicate relation '{statement.name}' (first defined at "
                    f"{previous.location.file}:{previous.location.line})")
            statements[statement.name] = statement
    if not statements:
        raise ReconcileError("pipeline defines no tables or views", file=source.spec_path,
                             line=source.spec_lines.line_of(("sql",)))
    graph: dict[str, tuple[str, ...]] = {}
    for statement in statements.values():
        reads = statement.reads if isinstance(statement, ViewStatement) else ()
        for dependency in reads:
            if dependency not in statements:
                assert isinstance(statement, ViewStatement) and statement.tree is not None
                written = next((table for table in statement.tree.find_all(exp.Table)
                                if table.name.lower() == dependency), None)
                raise statement.error_at(
                    f"view '{statement.name}' reads unknown relation '{dependency}'"
                    + did_you_mean(dependency, statements), written)
        graph[statement.name] = reads
    order = _dependency_order(graph, statements)
    tables: dict[str, Table] = {}
    views: dict[str, View] = {}
    columns: dict[str, tuple[str, ...] | None] = {}  # to resolve unqualified column names
    resolved: dict[str, tuple[str, ...] | None] = {}  # ... and as Spark names them
    retracting: dict[str, bool] = {}  # whether each view's changes can delete rows
    # `order` with each view's parts (`desired.analysis.view_parts`) before it
    ordered: list[str] = []
    for name in order:
        statement = statements[name]
        ordered.append(name)
        if isinstance(statement, TableStatement):
            columns[name] = resolved[name] = tuple(column.name for column in statement.columns)
            check_columns(statement.expectations, columns[name], f"table '{name}'",
                          statement.location.file)
            tables[name] = Table(name=name, columns=statement.columns,
                                 primary_key=statement.primary_key,
                                 materialized=statement.materialized,
                                 location=statement.location, sql=statement.sql, fingerprint="",
                                 expectations=statement.expectations)
        else:
            with refuse_deep_recursion(statement.location.file, statement.location.line):
                facts = _analysed(statement, retracting, columns, resolved,
                                  policy=source.spec.refresh, analysis=analysis)
                split = split_view(statement, facts, columns, resolved, retracting,
                                   taken={*statements, *views}, analyse=partial(
                                       _analysed, policy=source.spec.refresh,
                                       analysis=analysis))
            if split is not None:
                for part, part_facts in split.parts:
                    views[part.name] = View(
                        name=part.name, query=part.query, materialized=True, reads=part.reads,
                        location=part.location, sql=part.sql, fingerprint="",
                        refresh=part_facts.refresh, part_of=name)
                    columns[part.name], resolved[part.name] = (part_facts.columns,
                                                               part_facts.resolved)
                    retracting[part.name] = part_facts.refresh.retracts
                ordered[-1:] = [*(part.name for part, _ in split.parts), name]
                statement, facts = split.statement, split.facts
            check_columns(statement.expectations, facts.columns, f"view '{name}'",
                          statement.location.file)
            check_declared_key(statement, facts.columns)
            views[name] = View(name=name, query=statement.query,
                               materialized=statement.materialized, reads=statement.reads,
                               location=statement.location, sql=statement.sql, fingerprint="",
                               refresh=facts.refresh, expectations=statement.expectations)
            columns[name], resolved[name] = facts.columns, facts.resolved
            retracting[name] = facts.refresh.retracts
    order = ordered
    derived = derive({name: table.definition() for name, table in tables.items()},
                     {name: {**view.definition(), "reads": view.reads}
                      for name, view in views.items()}, order, analysis.lineage)
    tables = {name: replace(table, fingerprint=derived[name].fingerprint)
              for name, table in tables.items()}
    views = {name: replace(view, fingerprint=derived[name].fingerprint,
                           lineage=derived[name].lineage) for name, view in views.items()}
    connectors = build_connectors(source, tables, views)
    return Program(pipeline=source.spec.name, tables=tables, views=views,
                   connectors=connectors, order=tuple(order),
                   bootstrap_policy=source.spec.bootstrap_policy,
                   publish=_publish(source, tables, views),
                   renamed=_renamed(source, statements), analysis=analysis)


def _publish(source: PipelineSource, tables: Mapping[str, Table],
             views: Mapping[str, View]) -> PublishSpec | None:
    """pipeline.yaml's `publish`, its `exclude` naming relations of the program."""
    publish = source.spec.publish
    for index, name in enumerate(publish.exclude if publish else []):
        if name not in tables and name not in views:
            raise ReconcileError(f"publish.exclude: no table or view '{name}' in the program"
                                 + did_you_mean(name, [*tables, *views]),
                                 file=source.spec_path,
                                 line=source.spec_lines.line_of(("publish", "exclude", index)))
    return publish


def _analysed(statement: ViewStatement, retracting: Mapping[str, bool],
              columns: Mapping[str, tuple[str, ...] | None],
              resolved: Mapping[str, tuple[str, ...] | None], *, policy: RefreshPolicy,
              analysis: Analysis) -> ViewFacts:
    """A view's checks and analyses, in the order their errors are raised: bare names,
    resolution, refresh; the last two's results from the memo when it has them, under the
    key of everything they read (`desired.analysis.memo`)."""
    name, expectations = statement.name, statement.expectations
    read_columns = {read: columns[read] for read in statement.reads}
    read_resolved = {read: resolved[read] for read in statement.reads}
    retracts = any(retracting.get(read, False) for read in statement.reads)
    key = analysis.view_key(statement.digest, read_columns, read_resolved, policy, retracts)
    assert statement.tree is not None  # parse_file parses every statement
    # A safety check, never taken from the memo (the state bucket is not trusted as code).
    check_bare_names(statement.tree, read_columns, name, statement.location.file,
                     statement.location.line, statement.lines)
    facts = analysis.known_view(key)
    if facts is None:
        analysis.analysed += 1
        own_resolved = check_view_resolution(statement.tree, statement.query, read_resolved,
                                             name, statement.error_at, statement.scopes)
        refresh = _refresh(statement, policy, retracts, read_columns, expectations)
        facts = ViewFacts(resolved=own_resolved, refresh=refresh,
                          columns=analysis.lineage(statement.query, read_columns).outputs)
    analysis.remember(key, facts)
    return facts


def _renamed(source: PipelineSource,
             statements: dict[str, TableStatement | ViewStatement]) -> dict[str, str]:
    """`renamed: {old: new}` of pipeline.yaml: each new name defined, each old one gone."""
    renamed = {}
    for key, value in source.spec.renamed.items():
        old, new = key.lower(), value.lower()  # relation names are case-insensitive
        problem = (f"'{new}' is not a table or view of the pipeline"
                   + did_you_mean(new, statements) if new not in statements
                   else f"'{old}' is still defined" if old in statements else None)
        if problem:
            raise ReconcileError(f"renamed: {old} -> {new}: {problem}", file=source.spec_path,
                                 line=source.spec_lines.line_of(("renamed", key)))
        renamed[old] = new
    return renamed


def _refresh(statement: ViewStatement, policy: RefreshPolicy, retracts: bool,
             read_columns: dict[str, tuple[str, ...] | None],
             expectations: tuple[Expectation, ...]) -> Refresh:
    """How a view is refreshed; with `refresh: incremental_strict` a recomputed view is an
    error, unless the view itself asks for it (TBLPROPERTIES ('refresh' = 'full')). The
    query analysed is the one steps run: filtered by its DROP ROW expectations."""
    assert statement.tree is not None
    drops = [e.condition for e in expectations if e.action == "drop"]
    refresh = refresh_of(with_drops(statement.tree, drops), read_columns,
                         opted_out=statement.full_refresh,
                         policy="incremental" if policy == "incremental_strict" else policy,
                         input_retracts=retracts)
    if policy == "incremental_strict" and refresh.mode == "full" and not statement.full_refresh:
        raise statement.location.error(
            f"view '{statement.name}' cannot be maintained incrementally ({refresh.reason}) and "
            "pipeline.yaml says refresh: incremental_strict; change the query or add "
            "TBLPROPERTIES ('refresh' = 'full')")
    return refresh


def _dependency_order(graph: dict[str, tuple[str, ...]],
                      statements: dict[str, TableStatement | ViewStatement]) -> list[str]:
    """Topological order (graphlib), ties broken by name so the order is deterministic."""
    sorter = TopologicalSorter(graph)
    try:
        sorter.prepare()
    except CycleError as error:
        cycle = list(error.args[1])
        first = statements[cycle[0]]
        raise first.location.error("cycle between views: " + " -> ".join(cycle)) from None
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        order.extend(ready)
        sorter.done(*ready)
    return order
