"""Tables that evolve in place: rows, `execute` inserts and connector offsets survive.

One story through the real CLI: a table fed by a files connector and by `reconcile
execute` gains a nullable column (a metadata-only Delta commit), then has columns
widened, one dropped and one added with a DEFAULT (a rewrite with casts), then a
narrowing that cannot evolve (truncated, re-ingested). After each step the pipeline
equals a fresh deployment of the same specs fed the same input.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from tests.cli_helpers import in_storage, manifest, query, reconcile
from tests.projects import write_files

SPEC = """name: p
bootstrap_policy: allow
refresh: incremental
connectors:
  - {name: orders_in, table: orders, type: files, format: json, path: ../input}
"""
SQL = """
create table orders (id int not null, amount decimal(10,2), note string);
create materialized view totals as select sum(amount) as total, count(*) as n from orders;
"""
ADD_FLAG = SQL.replace("note string)", "note string, flag boolean)")
EVOLVE = SQL.replace(
    "(id int not null, amount decimal(10,2), note string)",
    "(id bigint not null, amount decimal(12,2), flag boolean, "
    "region string not null default 'eu')")
NARROW = EVOLVE.replace("decimal(12,2)", "decimal(8,2)")


def rows(project: Path, sql: str) -> Counter:
    return Counter(json.dumps(row, sort_keys=True, default=str)
                   for row in query(project, "p", sql))


def actions(project: Path) -> dict[str, dict]:
    plan = json.loads(reconcile(project, "plan", "--json"))
    return {a["name"]: a for a in plan["pipelines"][0]["actions"]}


def write_input(folder: Path, name: str, records: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def fresh(tmp_path: Path, sql: str) -> Path:
    """A new deployment of `sql` fed every input file written so far and the same insert."""
    project = write_files(tmp_path / "fresh", {"pipelines/p/pipeline.yaml": SPEC,
                                               "pipelines/p/program.sql": sql})
    reconcile(project, "apply")
    reconcile(project, "execute", "-p", "p", "insert into orders (id, amount) values (100, 1.25)")
    reconcile(project, "run")
    return project


def test_tables_evolve_in_place(spark: SparkSession, tmp_path: Path) -> None:
    source = tmp_path / "input"
    project = write_files(tmp_path / "a", {"pipelines/p/pipeline.yaml": SPEC,
                                           "pipelines/p/program.sql": SQL})
    sql_file = project / "pipelines/p/program.sql"
    write_input(source, "a.json", [{"id": 1, "amount": "10.50", "note": "x"},
                                   {"id": 2, "amount": "2.25", "note": "y"}])
    reconcile(project, "apply")
    reconcile(project, "execute", "-p", "p", "insert into orders (id, amount) values (100, 1.25)")
    reconcile(project, "run")
    checkpoint = manifest(project, "p")["connectors"]["orders_in"]["checkpoint"]

    # A nullable column at the end: one commit that writes no data file.
    sql_file.write_text(ADD_FLAG)
    planned = actions(project)
    assert planned["orders"]["action"] == "evolve"
    assert "column flag added: BOOLEAN" in planned["orders"]["reasons"]
    assert planned["orders_in"]["action"] == "keep"
    reconcile(project, "apply")
    state = manifest(project, "p")
    table = state["relations"]["orders"]
    commit = DeltaTable(in_storage(project, table["path"])).history(1)[0]
    assert commit["operation"] in ("ADD COLUMN", "ADD COLUMNS"), commit  # delta-rs, Delta
    assert state["connectors"]["orders_in"]["checkpoint"] == checkpoint, "offsets were reset"
    assert rows(project, "select id, flag from orders") == Counter(
        json.dumps({"flag": None, "id": i}) for i in (1, 2, 100))
    write_input(source, "b.json", [{"id": 3, "amount": "4.00", "note": "z", "flag": True}])
    reconcile(project, "run")
    assert rows(project, "select id, flag from orders") == Counter(
        json.dumps({"flag": flag, "id": i}) for i, flag in ((1, None), (2, None), (100, None),
                                                           (3, True)))

    # Widen two columns, drop one, add one with a DEFAULT: rows (the inserted one too) kept.
    sql_file.write_text(EVOLVE)
    planned = actions(project)
    assert planned["orders"]["action"] == "evolve"
    assert {"column amount: DECIMAL(10,2) -> DECIMAL(12,2)", "column id: INT -> BIGINT",
            "column note removed", "column region added: STRING DEFAULT 'eu'"} \
        <= set(planned["orders"]["reasons"])
    reconcile(project, "apply")
    assert manifest(project, "p")["connectors"]["orders_in"]["checkpoint"] == checkpoint
    write_input(source, "c.json", [{"id": 4, "amount": "9999999999.99"}])  # needs (12,2)
    reconcile(project, "run")
    expected = fresh(tmp_path, EVOLVE)
    for sql in ("select * from orders", "select * from totals"):
        assert rows(project, sql) == rows(expected, sql), sql
    assert sum(rows(project, "select * from orders where region = 'eu'").values()) == 5

    # A narrowing cannot keep the rows: truncated, the connector re-reads its source.
    sql_file.write_text(NARROW)
    planned = actions(project)
    assert planned["orders"]["action"] == "truncate"
    assert any("is not a widening" in reason for reason in planned["orders"]["reasons"])
    assert planned["orders_in"]["action"] == "reset"


def test_rows_ingested_but_not_committed_survive_a_rewrite(spark: SparkSession,
                                                          tmp_path: Path) -> None:
    """A step that ingested and then died before its commit leaves rows beyond the pinned
    version, with the connector's checkpoint past them: the evolution must carry them."""
    from reconciler.desired.settings.project import load_project
    from reconciler.engine.io.connectors import ingest
    from reconciler.operations.engine import Engine
    from reconciler.state.program import CommittedProgram
    from reconciler.state.reader import open_backend, pipeline_layout, read_manifest

    source = tmp_path / "input"
    project = write_files(tmp_path / "a", {"pipelines/p/pipeline.yaml": SPEC,
                                           "pipelines/p/program.sql": SQL})
    write_input(source, "a.json", [{"id": 1, "amount": "1.00"}])
    reconcile(project, "apply")
    reconcile(project, "run")
    write_input(source, "b.json", [{"id": 2, "amount": "2.00"}])
    loaded = load_project(project)
    committed, _ = read_manifest(open_backend(loaded), "p", pipeline_layout(loaded, "p"))
    assert committed is not None
    runtime = Engine(loaded).runtime("p", CommittedProgram.of(committed.program),
                                     committed.relations)
    connector = committed.connectors["orders_in"].copy_for_step()
    assert ingest(runtime, runtime.connectors["orders_in"],
                  connector) is not None  # appended, never committed

    (project / "pipelines/p/program.sql").write_text(EVOLVE)
    reconcile(project, "apply")
    reconcile(project, "run")
    assert rows(project, "select id, amount, region from orders") == Counter(
        json.dumps({"amount": amount, "id": i, "region": "eu"})
        for i, amount in ((1, "1.00"), (2, "2.00")))
    assert rows(project, "select n from totals") == Counter([json.dumps({"n": 2})])


