"""Every column name Spark SQL allows is stored (issue 52): unaliased aggregates, a spaced
alias and each character Delta's writer refuses without column mapping, through apply,
steps with inserts and deletes (maintained and recomputed), a bootstrap and `query`, on
Delta's writer; and the same views' tests on the fallback writer (`reconcile test`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from reconciler.engine.delta.writers import REFUSED_NAME_CHARACTERS
from tests.cli_helpers import query, reconcile
from tests.projects import events_pipeline, write_files

EVERY_CHARACTER = {"a b": "id", "c,d": "kind", "e;f": "amount", "g{h": "id", "i}j": "kind",
                   "k(l": "amount", "m)n": "id", "o=p": "kind", "q\tr": "amount",
                   "s\nt": "id"}
SQL = f"""
create table events (id bigint, kind string, amount decimal(10,2));
create materialized view unaliased as
  select kind, count(*), sum(amount), avg(amount) from events group by kind;
create materialized view spaced as select kind, count(*) as `order count` from events
  group by kind;
create materialized view busy as select kind, `order count` from spaced
  where `order count` > 1;
create materialized view every_character as select
  {", ".join(f"{source} as `{name}`" for name, source in EVERY_CHARACTER.items())}
  from events;
create materialized view recomputed tblproperties ('refresh' = 'full') as
  select kind, min(amount), max(id) from events group by kind;
"""
SCRATCH = {
    "unaliased": "select kind, count(*), sum(amount), avg(amount) from events group by kind",
    "spaced": "select kind, count(*) as `order count` from events group by kind",
    "busy": "select kind, count(*) as `order count` from events group by kind "
            "having count(*) > 1",
    "every_character": "select " + ", ".join(f"{source} as `{name}`" for name, source
                                             in EVERY_CHARACTER.items()) + " from events",
    "recomputed": "select kind, min(amount), max(id) from events group by kind",
}


def test_every_refused_character_is_covered() -> None:
    assert {character for name in EVERY_CHARACTER for character in name} >= \
        REFUSED_NAME_CHARACTERS


def rows(project: Path, sql: str) -> list[str]:
    """A query's rows as sorted JSON texts: a multiset, column names included."""
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in query(project, "p",
                                                                                   sql))


def assert_views_equal_their_queries(project: Path, scratch: dict[str, str]) -> None:
    """One `reconcile query`: each view's rows against its query's from scratch, both ways
    (`EXCEPT ALL`: a multiset difference), as a count of differing rows per view."""
    differences = " union all ".join(
        f"select '{view}' as view, count(*) as n from ((select * from {view} except all "
        f"{sql}) union all ({sql} except all select * from {view}))"
        for view, sql in scratch.items())
    assert query(project, "p", differences) == [{"view": view, "n": 0} for view in scratch]


def events(project: Path, name: str, records: list[dict[str, Any]]) -> None:
    folder = project / "input/events"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(record) + "\n" for record in records))


@pytest.mark.parametrize("writer", ["delta-rs", pytest.param("delta-spark",
                                                              marks=pytest.mark.nightly)])
def test_names_delta_refuses_are_stored_maintained_and_bootstrapped(
        writer: str, spark: SparkSession, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The story on each writer. Delta's writer stores these names with column mapping
    (the only writer that needs it); delta-rs takes them as they are, so on it the story
    holds the SQL around them (maintenance, bootstrap, `query`). Delta's writer runs the
    whole story nightly (`make test-nightly`, several times slower); in `make test`
    `test_engine_storage.py::test_delta_spark_creates_with_its_own_ddl_what_that_declares`
    holds its column-mapped create, write and read of a spaced name."""
    monkeypatch.setenv("RECONCILE_DELTA_WRITER", writer)
    project = write_files(tmp_path, events_pipeline(SQL))
    reconcile(project, "apply", "--auto-approve")
    events(project, "1.json", [{"id": 1, "kind": "a", "amount": "5.00"},
                               {"id": 2, "kind": "b", "amount": "20.00"},
                               {"id": 3, "kind": "b", "amount": "30.50"}])
    reconcile(project, "run")
    assert rows(project, "select `order count` from busy") == ['{"order count": 2}']

    events(project, "2.json", [{"id": 4, "kind": "a", "amount": "11.25"}])
    reconcile(project, "run")  # an insert, maintained
    reconcile(project, "execute", "-p", "p", "DELETE FROM events WHERE id = 2")  # a delete
    assert_views_equal_their_queries(project, SCRATCH)
    plan = json.loads(reconcile(project, "plan", "--json"))
    assert plan["pipelines"][0]["has_changes"] is False

    program = project / "pipelines/p/program.sql"  # a bootstrap of one of them
    program.write_text(program.read_text().replace("avg(amount) from events",
                                                   "avg(amount), max(amount) from events"))
    reconcile(project, "apply", "--auto-approve")
    changed = {**SCRATCH, "unaliased": SCRATCH["unaliased"].replace(
        "avg(amount) from", "avg(amount), max(amount) from")}
    assert_views_equal_their_queries(project, changed)
    assert '"max(amount)": "30.50"' in rows(project, "select * from unaliased where kind = 'b'")[0]


VIEW_TEST = """
tests:
  - name: unaliased_and_spaced
    view: busy
    given:
      events:
        - {id: 1, kind: a, amount: 5.00}
        - {id: 2, kind: a, amount: 7.00}
        - {id: 3, kind: b, amount: 1.00}
    expect:
      - {kind: a, "order count": 2}
    change:
      events:
        insert: [{id: 4, kind: b, amount: 2.00}]
        delete: [{id: 1, kind: a, amount: 5.00}]
    expect_after:
      - {kind: b, "order count": 2}
  - name: an_unaliased_aggregate
    view: unaliased
    given:
      events:
        - {id: 1, kind: a, amount: 5.00}
    expect:
      - {kind: a, "count(1)": 1, "sum(amount)": 5.00}
"""


def test_view_tests_name_such_columns_on_the_fallback_writer(spark: SparkSession,
                                                             tmp_path: Path) -> None:
    """`reconcile test` runs on the fallback writer (delta-rs, no state): the same names."""
    project = write_files(tmp_path, {**events_pipeline(SQL),
                                     "pipelines/p/tests/names.yaml": VIEW_TEST})
    report = json.loads(reconcile(project, "test", "--json"))
    assert [(test["name"], test["passed"]) for test in report["tests"]] == [
        ("unaliased_and_spaced", True), ("an_unaliased_aggregate", True)], report


def test_a_name_spark_gives_that_validate_could_not_foresee_stops_the_apply(
        spark: SparkSession, tmp_path: Path) -> None:
    """`q * 1e1` unaliased: validate guesses its name from the text (no dot), Spark names it
    `(q * 10.0)`. The apply computes the view's schema before writing it and refuses it in
    one line naming the view and the column; nothing is deployed."""
    project = write_files(tmp_path, events_pipeline(
        "create table events (id bigint, kind string, amount decimal(10,2));\n"
        "create materialized view scaled as select id, id * 1e1 from events;\n"))
    reconcile(project, "validate")
    output = reconcile(project, "apply", "--auto-approve", expect=1)
    assert "view 'scaled': output column '(id * 10.0)' has a '.'" in output
    assert "give it an alias" in output
    assert not (project / ".reconcile/state/p/manifest.json").exists()
