"""Errors point at the token the user has to fix (issue 56).

`reconcile validate` on a project with one mistake must exit 1 and print the complete
one-line error first, `error: <file>:<line>:<column>: <message>`, naming what the user
wrote (`unknown keyword 'selct' (did you mean SELECT?)`, not sqlglot's parser state), and
then the source line with a caret under the token. A suggestion is made only when a known
name is close. Paths are relative to the working directory, here the project.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import cli
from reconciler.desired.model.committed import check_committed_program
from reconciler.desired.view_test_files import load_view_tests
from reconciler.desired.workspace import load_programs
from reconciler.support.errors import EXCERPT_WIDTH, ReconcileError, error_at, public_message

SQL = "pipelines/p/program.sql"
SPEC = "pipelines/p/pipeline.yaml"
TABLE = "create table orders (\n  customer_id bigint,\n  amount int,\n  form string\n);\n\n"
CONNECTORS = "connectors:\n  - name: src\n    table: orders\n    type: delta\n    path: /in\n"


@dataclass(frozen=True)
class Case:
    """Files over a valid project; the error's first line and the caret line expected."""

    id: str
    files: dict[str, str]
    error: str
    width: int | None = None  # of the caret under the token; None: the error has no column


def view(query: str) -> dict[str, str]:
    """The orders table (lines 1-5) and `create view v as` on line 7, then `query`."""
    return {SQL: TABLE + "create view v as\n" + query}