def data_files(project: Path, state: dict) -> set[str]:
    """The data files (names) of a relation's pinned Delta version."""
    return {Path(uri).name for uri in
            DeltaTable(in_storage(project, state["path"]),
                                 version=state["version"]).file_uris()}


def test_renamed_table_and_view_keep_their_state(spark: SparkSession, tmp_path: Path) -> None:
    source = tmp_path / "input"
    project = write_files(tmp_path / "a", {"pipelines/p/pipeline.yaml": SPEC,
                                           "pipelines/p/program.sql": SQL})
    write_input(source, "a.json", [{"id": 1, "amount": "1.50"}, {"id": 2, "amount": "2.50"}])
    reconcile(project, "apply")
    reconcile(project, "run")
    before = manifest(project, "p")
    files_before = {name: data_files(project, state) for name, state in before["relations"].items()}

    (project / "pipelines/p/program.sql").write_text(
        SQL.replace("table orders", "table sales").replace("from orders", "from sales")
        .replace("view totals", "view sales_totals"))
    (project / "pipelines/p/pipeline.yaml").write_text(SPEC.replace("table: orders",
                                                                    "table: sales"))
    planned = actions(project)
    assert (planned["sales"]["action"], planned["sales"]["from"]) == ("rename", "orders")
    assert (planned["sales_totals"]["action"], planned["sales_totals"]["from"]) == \
        ("rename", "totals")
    assert planned["orders_in"]["action"] == "keep"
    assert reconcile(project, "apply").strip().endswith(
        "renamed orders -> sales; renamed totals -> sales_totals; recomputed nothing")
    after = manifest(project, "p")
    assert set(after["relations"]) == {"sales", "sales_totals"}
    for new, old in (("sales", "orders"), ("sales_totals", "totals")):
        assert after["relations"][new]["version"] == before["relations"][old]["version"]
        assert data_files(project, after["relations"][new]) == files_before[old]
    assert after["connectors"]["orders_in"] == before["connectors"]["orders_in"]
    old_folder = Path(in_storage(project, before["relations"]["orders"]["path"]))
    assert not old_folder.exists(), "old folder left behind"
    assert rows(project, "select * from sales_totals") == Counter(
        [json.dumps({"n": 2, "total": "4.00"})])

    write_input(source, "b.json", [{"id": 3, "amount": "3.00"}])
    reconcile(project, "run")
    assert rows(project, "select * from sales_totals") == Counter(
        [json.dumps({"n": 3, "total": "7.00"})])


