"""A view's aggregating subqueries as views of their own (`desired/analysis/view_parts.py`), read
through `validate` and `plan` as a user reads them; the data-level proof is the
maintenance oracle (`tests/e2e/test_maintenance_oracle.py`, `SPLIT`)."""

from __future__ import annotations

import json
from pathlib import Path

from reconciler.desired.model.program import Program
from reconciler.operations.publication import _materialized
from reconciler.plan.diff import diff_programs
from reconciler.plan.selection import Selection, _Graph
from tests.cli_helpers import reconcile
from tests.projects import program_of, write_files

TABLES = """
create table sales (id bigint, store int, qty int, price decimal(8,2));
create table stores (id int, region string);
"""
TOTAL_OF_GROUPS = """
  with per_store as (select store, sum(qty) as qty, count(*) as n from sales group by store)
  select store, qty from per_store
  union all select null, sum(qty) from per_store where n > 1"""


def project(tmp_path: Path, views: str, refresh: str = "incremental") -> Path:
    return write_files(tmp_path, {
        "pipelines/p/pipeline.yaml": f"name: p\nrefresh: {refresh}\n",
        "pipelines/p/program.sql": TABLES + views})


def parts(program: Program) -> dict[str, str]:
    return {name: view.part_of for name, view in program.views.items() if view.part_of}


def test_an_aggregate_not_grouped_by_the_key_becomes_a_part(tmp_path: Path) -> None:
    root = project(tmp_path, f"create materialized view totals as {TOTAL_OF_GROUPS};\n")

    lines = reconcile(root, "validate").splitlines()[1:]

    # The CTE is used twice: one part; the total of its groups (an unnamed later branch,
    # named as the UNION names it) another; both before the view that reads them.
    assert lines == [
        "  view totals__per_store: maintained incrementally; part of view totals",
        "  view totals__part: maintained incrementally; part of view totals",
        "  view totals: maintained incrementally"]
    program = program_of(root)
    assert parts(program) == {"totals__per_store": "totals", "totals__part": "totals"}
    assert program.views["totals"].reads == ("totals__part", "totals__per_store")
    assert program.views["totals__part"].sql == ("CREATE MATERIALIZED VIEW totals__part AS "
                                                 "SELECT NULL AS store, SUM(qty) AS qty FROM "
                                                 "totals__per_store AS per_store WHERE n > 1")
    plan = json.loads(reconcile(root, "plan", "--json"))
    created = [action["name"] for pipeline in plan["pipelines"]
               for action in pipeline["actions"] if action["action"] == "create"]
    assert created[-3:] == ["totals__per_store", "totals__part", "totals"]


def test_a_view_stays_whole_when_parts_would_not_maintain_it(tmp_path: Path) -> None:
    """Splitting is for maintenance: a view that asks to be recomputed, declares a key or
    has expectations (clauses parts would not carry), or whose rest no rule maintains,
    keeps its own reason."""
    root = project(tmp_path, "\n".join([
        f"create materialized view opted tblproperties ('refresh' = 'full') as "
        f"{TOTAL_OF_GROUPS};",
        f"create materialized view keyed tblproperties ('key' = 'store') as {TOTAL_OF_GROUPS};",
        f"create materialized view checked (constraint positive expect (qty > 0)) as "
        f"{TOTAL_OF_GROUPS};",
        "create materialized view ranked as select store, rank() over (order by qty) as r "
        "from (select store, qty from sales) as s;", ""]))

    program = program_of(root)

    assert parts(program) == {}
    assert {name: view.refresh.reason for name, view in program.views.items()} == {
        "opted": "TBLPROPERTIES ('refresh' = 'full')",
        "keyed": "set operation with a branch read whole",
        "checked": "set operation with a branch read whole",
        "ranked": "window function RANK not partitioned by a key"}


