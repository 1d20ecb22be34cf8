"""Deletions at the source: `reconcile execute "DELETE FROM ..."` and `changes: true` inputs.

After each step every view equals its query from scratch over the committed table, and
an output's changelog (with the deletions as `_op` = delete rows) integrates to its view.
Both writers: Delta's own marks deleted rows in deletion vectors (the table's and the
views' data files stay as they were) and the next step reads the table's change from
Delta's change data feed; delta-rs rewrites the files holding them.
"""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from reconciler.engine.delta.deletion_vectors import live_files
from reconciler.engine.delta.storage import DeltaStorage
from tests.cli_helpers import in_storage, manifest, query, reconcile
from tests.projects import write_files

VIEWS = {  # each view's query, also run from scratch to check it
    "big": "select id, amount from orders where amount > 10",
    "per_customer": "select customer, count(*) as n, sum(amount) as total, "
                    "min(amount) as least from orders group by customer",
    "everything": "select count(*) as n, sum(amount) as total from orders",
}
SQL = "create table orders (id bigint, customer int, amount decimal(10,2));\n" + "".join(
    f"create materialized view {name} as {select};\n" for name, select in VIEWS.items())


def spec(changes: bool) -> str:
    flag = ", changes: true" if changes else ""
    return ("name: p\nbootstrap_policy: allow\nrefresh: incremental\nconnectors:\n"
            f"  - {{name: orders_in, table: orders, type: files, format: json, "
            f"path: input{flag}}}\n"
            "  - {name: per_customer_out, view: per_customer, type: files, format: json, "
            "path: out}\n")


def bag(rows: list[dict]) -> Counter:
    return Counter(json.dumps(row, sort_keys=True, default=str) for row in rows)


def numbers(row: dict) -> tuple:
    """A row of numbers, compared as decimals (JSON writes 20.00 as 20.0)."""
    return tuple(sorted((k, Decimal(str(v)).normalize()) for k, v in row.items()))


def check_views(project: Path) -> None:
    """Every view equals its query from scratch; the output integrates to its view."""
    for view, select in VIEWS.items():
        assert bag(query(project, "p", f"select * from {view}")) == \
            bag(query(project, "p", select)), view
    integrated: Counter = Counter()
    for file in sorted((project / "out").glob("*.json")):
        for line in file.read_text().splitlines():
            row = json.loads(line)
            op = row.pop("_op")
            integrated[numbers(row)] += 1 if op == "insert" else -1
    expected = Counter(numbers(row) for row in query(project, "p", "select * from per_customer"))
    assert +integrated == expected and not -integrated


@pytest.fixture(params=["delta-spark", pytest.param("delta-rs", marks=pytest.mark.nightly)])
def writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("RECONCILE_DELTA_WRITER", request.param)
    return request.param


def marked_deleted(project: Path, relation: str) -> int:
    """Rows the relation's committed version marks deleted in deletion vectors."""
    entry = manifest(project, "p")["relations"][relation]
    return live_files(in_storage(project, entry["path"]), entry["version"]).deleted_rows


def data_files(spark: SparkSession, project: Path, relation: str) -> set[str]:
    entry = manifest(project, "p")["relations"][relation]
    return set(DeltaStorage(spark, writer="delta-rs").require(
        in_storage(project, entry["path"]), entry["version"]).file_uris())


def test_execute_delete_retracts_through_every_view(spark: SparkSession, tmp_path: Path,
                                                    writer: str) -> None:
    project = write_files(tmp_path, {"pipelines/p/pipeline.yaml": spec(False),
                                     "pipelines/p/program.sql": SQL})
    (project / "input").mkdir()
    reconcile(project, "apply")
    reconcile(project, "execute", "-p", "p", "insert into orders values (1, 1, 5.00), "
              "(2, 1, 15.00), (3, 2, 25.00), (4, 2, 25.00), (5, 3, 2.50)")
    check_views(project)
    before = data_files(spark, project, "orders")
    out = reconcile(project, "execute", "-p", "p",
                    "delete from orders where customer = 1 and amount < 10 or id = 4")
    assert "step committed" in out
    assert bag(query(project, "p", "select id from orders")) == bag(
        [{"id": 2}, {"id": 3}, {"id": 5}])
    check_views(project)
    if writer == "delta-spark":  # tables this small, the feed's included, are rewritten
        # whole (`merge.OVERWRITE_SMALL_BYTES`); test_deletion_vectors marks rows of larger
        assert (marked_deleted(project, "orders"), marked_deleted(project, "big")) == (0, 0)
        assert not before & data_files(spark, project, "orders")
    # A customer's last row leaves: its group goes, and the output says so.
    reconcile(project, "execute", "-p", "p", "delete from orders where customer = 3")
    check_views(project)
    assert query(project, "p", "select count(*) as n from per_customer where customer = 3") \
        == [{"n": 0}]
    refused = reconcile(project, "execute", "-p", "p", "delete from orders", expect=1)
    assert "DELETE needs a WHERE clause" in refused


def test_changes_connector_applies_deletions_once(spark: SparkSession, tmp_path: Path,
                                                  writer: str) -> None:
    project = write_files(tmp_path, {"pipelines/p/pipeline.yaml": spec(True),
                                     "pipelines/p/program.sql": SQL})
    inbox = project / "input"
    inbox.mkdir()
    reconcile(project, "apply")

    def feed(name: str, rows: list[tuple[str, int, int, str]]) -> None:
        (inbox / name).write_text("".join(json.dumps(
            {"_op": op, "id": i, "customer": c, "amount": a}) + "\n" for op, i, c, a in rows))

    feed("a.json", [("insert", 1, 1, "5.00"), ("insert", 2, 1, "15.00"),
                    ("insert", 3, 2, "25.00"), ("insert", 3, 2, "25.00")])
    reconcile(project, "run")
    check_views(project)
    # One copy of a duplicate goes, a row is updated (delete + insert), a missing row's
    # delete removes nothing.
    feed("b.json", [("delete", 3, 2, "25.00"), ("delete", 1, 1, "5.00"),
                    ("insert", 1, 1, "7.00"), ("delete", 9, 9, "9.00")])
    reconcile(project, "run")
    assert Counter(map(numbers, query(project, "p", "select id, amount from orders"))) == \
        Counter(map(numbers, [{"id": 1, "amount": 7}, {"id": 2, "amount": 15},
                              {"id": 3, "amount": 25}]))
    check_views(project)
    assert "no new input" in reconcile(project, "run")
    feed("c.json", [("upsert", 4, 1, "1.00")])
    failed = reconcile(project, "run", expect=1)
    assert "1 row(s) in batch 2 with _op neither 'insert' nor 'delete'" in failed