CASES = [
    # --- misspelt keywords and types ------------------------------------------------------
    Case("selct", view("  selct customer_id\n  from orders;\n"),
         f"{SQL}:8:3: unknown keyword 'selct' (did you mean SELECT?)", 5),
    Case("form", view("select customer_id\nform orders;\n"),
         f"{SQL}:9:1: unknown keyword 'form' (did you mean FROM?)", 4),
    Case("gruop-by", view("select customer_id, sum(amount) as total\nfrom orders\n"
                          "gruop by customer_id;\n"),
         f"{SQL}:10:1: unknown keyword 'gruop' (did you mean GROUP?)", 5),
    Case("whre", view("select customer_id from orders whre amount > 1;\n"),
         f"{SQL}:8:32: unknown keyword 'whre' (did you mean WHERE?)", 4),
    Case("left-jion-past-where-sqlglot-stopped",
         view("select o.customer_id from orders o left jion orders p\n"
              "  on o.customer_id = p.customer_id;\n"),
         f"{SQL}:8:41: unknown keyword 'jion' (did you mean JOIN?)", 4),
    Case("distnct-read-as-a-column", view("select distnct customer_id from orders;\n"),
         f"{SQL}:8:8: view 'v': column 'distnct' does not exist in orders (customer_id, "
         "amount, form) (did you mean the keyword DISTINCT?)", 7),
    Case("two-typos-the-first-named", view("selct customer_id\nform orders;\n"),
         f"{SQL}:8:1: unknown keyword 'selct' (did you mean SELECT?)", 5),
    Case("crete-view", {SQL: TABLE + "crete view v as select customer_id from orders;\n"},
         f"{SQL}:7:1: unknown keyword 'crete' (did you mean CREATE?)", 5),
    Case("decmal", {SQL: "create table orders (\n  id bigint,\n  amount decmal(10,2)\n);\n"},
         f"{SQL}:3:10: unknown type 'decmal' (did you mean DECIMAL?)", 6),
    Case("decmal-in-a-cast", view("select cast(amount as decmal(10,2)) as a from orders;\n"),
         f"{SQL}:8:23: unknown type 'decmal' (did you mean DECIMAL?)", 6),
    Case("unknown-type-nothing-close", {SQL: "create table t (\n  a whatever\n);\n"},
         f"{SQL}:2:5: unknown type 'whatever'", 8),
    Case("a-column-named-like-a-keyword-is-not-blamed",
         view("select form, customer_id\nfrom orders\nwhre amount > 1;\n"),
         f"{SQL}:10:1: unknown keyword 'whre' (did you mean WHERE?)", 4),
    Case("missing-semicolon-still-said",
         view("select customer_id from orders\n\ncreate view w as select 1 as x;\n"),
         f"{SQL}:10:1: SQL syntax error: unexpected 'create' (missing ';' before it?)",
         6),
    # --- names: at the name's own token -----------------------------------------------------
    Case("primary-key-not-a-column",
         {SQL: "create table orders (\n  customer_id bigint,\n  primary key (custmer_id)\n);\n"},
         f"{SQL}:3:16: table 'orders': primary key column 'custmer_id' is not a column "
         "(did you mean 'customer_id'?)", 10),
    Case("unknown-column", view("select customer_id,\n       amont\nfrom orders;\n"),
         f"{SQL}:9:8: view 'v': column 'amont' does not exist in orders (customer_id, amount, "
         "form) (did you mean 'amount'?)", 5),
    Case("unknown-qualified-column", view("select o.customer_id, o.amont from orders o;\n"),
         f"{SQL}:8:25: view 'v': column 'o.amont' does not exist: o has columns customer_id, "
         "amount, form (did you mean 'amount'?)", 5),
    Case("unknown-column-nothing-close", view("select zzz from orders;\n"),
         f"{SQL}:8:8: view 'v': column 'zzz' does not exist in orders (customer_id, amount, "
         "form)", 3),
    Case("unknown-table", view("select customer_id\nfrom ordrs;\n"),
         f"{SQL}:9:6: view 'v' reads unknown relation 'ordrs' (did you mean 'orders'?)",
         5),
    Case("unknown-table-in-a-join", view("select o.customer_id from orders o\n"
                                         "join people p on p.id = o.customer_id;\n"),
         f"{SQL}:9:6: view 'v' reads unknown relation 'people'", 6),
    # --- connectors and settings: the line of the key -----------------------------------------
    Case("connector-unknown-table",
         {SPEC: "name: p\n" + CONNECTORS.replace("table: orders", "table: ordres")},
         f"{SPEC}:4: input connector 'src' names an unknown table 'ordres' "
         "(did you mean 'orders'?)"),
    Case("connector-unknown-view",
         {SPEC: "name: p\nconnectors:\n  - name: out\n    view: vv_daily\n    type: delta\n"
                "    path: /out\n",
          SQL: TABLE + "create view v_daily as select * from orders;\n"},
         f"{SPEC}:4: output connector 'out' names an unknown view 'vv_daily' "
         "(did you mean 'v_daily'?)"),
    Case("renamed-to-an-unknown-relation",
         {SPEC: "name: p\n" + CONNECTORS + "renamed:\n  old_v: vv_daily\n",
          SQL: TABLE + "create view v_daily as select * from orders;\n"},
         f"{SPEC}:8: renamed: old_v -> vv_daily: 'vv_daily' is not a table or view of the "
         "pipeline (did you mean 'v_daily'?)"),
    Case("publish-excludes-an-unknown-relation",
         {SPEC: "name: p\n" + CONNECTORS + "publish:\n  database: d\n  exclude: [ordres]\n"},
         f"{SPEC}:9: publish.exclude: no table or view 'ordres' in the program "
         "(did you mean 'orders'?)"),
    Case("expectation-reads-an-unknown-column",
         {SQL: "create table orders (\n  amount int,\n"
               "  constraint positive expect (amout > 0)\n);\n"},
         f"{SQL}:3: table 'orders': expectation 'positive' reads 'amout', which is not a "
         "column of it (amount) (did you mean 'amount'?)"),
    Case("unknown-project-key", {"reconcile.yaml": "backend: x\nstorgae: y\n"},
         "reconcile.yaml:2: unknown key 'storgae' (did you mean 'storage'?)"),
    Case("unknown-spark-key", {"reconcile.yaml": "spark:\n  mastr: local\n"},
         "reconcile.yaml:2: unknown key 'mastr' (did you mean 'master'?)"),
    Case("unknown-pipeline-key", {SPEC: "name: p\nconectors: []\n"},
         f"{SPEC}:2: unknown key 'conectors' (did you mean 'connectors'?)"),
    Case("unknown-connector-key", {SPEC: "name: p\n" + CONNECTORS.replace("table:", "tabel:")},
         f"{SPEC}:4: unknown key 'tabel' (did you mean 'table'?)"),
    Case("unknown-key-nothing-close", {SPEC: "name: p\nschedule: daily\n"},
         f"{SPEC}:2: unknown key 'schedule'"),
    # --- YAML syntax: one line, PyYAML's place and problem only -------------------------------
    Case("yaml-mapping-value", {SPEC: "name: p\nvars:\n  day: 1\n  bad: : x\n"},
         f"{SPEC}:4:8: invalid YAML: mapping values are not allowed here", 1),
    Case("yaml-tab", {SPEC: "name: p\nvars:\n\tday: 1\n"},
         f"{SPEC}:3:1: invalid YAML: found character '\\t' that cannot start any token", 1),
    Case("yaml-unclosed-quote", {SPEC: "name: p\nvars:\n  day: '2025\n"},
         f"{SPEC}:3:8: invalid YAML: found unexpected end of stream (while scanning a quoted "
         "scalar started on this line)", 1),
]