def test_no_part_is_made_under_refresh_full(tmp_path: Path) -> None:
    root = project(tmp_path, f"create materialized view totals as {TOTAL_OF_GROUPS};\n",
                   refresh="full")

    assert parts(program_of(root)) == {}


def test_a_part_never_takes_a_name_the_program_uses(tmp_path: Path) -> None:
    root = project(tmp_path, "create materialized view totals__per_store as "
                             "select id from sales;\n"
                             f"create materialized view totals as {TOTAL_OF_GROUPS};\n")

    program = program_of(root)

    assert parts(program) == {"totals__per_store2": "totals", "totals__part": "totals"}
    assert program.views["totals__per_store"].part_of is None


def test_parts_are_not_published(tmp_path: Path) -> None:
    """A part is how its view is computed, not a relation of the catalog (publish)."""
    root = project(tmp_path, f"create materialized view totals as {TOTAL_OF_GROUPS};\n")
    document = program_of(root).document()

    assert [name for name in document["views"] if _materialized(document, name)] == ["totals"]


def test_selecting_a_view_or_one_of_its_parts_selects_them_all(tmp_path: Path) -> None:
    plain = "create materialized view plain as select id from sales;\n"
    before = program_of(project(tmp_path / "before", plain)).document()
    after = program_of(project(tmp_path / "after", plain.replace("id", "id, qty") + (
        f"create materialized view totals as {TOTAL_OF_GROUPS};\n"))).document()
    graph = _Graph(diff_programs(before, after))

    for selector in ("totals", "totals__part"):
        assert graph.resolve(Selection.parse([selector])) == {
            "totals", "totals__part", "totals__per_store"}, selector


def test_a_view_windowing_a_grouped_derived_table_is_that_aggregate(tmp_path: Path) -> None:
    """No part: the window is merged into the aggregate it ranks, as windows over its
    groups (`desired/analysis/group_windows.py`)."""
    root = project(tmp_path, "create materialized view ranked as select store, qty, "
                             "rank() over (order by qty desc) as r from (select store, "
                             "sum(qty) as qty from sales group by store) per_store;\n")

    program = program_of(root)

    assert parts(program) == {}
    assert program.views["ranked"].refresh.mode == "incremental"
    assert program.views["ranked"].sql == (
        "CREATE MATERIALIZED VIEW ranked AS SELECT store AS store, SUM(qty) AS qty, "
        "RANK() OVER (ORDER BY SUM(qty) DESC) AS r FROM sales GROUP BY store")


def test_an_aggregate_of_a_grouped_derived_table_is_not_merged_into_it(
        tmp_path: Path) -> None:
    """Only names and windows are merged: `AVG(total)` over `SUM(...) AS total` would be an
    aggregate of an aggregate, which Spark refuses; it stays a part of its own."""
    root = project(tmp_path, "create materialized view high as with totals as ("
                             "select store, sum(qty) as total from sales group by store), "
                             "average as (select avg(total) as spend from totals) "
                             "select store, total, spend from totals cross join average "
                             "where total > 2 * spend;\n")

    program = program_of(root)

    assert parts(program) == {"high__totals": "high", "high__average": "high"}
    assert program.views["high__average"].sql == (
        "CREATE MATERIALIZED VIEW high__average AS SELECT AVG(total) AS spend FROM "
        "high__totals AS totals")


def test_a_quoted_alias_never_reaches_a_parts_name(tmp_path: Path) -> None:
    """A part's name is a relation's (a storage folder): a derived table's alias that is
    not a plain name (here one that would write another statement) gives `part`."""
    alias = "`x AS SELECT 1 AS a; --`"
    root = project(tmp_path, "create materialized view totals as select n, count(*) as c "
                             f"from (select store, count(*) as n from sales group by store) "
                             f"{alias} group by n union all select null, count(*) from "
                             "sales;\n")

    program = program_of(root)

    assert set(parts(program)) == {"totals__part", "totals__part2", "totals__part3"}
    assert all(name.replace("_", "").isalnum() for name in program.views)
