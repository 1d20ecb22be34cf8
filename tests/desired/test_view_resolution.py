"""Views Spark could not resolve are refused by `validate` and `plan`, never at apply.

Through the real CLI, without a JVM: a view naming a column no source has, an unqualified
column two sources have, or an output with two columns of one name (which Delta cannot
store) fails with one line `error: <file>:<line>: <message>` naming the view, the names
and the sources, and for duplicates the fix (distinct aliases). Valid SQL that only looks
like these (USING joins, select aliases, lateral aliases, struct fields, lambdas,
correlated and EXISTS subqueries) stays accepted: a false refusal blocks a correct pull
request. Each query here was checked against Spark 4's analyzer when the check was
written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli_helpers import reconcile
from tests.projects import single_pipeline

SQL_FILE = "pipelines/p/program.sql"

TABLES = """\
create table sales (
  id bigint not null,
  channel string,
  w_warehouse_sk int,
  syear int,
  amount decimal(12,2),
  tags array<int>,
  info struct<region: string, code: int>,
  primary key (id)
);

create table warehouses (
  w_warehouse_sk int not null,
  w_name string,
  primary key (w_warehouse_sk)
);
"""

YEARLY = """\
with yearly as (
  select channel, syear, sum(amount) as total from sales group by channel, syear
)
"""


@dataclass(frozen=True)
class Refused:
    """A view that must be refused: its SQL, and fragments the error line must hold."""

    id: str
    view_sql: str
    fragments: tuple[str, ...]


REFUSED = [
    Refused("ambiguous-key-of-a-cte-self-join", f"""\
        create view yoy as
        {YEARLY}select channel, cur.total, prev.total as prev_total
        from yearly cur join yearly prev on cur.channel = prev.channel
          and cur.syear = prev.syear + 1;
        """, ("view 'yoy'", "column reference 'channel' is ambiguous", "cur and prev",
              "qualify it (cur.channel or prev.channel)")),
    Refused("select-star-over-a-join-duplicates-the-key", """\
        create view by_warehouse as
        with totals as (
          select w_warehouse_sk, sum(amount) as total from sales group by w_warehouse_sk
        )
        select * from totals t join warehouses w on t.w_warehouse_sk = w.w_warehouse_sk;
        """, ("view 'by_warehouse'", "output column 'w_warehouse_sk' appears 2 times",
              "t.w_warehouse_sk, w.w_warehouse_sk", "give them distinct aliases (AS ...)")),
    Refused("both-sides-key-named-in-the-select", f"""\
        create view yoy as
        {YEARLY}select cur.channel, cur.syear, prev.syear, cur.total
        from yearly cur join yearly prev on cur.channel = prev.channel
          and cur.syear = prev.syear + 1;
        """, ("view 'yoy'", "output column 'syear' appears 2 times", "cur.syear, prev.syear",
              "give them distinct aliases (AS ...)")),
    Refused("two-unnamed-aggregates-spark-names-alike", """\
        create view counts as
        select channel, count(*), count(*) from sales group by channel;
        """, ("view 'counts'", "output column 'count(1)' appears 2 times",
              "give them distinct aliases (AS ...)")),
    Refused("one-unnamed-aggregate-over-two-relations", """\
        create view averages as
        select s.channel, avg(s.w_warehouse_sk), avg(w.w_warehouse_sk) from sales s
          join warehouses w on s.w_warehouse_sk = w.w_warehouse_sk group by s.channel;
        """, ("view 'averages'", "output column 'avg(w_warehouse_sk)'",
              "give them distinct aliases (AS ...)")),
    Refused("a-dot-in-an-alias", """\
        create view dotted as select channel as `a.b` from sales;
        """, ("view 'dotted'", "output column 'a.b'", "give it an alias")),
    Refused("a-decimal-literal-in-an-unnamed-expression", """\
        create view scaled as select channel, amount * 1.5 from sales;
        """, ("view 'scaled'", "output column 'amount * 1.5'", "give it an alias")),
    Refused("unknown-column", """\
        create view totals as
        select channel, sum(amout) as total from sales group by channel;
        """, ("view 'totals'", "column 'amout' does not exist in sales",
              "id, channel, w_warehouse_sk, syear, amount")),
    Refused("unknown-qualified-column", """\
        create view named as
        select s.id, w.w_city from sales s join warehouses w
          on s.w_warehouse_sk = w.w_warehouse_sk;
        """, ("view 'named'", "column 'w.w_city' does not exist",
              "w has columns w_warehouse_sk, w_name")),
    Refused("unknown-column-of-an-upstream-view", """\
        create view totals as
        select channel, sum(amount) as total from sales group by channel;

        create view ranked as
        select channel, amount from totals;
        """, ("view 'ranked'", "column 'amount' does not exist in totals (channel, total)")),
    Refused("ambiguous-in-a-window", """\
        create view running as
        select s.id, sum(s.amount) over (partition by w_warehouse_sk) as total
        from sales s join warehouses w on s.w_warehouse_sk = w.w_warehouse_sk;
        """, ("view 'running'", "column reference 'w_warehouse_sk' is ambiguous",
              "s.w_warehouse_sk or w.w_warehouse_sk")),
]

VALID_VIEWS = f"""\
create view using_join as
select * from sales join warehouses using (w_warehouse_sk);