def write(root: Path, files: dict[str, str]) -> Path:
    """A valid project with `files` over it."""
    base = {"reconcile.yaml": "backend: .reconcile/state\n", SPEC: "name: p\n" + CONNECTORS,
            SQL: TABLE + "create view v as select customer_id from orders;\n"}
    for relative, text in {**base, **files}.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text, encoding="utf-8")
    return root


def validate(root: Path, files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What a failing validate says of a valid project with `files` over it."""
    write(root, files)
    monkeypatch.chdir(root)  # paths are shown relative to the working directory
    result = CliRunner().invoke(cli, ["-C", str(root), "validate"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    return result.output.splitlines()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_error_names_file_line_column_and_the_fix(tmp_path: Path, case: Case,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    lines = validate(tmp_path, case.files, monkeypatch)
    assert lines[0] == f"error: {case.error}"
    if case.width is None:
        assert len(lines) == 1, lines
        return
    file, line, column = case.error.split(":")[:3]
    source = (tmp_path / file).read_text(encoding="utf-8").splitlines()[int(line) - 1]
    caret = " " * (2 + int(column) - 1) + "^" * case.width
    assert lines[1:] == ["  " + source.replace("\t", " "), caret]


def test_cases_are_distinct() -> None:
    assert len({case.id for case in CASES}) == len(CASES)


def test_a_valid_column_named_like_a_keyword_passes(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`form` is a column of orders: no suggestion stands in the way of valid SQL."""
    write(tmp_path, {**view("select form, customer_id from orders where form = 'x';\n"),
                     SPEC: "name: p\n"})
    result = CliRunner().invoke(cli, ["-C", str(tmp_path), "validate"])
    assert result.exit_code == 0 and ": ok" in result.output, result.output


def test_the_echoed_line_cannot_drive_the_terminal(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A pull request writes the line shown under the error: an escape sequence or a
    bidirectional override in it is shown as '?', one for one, so the caret stays under
    its token."""
    query = "select customer_id /* \x1b[2J\u202e */ from ordrs;\n"
    lines = validate(tmp_path, view(query), monkeypatch)
    column = query.index("ordrs") + 1
    assert lines[0] == (f"error: {SQL}:8:{column}: view 'v' reads unknown relation 'ordrs' "
                        "(did you mean 'orders'?)")
    assert lines[1] == "  select customer_id /* ?[2J? */ from ordrs;"
    assert lines[2] == " " * (column + 1) + "^^^^^"
    assert all(char.isprintable() for line in lines for char in line)


def test_a_long_line_is_cut_around_the_column(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A minified one-line file shows `EXCERPT_WIDTH` characters around the token."""
    padding = ", ".join(f"customer_id as c{index}" for index in range(40))
    lines = validate(tmp_path, view(f"select {padding}, amont, {padding} from orders;\n"),
                     monkeypatch)
    assert lines[0].startswith(f"error: {SQL}:8:") and "did you mean 'amount'?" in lines[0]
    assert len(lines[1]) <= 2 + 3 + EXCERPT_WIDTH + 3, lines[1]
    assert lines[1].startswith("  ...") and lines[1].endswith("...")
    assert lines[1][lines[2].index("^"):].startswith("amont,")


def test_pull_requests_get_the_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the Action posts (`public_message`) is the first line alone, never the caret."""
    validate(tmp_path, view("  selct customer_id\n  from orders;\n"), monkeypatch)
    with pytest.raises(ReconcileError) as caught:
        load_programs(tmp_path, None)
    assert public_message(caught.value) == \
        f"{SQL}:8:3: unknown keyword 'selct' (did you mean SELECT?)"
    assert "\n" not in public_message(caught.value)


def test_error_at_counts_lines_and_columns_from_one() -> None:
    error = error_at("bad", "f.sql", "ab\ncd\tef\n", 6, 7)
    assert str(error) == "f.sql:2:4: bad"
    assert error.excerpt() == ["  cd ef", "     ^^"]
    assert ReconcileError("plain", file="f.sql", line=3).excerpt() == []


def test_a_manifest_s_sql_is_located_but_never_echoed() -> None:
    """A committed program's SQL comes from the state bucket, not the project: its error
    keeps the column, and no line of it is shown."""
    document = {"tables": {"t": {"sql": "create table t (a int)"}},
                "views": {"v": {"sql": "create view v as select b from t"}}}
    with pytest.raises(ReconcileError) as caught:
        check_committed_program("p", document, "manifest.json")
    assert str(caught.value).startswith("manifest.json (view 'v'):1:25: view 'v': column 'b' ")
    assert caught.value.excerpt() == []


def test_a_huge_broken_statement_is_refused_in_one_line(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Past `syntax_errors.MAX_SEARCHED_TOKENS` the unexpected token is not searched for (one
    parse per token, each as long as the statement: a pull request could make that minutes),
    but a missing ';' is still found, in one parse."""
    columns = ", ".join(f"customer_id as c{index}" for index in range(500))
    broken = view(f"select {columns} from orders bogus1 bogus2;\n")
    assert validate(tmp_path, broken, monkeypatch) == [
        f"error: {SQL}:7: SQL syntax error: the statement does not parse as CREATE TABLE or "
        "CREATE VIEW"]
    glued = view(f"select {columns} from orders\ncreate view w as select 1 as x;\n")
    lines = validate(tmp_path, glued, monkeypatch)
    assert lines[0] == f"error: {SQL}:9:1: SQL syntax error: unexpected 'create' (missing ';' " \
        "before it?)"


@pytest.mark.parametrize(("test_file", "error"), [
    ("view: v_dialy\nexpect: []\n",
     "test of an unknown view 'v_dialy' (did you mean 'v_daily'?)"),
    ("view: v_daily\ngiven:\n  orders:\n    - {customer_id: 1, amont: 2}\nexpect: []\n",
     "unknown column(s) amont of table 'orders'; its columns are customer_id, amount, form "
     "(did you mean 'amount'?)"),
])
def test_a_view_test_file_suggests_the_name(tmp_path: Path, test_file: str, error: str
                                            ) -> None:
    """`reconcile test`'s files are read without Spark: their names get a did-you-mean too."""
    project = write(tmp_path, {SQL: TABLE + "create view v_daily as select * from orders;\n",
                               "pipelines/p/tests/t.yaml": test_file})
    [program] = load_programs(project, None)[1]
    with pytest.raises(ReconcileError, match=re.escape(error)):
        load_view_tests(project / "pipelines/p", program, "pipelines/p")
