"""Fingerprints: cosmetic edits change nothing; semantic edits change the edited
relation and the views downstream that read what changed, and nothing else.

A table change that empties the table (truncation) reaches every view downstream
through the diff, not the fingerprints: see tests/plan/test_plan.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.projects import program_of, single_pipeline

BASE = """
create table a (id bigint not null, v decimal(5,2), d date, primary key (id));
create table b (id bigint, label string) with ('materialized' = 'true');
create view a_sum as select id, sum(v) as total from a group by id;
create view b_named as select id, label from b where label is not null;
create materialized view joined as
  select s.id, s.total, n.label from a_sum s join b_named n on s.id = n.id;
create view top as select * from joined where total > 10;
create view b_only as select count(*) as n from b;
"""

COSMETIC = {
    "comments and whitespace": BASE.replace("create view a_sum as",
                                            "-- sums per id\ncreate   view a_sum   as\n  /* x */"),
    "keyword case": BASE.replace("select id, sum(v) as total from a group by id",
                                 "SELECT id, SUM(v) AS total FROM a GROUP BY id"),
    "unquoted identifier case": BASE.replace("from a_sum s join b_named n",
                                             "from A_SUM S join B_Named N"),
    "type spelling": BASE.replace("label string", "label STRING"),
    "statement order": BASE.replace(
        "create view b_only as select count(*) as n from b;", "").replace(
        "create table a", "create view b_only as select count(*) as n from b;\ncreate table a"),
}

SEMANTIC = {
    "view query": (BASE.replace("where label is not null", "where label is null"),
                   {"b_named", "joined", "top"}),
    "literal": (BASE.replace("total > 10", "total > 11"), {"top"}),
    "string literal case": (BASE.replace("label is not null", "label <> 'X'"),
                            {"b_named", "joined", "top"}),
    "table column type": (BASE.replace("v decimal(5,2)", "v decimal(6,2)"),
                          {"a", "a_sum", "joined", "top"}),
    # b_only counts b's rows and reads no column of it.
    "table nullability": (BASE.replace("label string", "label string not null"),
                          {"b", "b_named", "joined", "top"}),
    "table primary key": (BASE.replace(", primary key (id)", ""), {"a"}),
    "table materialized": (BASE.replace("'materialized' = 'true'", "'materialized' = 'false'"),
                           {"b"}),
    "view materialized": (BASE.replace("create materialized view joined", "create view joined"),
                          {"joined"}),
    "column order": (BASE.replace("(id bigint, label string)", "(label string, id bigint)"),
                     {"b"}),
    "column added to a table": (BASE.replace("label string)", "label string, extra int)"),
                                {"b"}),
    "column added to a view": (BASE.replace("select id, label from b where",
                                            "select id, label, upper(label) as u from b where"),
                               {"b_named"}),
    "filter of a view": (BASE.replace("where label is not null", "where label <> ''"),
                         {"b_named", "joined", "top"}),
}


def fingerprints(root: Path, sql: str) -> dict[str, str]:
    program = program_of(single_pipeline(root, sql))
    return {name: program.relation(name).fingerprint for name in program.order}


@pytest.mark.parametrize("edit", sorted(COSMETIC))
def test_cosmetic_edit_changes_no_fingerprint(tmp_path: Path, edit: str) -> None:
    before = fingerprints(tmp_path / "before", BASE)
    after = fingerprints(tmp_path / "after", COSMETIC[edit])
    assert before == after


@pytest.mark.parametrize("edit", sorted(SEMANTIC))
def test_semantic_edit_changes_relation_and_downstream_only(tmp_path: Path, edit: str) -> None:
    sql, expected = SEMANTIC[edit]
    before = fingerprints(tmp_path / "before", BASE)
    after = fingerprints(tmp_path / "after", sql)
    changed = {name for name in before if before[name] != after[name]}
    assert changed == expected


def test_cte_names_are_not_relations(tmp_path: Path) -> None:
    program = program_of(single_pipeline(tmp_path, """
        create table t (x int);
        create view v as with t2 as (select x from t) select * from t2 join t2 as again using (x);
    """))
    assert program.views["v"].reads == ("t",)


def test_program_fingerprint_covers_connectors(tmp_path: Path) -> None:
    sql = "create table t (x int);\ncreate view v as select x from t;\n"
    spec = ("name: p\nconnectors:\n  - {name: src, table: t, type: files, format: json, "
            "path: in}\n")
    plain = program_of(single_pipeline(tmp_path / "a", sql)).fingerprint
    with_connector = program_of(single_pipeline(tmp_path / "b", sql, spec)).fingerprint
    assert plain != with_connector
