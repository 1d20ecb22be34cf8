"""A program document read into the records a runtime runs (`state.program`): what the
engine used to look up in the JSON, field by field, is on the records."""

from __future__ import annotations

from pathlib import Path

from reconciler.state.program import CommittedProgram
from tests.projects import program_of, write_files

SQL = """
CREATE TABLE orders (id INT NOT NULL, amount DECIMAL(10,2), region STRING DEFAULT 'eu',
                     CONSTRAINT positive EXPECT (amount > 0) ON VIOLATION DROP ROW,
                     PRIMARY KEY (id));
CREATE VIEW totals AS SELECT region, sum(amount) AS total FROM orders GROUP BY region;
"""


def test_records_hold_what_the_document_says(tmp_path: Path) -> None:
    write_files(tmp_path, {"pipelines/p/pipeline.yaml": "name: p\nrefresh: incremental\n",
                           "pipelines/p/program.sql": SQL})
    document = program_of(tmp_path).document()
    program = CommittedProgram.of(document)

    assert program.order == tuple(document["order"])
    orders = program.tables["orders"]
    assert [c.name for c in orders.columns] == ["id", "amount", "region"]
    assert orders.primary_key == ("id",)
    assert orders.defaults == {"region": "'eu'"}
    assert orders.default("amount") is None
    assert [(e.name, e.action) for e in orders.expectations] == [("positive", "drop")]
    totals = program.relation("totals")
    assert totals == program.views["totals"]
    assert totals.reads == ("orders",) and totals.maintained
    assert totals.sql == document["views"]["totals"]["sql"]
    assert program.document is document