create view using_key as
select w_warehouse_sk, w_name, channel from sales join warehouses using (w_warehouse_sk);

create view aliases_in_group_and_order as
select channel as ch, sum(amount) as total from sales group by ch order by total;

create view alias_in_having as
select channel, sum(amount) as total from sales group by channel having total > 0;

create view lateral_alias as
select id, amount * 2 as doubled, doubled + 1 as doubled_plus_one from sales;

create view struct_fields as
select id, info.region as region, sales.info.code as code from sales;

create view cte_and_window as
with big as (select * from sales where amount > 100)
select id, channel, rank() over (partition by channel order by amount desc) as r from big;

create view correlated as
select id, amount from sales s
where amount > (select avg(amount) from sales t where t.channel = s.channel);

create view lambdas as
select id, transform(tags, x -> x + 1) as next_tags, filter(tags, t -> t > syear) as later,
  aggregate(tags, 0, (acc, x) -> acc + x) as tag_sum
from sales;

create view with_sales as
select w_warehouse_sk, w_name from warehouses w
where exists (select 1 from sales s where s.w_warehouse_sk = w.w_warehouse_sk);

create view in_subquery as
select w_name from warehouses where w_warehouse_sk in (select w_warehouse_sk from sales);

create view semi_join as
select * from warehouses w left semi join sales s on w.w_warehouse_sk = s.w_warehouse_sk;

create view yoy as
{YEARLY}select cur.channel, cur.syear, cur.total, prev.total as prev_total
from yearly cur join yearly prev on cur.channel = prev.channel
  and cur.syear = prev.syear + 1;

create view downstream as
select channel, total, prev_total from yoy where syear > 2000;
"""


def program_sql(case: Refused) -> str:
    """The tables, then the case's views (their literal's indentation removed)."""
    return TABLES + "\n" + "\n".join(line.removeprefix("        ")
                                     for line in case.view_sql.splitlines()) + "\n"


def statement_line(sql: str, view: str) -> int:
    """The line of `sql` on which `create view <view>` starts."""
    return next(number for number, text in enumerate(sql.splitlines(), start=1)
                if text.startswith(f"create view {view} "))


@pytest.mark.parametrize("case", REFUSED, ids=[case.id for case in REFUSED])
@pytest.mark.parametrize("command", ["validate", "plan"])
def test_refused_with_file_line_and_names(tmp_path: Path, case: Refused, command: str) -> None:
    sql = program_sql(case)
    project = single_pipeline(tmp_path, sql)
    view = re.findall(r"create view (\w+)", sql)[-1]
    output = reconcile(project, command, expect=1)
    lines = output.splitlines()
    match = re.match(r"error: (?P<path>\S+?):(?P<line>\d+)(:(?P<column>\d+))?: (?P<message>.*)",
                     lines[0])
    assert match, lines[0]
    assert match["path"].endswith(SQL_FILE), lines[0]
    line = int(match["line"])
    if match["column"] is None:  # no one name is at fault (`SELECT *`): the statement's line
        assert line == statement_line(sql, view) and len(lines) == 1, output
    else:  # at the name in the view's statement; its line and a caret under the name
        assert statement_line(sql, view) <= line < statement_line(sql, view) + 8, lines[0]
        assert len(lines) == 3 and lines[1] == "  " + sql.splitlines()[line - 1], output
        assert lines[2].index("^") == int(match["column"]) + 1, output
    for fragment in case.fragments:
        assert fragment in match["message"], lines[0]
    assert "Traceback" not in output


def test_valid_queries_stay_accepted(tmp_path: Path) -> None:
    project = single_pipeline(tmp_path, TABLES + "\n" + VALID_VIEWS)
    output = reconcile(project, "validate")
    views = VALID_VIEWS.count("create view ")
    assert f"p: 2 tables, {views} views" in output and ": ok" in output, output
    reconcile(project, "plan")


def test_the_first_problem_is_named_and_the_fix_accepted(tmp_path: Path) -> None:
    """Giving the duplicated key distinct aliases is the fix the message suggests."""
    broken = program_sql(REFUSED[2])
    project = single_pipeline(tmp_path, broken)
    assert "give them distinct aliases" in reconcile(project, "validate", expect=1)
    fixed = broken.replace("prev.syear, cur.total", "prev.syear as prev_syear, cur.total")
    single_pipeline(tmp_path, fixed)
    assert ": ok" in reconcile(project, "validate")
