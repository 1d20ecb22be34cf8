"""The SQL an operator runs by hand: `reconcile execute` (INSERT, DELETE) and `query`.

Both work on a pipeline's committed state: `execute` changes a table and runs one
step (through `operations.step.run_pipeline`, under the pipeline's lock) so every view
reflects it; `query` reads materialized tables and views at the versions the
manifest pins. They are an operator's commands, not held to the pull request's
allow-lists (see docs/security.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reconciler.desired.settings.project import Project
from reconciler.operations.engine import Engine
from reconciler.state.reader import committed_program, pipeline_layout, read_manifest
from reconciler.state.relations import RelationRecord
from reconciler.support.errors import ReconcileError
from state_backends import StateBackend

if TYPE_CHECKING:  # a step's modules: `execute` imports them when it runs one, `query` never
    from reconciler.engine.step import StepResult
    from reconciler.operations.outcome import Outcome


def _parse_single(sql: str, expected: type | tuple[type, ...], what: str) -> Any:
    import sqlglot
    from sqlglot.errors import ParseError

    from reconciler.desired.parsing.sql import DIALECT

    try:
        statements = [s for s in sqlglot.parse(sql, dialect=DIALECT) if s is not None]
    except ParseError as error:
        raise ReconcileError(f"SQL syntax error: {str(error).splitlines()[0]}") from None
    if len(statements) != 1 or not isinstance(statements[0], expected):
        raise ReconcileError(f"expected exactly one {what} statement")
    return statements[0]


def execute_statement(project: Project, backend: StateBackend, engine: Engine, name: str,
                      sql: str) -> tuple[Outcome, StepResult]:
    """`INSERT INTO t ...` or `DELETE FROM t WHERE ...`, then one step so views reflect it."""
    from sqlglot import exp

    statement = _parse_single(sql, (exp.Insert, exp.Delete),
                              "INSERT INTO <table> or DELETE FROM <table>")
    if isinstance(statement, exp.Delete):
        return _execute_delete(project, backend, engine, name, statement)
    return _execute_insert(project, backend, engine, name, statement)


def _target_table(runtime: Any, name: str, table: str, verb: str) -> None:
    if table not in runtime.program.tables:
        raise ReconcileError(f"'{table}' is not a table of pipeline '{name}' "
                             f"(only tables accept {verb})")


def _execute_insert(project: Project, backend: StateBackend, engine: Engine, name: str,
                    insert: Any) -> tuple[Outcome, StepResult]:
    from sqlglot import exp

    from reconciler.desired.parsing.sql import DIALECT
    from reconciler.engine.statements import insert_rows
    from reconciler.engine.step import insert_app_id
    from reconciler.operations.step import run_pipeline

    target = insert.this.this if isinstance(insert.this, exp.Schema) else insert.this
    table = target.name.lower()
    columns = ([c.name.lower() for c in insert.this.expressions]
               if isinstance(insert.this, exp.Schema) else None)
    source_sql = insert.expression.sql(dialect=DIALECT)

    def write(runtime: Any) -> None:
        _target_table(runtime, name, table, "INSERT")
        # Above every insert ever tagged, committed or discarded: a retry is never skipped.
        txn = 1 + max(record.insert_txn or 0 for record in runtime.relations.values())
        insert_rows(runtime, table, source_sql, columns, app_id=insert_app_id(name),
                    txn_version=txn)
        runtime.relations[table] = replace(runtime.relations[table], insert_txn=txn)

    return run_pipeline(project, backend, engine, name, insert=write)


def _execute_delete(project: Project, backend: StateBackend, engine: Engine, name: str,
                    delete: Any) -> tuple[Outcome, StepResult]:
    """The rows matching the condition leave the table (copy-on-write of the files holding
    them); the step then carries the deletion through every view as retractions.

    Unlike an INSERT, a DELETE whose commit never happened is not undone: running it again
    deletes nothing more, so the next step simply takes it as the table's change."""
    from reconciler.desired.parsing.sql import DIALECT
    from reconciler.engine.statements import delete_rows
    from reconciler.operations.step import run_pipeline

    table = delete.this.name.lower()
    where = delete.args.get("where")
    if where is None:
        raise ReconcileError("DELETE needs a WHERE clause (`WHERE true` deletes every row)")
    condition = where.this.sql(dialect=DIALECT)

    def write(runtime: Any) -> None:
        _target_table(runtime, name, table, "DELETE")
        delete_rows(runtime, table, condition)

    return run_pipeline(project, backend, engine, name, insert=write)


@contextmanager
def query_pipeline(backend: StateBackend, engine: Engine, name: str, sql: str
                   ) -> Iterator[Any]:
    """A SELECT over the committed state of the pipeline's views (every view is stored,
    materialized or not: its rows are the pipeline's state) and materialized tables: the
    DataFrame, whose rows are read inside.

    Only the relations the statement names are registered, each at its pinned version. On
    local Spark (embedded, or the warm server standing in for it), a query whose relations
    hold at most `micro_batch.MICRO_BATCH_ROWS` rows by the manifest's counts is planned
    statically, as a small step is: adaptive execution ran the shuffle of a `count(*)` as
    a Spark job of its own, for nothing to re-plan at that size."""
    from sqlglot import exp

    from reconciler.engine.spark.micro_batch import micro_batch

    select = _parse_single(sql, exp.Query, "SELECT")
    manifest, _ = read_manifest(backend, name, pipeline_layout(engine.project, name))
    if manifest is None:
        raise ReconcileError(f"pipeline '{name}' is not deployed: run `reconcile apply`")
    program = committed_program(backend, manifest)  # checked as if a pull request wrote it
    ctes = {cte.alias_or_name.lower() for cte in select.find_all(exp.CTE)}
    named = [relation for relation in dict.fromkeys(
        table.name.lower() for table in select.find_all(exp.Table)) if relation not in ctes]
    for relation in named:  # in the order the query names them: the first wrong one is said
        if relation in program.tables and not program.tables[relation].materialized:
            raise ReconcileError(f"table '{relation}' has 'materialized'='false' and cannot be "
                                 "queried")
        if relation not in program.views and relation not in program.tables:
            raise ReconcileError(f"unknown relation '{relation}' in pipeline '{name}'")
    runtime = engine.runtime(name, program, manifest.relations)
    runtime.register_queryable(named)
    with micro_batch(runtime.spark, _rows(manifest.relations, named) if engine.local else None):
        yield runtime.spark.sql(sql)


def _rows(relations: Mapping[str, RelationRecord], named: list[str]) -> int | None:
    """The rows of the relations a query names, by the manifest's counts (None when one is
    not known)."""
    counts = [relations[name].rows if name in relations else None for name in named]
    return sum(count or 0 for count in counts) if None not in counts else None