DROP_IN_LOG = SQL.replace("(id int not null, amount decimal(10,2), note string)",
                          "(id int, amount decimal(10,2), flag boolean)")


@pytest.mark.nightly
def test_delta_spark_drops_columns_in_the_log(spark: SparkSession, tmp_path: Path,
                                              delta_spark: str) -> None:
    """On Delta's writer a dropped column, a dropped NOT NULL and an added column change the
    log alone (column mapping on): no data file is written, and the table, read by the
    Parquet columns' physical names, goes on taking inserts, deletes and ingested rows."""
    source = tmp_path / "input"
    project = write_files(tmp_path / "a", {"pipelines/p/pipeline.yaml": SPEC,
                                           "pipelines/p/program.sql": SQL})
    write_input(source, "a.json", [{"id": 1, "amount": "10.50", "note": "x"},
                                   {"id": 2, "amount": "2.25", "note": "y"}])
    reconcile(project, "apply")
    reconcile(project, "execute", "-p", "p", "insert into orders (id, amount) values (100, 1.25)")
    reconcile(project, "run")
    before = manifest(project, "p")["relations"]["orders"]
    path = in_storage(project, before["path"])
    files = set(DeltaTable(path).file_uris())

    (project / "pipelines/p/program.sql").write_text(DROP_IN_LOG)
    assert {"column note removed", "column id: NOT NULL dropped",
            "column flag added: BOOLEAN"} <= set(actions(project)["orders"]["reasons"])
    reconcile(project, "apply")
    table = DeltaTable(path)
    assert set(table.file_uris()) == files, "a data file was written"
    assert table.metadata().configuration["delta.columnMapping.mode"] == "name"
    operations = [entry["operation"] for entry in table.history(4)]
    assert {"DROP COLUMNS", "ADD COLUMNS", "CHANGE COLUMN"} <= set(operations), operations

    write_input(source, "b.json", [{"id": 3, "amount": "4.00", "flag": True}])
    reconcile(project, "run")
    # No row marked deleted yet: the files are scanned directly, by physical names.
    assert rows(project, "select id, flag from orders") == Counter(
        json.dumps({"flag": flag, "id": i}) for i, flag in ((1, None), (2, None), (100, None),
                                                           (3, True)))
    reconcile(project, "execute", "-p", "p", "insert into orders (id, amount) values (null, 7)")
    reconcile(project, "execute", "-p", "p", "delete from orders where id = 2")
    expected = fresh(tmp_path, DROP_IN_LOG)
    reconcile(expected, "execute", "-p", "p", "insert into orders (id, amount) values (null, 7)")
    reconcile(expected, "execute", "-p", "p", "delete from orders where id = 2")
    for sql in ("select * from orders", "select * from totals"):
        assert rows(project, sql) == rows(expected, sql), sql
