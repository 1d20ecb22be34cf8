"""Malformed projects through the real CLI: one line, the right file and line, a clear message.

Each case starts from a small valid project and overrides some of its files; `validate` must
exit 1 and print one line `error: <file>:<line>: <message>`, where `<file>` is the file
the user has to fix and `<line>` the line to look at, never a traceback; an error at a token
says `<file>:<line>:<column>:` and is followed by the source line and a caret under it.
"""

from __future__ import annotations

import re
import textwrap
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import cli
from reconciler.desired.workspace import load_programs
from reconciler.support.errors import ReconcileError

PIPELINE_YAML = """\
name: p
vars:
  day: "2025-01-01"
connectors:
  - name: src
    table: events
    type: files
    format: json
    path: data/in
  - name: out
    view: daily
    type: delta
    path: /data/out
"""

PROGRAM_SQL = """\
create table events (
  id bigint not null,
  kind string,
  day date,
  primary key (id)
);

create view daily as
select day, count(*) as n
from events
where day >= date '{{ day }}'
group by day;
"""

BASE_FILES = {
    "reconcile.yaml": "backend: .reconcile/state\n",
    "pipelines/p/pipeline.yaml": PIPELINE_YAML,
    "pipelines/p/program.sql": PROGRAM_SQL,
}

SPEC = "pipelines/p/pipeline.yaml"
SQL = "pipelines/p/program.sql"


Files = dict[str, str | bytes | None]


def write_project(root: Path, overrides: Files) -> Path:
    """Write the base project with `overrides` applied (None removes a file); returns `root`."""
    files: Files = {**BASE_FILES, **overrides}
    for relative, content in files.items():
        if content is None:
            continue
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content), encoding="utf-8")
    (root / "data/in").mkdir(parents=True, exist_ok=True)  # the input connector's folder
    return root


def run_validate(root: Path, *extra: str):
    return CliRunner().invoke(cli, ["-C", str(root), *extra, "validate"])


@dataclass(frozen=True)
class Case:
    """A project (base files plus `files`) whose error must name `file`:`line` and `fragment`."""

    id: str
    files: Files
    file: str
    line: int
    fragment: str


def spec_with_connectors(connectors: str) -> str:
    """pipeline.yaml of pipeline `p` with the given (dedented) connectors block at line 3."""
    return "name: p\nvars: {day: '2025-01-01'}\n" + textwrap.dedent(connectors)


CASES = [
    # --- YAML syntax ---------------------------------------------------------------------
    Case("yaml-syntax-project", {"reconcile.yaml": "backend: a\nspark:\n  master: [local\n"},
         "reconcile.yaml", 3, "invalid YAML: expected ',' or ']'"),
    Case("yaml-syntax-pipeline", {SPEC: "name: p\nvars:\n  day: 1\n  bad: : x\n"},
         SPEC, 4, "invalid YAML"),
    Case("yaml-tab-indent-pipeline", {SPEC: "name: p\nvars:\n\tday: 1\n"},
         SPEC, 3, "invalid YAML"),
    Case("yaml-unclosed-quote", {SPEC: "name: p\nvars:\n  day: '2025-01-01\nconnectors: []\n"},
         SPEC, 3, "while scanning a quoted scalar started on this line"),
    Case("yaml-duplicate-key", {SPEC: "name: p\nvars: {day: x}\nname: p\n"},
         SPEC, 3, "duplicate key 'name' (first at line 1)"),
    Case("yaml-duplicate-nested-key", {SPEC: "name: p\nvars:\n  day: x\n  day: y\n"},
         SPEC, 4, "duplicate key 'day' (first at line 3)"),
    Case("yaml-not-utf8", {SPEC: b"name: p\n# caf\xe9\nvars: {day: x}\n"},
         SPEC, 2, "not UTF-8 text"),
    Case("yaml-top-level-list", {SPEC: "- name: p\n"},
         SPEC, 1, "expected a mapping"),
    # --- unknown keys and wrong types ----------------------------------------------------
    Case("unknown-key-project", {"reconcile.yaml": "backend: x\nstorgae: y\n"},
         "reconcile.yaml", 2, "unknown key 'storgae'"),
    Case("unknown-key-spark", {"reconcile.yaml": "spark:\n  master: local\n  cores: 2\n"},
         "reconcile.yaml", 3, "unknown key 'cores'"),
    Case("unknown-key-pipeline", {SPEC: PIPELINE_YAML + "schedule: daily\n"},
         SPEC, 14, "unknown key 'schedule'"),
    Case("unknown-key-connector",
         {SPEC: PIPELINE_YAML.replace("    path: /data/out\n",
                                      "    path: /data/out\n    mode: append\n")},
         SPEC, 14, "unknown key 'mode'"),
    Case("vars-as-list", {SPEC: "name: p\nvars:\n  - day\n"},
         SPEC, 2, "vars: Input should be a valid dictionary"),
    Case("sql-as-number", {SPEC: "name: p\nvars: {day: x}\nsql: 3\n"},
         SPEC, 3, "sql: Input should be a valid list"),
    Case("sql-item-as-number", {SPEC: "name: p\nvars: {day: x}\nsql:\n  - program.sql\n  - 7\n"},
         SPEC, 5, "sql.1"),
    Case("bad-bootstrap-policy", {SPEC: "name: p\nvars: {day: x}\nbootstrap_policy: maybe\n"},
         SPEC, 3, "bootstrap_policy: 'maybe' is not one of 'await_approval', 'allow' or 'reject'"),
    Case("connector-type-names-the-bad-value",
         {SPEC: PIPELINE_YAML.replace("type: files", "type: kafkaa", 1)},
         SPEC, 7, "type: 'kafkaa' is not one of 'files', 'delta' or 'kafka'"),
    Case("pipelines-folder-missing", {"reconcile.yaml": "backend: x\npipelines: pipes\n"},
         "reconcile.yaml", 2, "pipelines folder 'pipes' does not exist"),
    Case("spark-master-and-remote",
         {"reconcile.yaml": "spark:\n  master: local\n  remote: sc://h\n"},
         "reconcile.yaml", 1, "either spark.master or spark.remote"),
    # --- names ---------------------------------------------------------------------------
    Case("missing-name", {SPEC: "vars:\n  day: x\n"},
         SPEC, 1, "missing required key 'name'"),
    Case("invalid-name", {SPEC: "vars:\n  day: x\nname: my-pipe\n"},
         SPEC, 3, "'my-pipe' is not a valid name"),
    Case("name-not-folder", {SPEC: "vars:\n  day: x\nname: q\n"},
         SPEC, 3, "must match its folder 'p'"),
    Case("invalid-connector-name", {SPEC: spec_with_connectors("""\
        connectors:
          - name: 1src
            table: events
            type: delta
            path: /x
        """)}, SPEC, 4, "'1src' is not a valid name"),
    # --- connectors ----------------------------------------------------------------------
    Case("connector-table-and-view", {SPEC: spec_with_connectors("""\
        connectors:
          - name: src
            table: events
            view: daily
            type: delta
            path: /x
        """)}, SPEC, 4, "exactly one of 'table' or 'view'"),
    Case("connector-neither-table-nor-view", {SPEC: spec_with_connectors("""\
        connectors:
          - name: src
            type: delta
            path: /x
          - name: other
            type: delta
            path: /y
        """)}, SPEC, 4, "exactly one of 'table' or 'view'"),
    Case("connector-missing-path", {SPEC: spec_with_connectors("""\
        connectors:
          - name: src
            table: events
            type: delta
          - name: out
            view: daily
            type: delta
        """)}, SPEC, 4, "connector 'src' of type 'delta' needs a 'path'"),
    Case("duplicate-connector-name", {SPEC: spec_with_connectors("""\
        connectors:
          - name: src
            table: events
            type: delta
            path: /x
          - name: src
            view: daily
            type: delta
            path: /y
        """)}, SPEC, 8, "duplicate connector name 'src' (first at line 4)"),
    Case("unknown-connector-type", {SPEC: spec_with_connectors("""\
        connectors:
          - name: src
            table: events
            type: pulsar
            path: /x
        """)}, SPEC, 6, "connectors.0.type"),
    Case("unknown-format", {SPEC: spec_with_connectors("""\
        connectors:
          - name: src
            table: events
            type: files
            format: avro
            path: /x
        """)}, SPEC, 7, "connectors.0.format"),
    Case("files-without-format", {SPEC: spec_with_connectors("""\
        connectors:
          - name: ok
            view: daily
            type: delta
            path: /y
          - name: src
            table: events
            type: files
            path: /x
        """)}, SPEC, 8, "'src' of type 'files' needs a 'format'"),
    Case("delta-with-format", {SPEC: spec_with_connectors("""\
        connectors:
          - name: src
            table: events
            type: delta
            format: json
            path: /x
        """)}, SPEC, 4, "of type 'delta' takes no 'format'"),
    Case("connector-options-not-mapping", {SPEC: spec_with_connectors("""\
        connectors:
          - name: src
            table: events
            type: delta
            path: /x
            options: [a, b]
        """)}, SPEC, 8, "connectors.0.options"),
    Case("input-connector-names-view", {SPEC: spec_with_connectors("""\
        connectors:
          - name: src
            table: events
            type: delta
            path: /x
          - name: wrong
            table: daily
            type: delta
            path: /y
        """)}, SPEC, 9, "input connector 'wrong' names a view, not a table 'daily'"),
    Case("input-connector-unknown-table", {SPEC: spec_with_connectors("""\
        connectors:
          - name: src
            table: event
            type: delta
            path: /x
        """)}, SPEC, 5, "names an unknown table 'event' (did you mean 'events'?)"),
    Case("output-connector-unknown-view", {SPEC: spec_with_connectors("""\
        connectors:
          - name: out
            view: dialy
            type: delta
            path: /x
        """)}, SPEC, 5, "names an unknown view 'dialy' (did you mean 'daily'?)"),
    # --- SQL files -----------------------------------------------------------------------
    Case("missing-sql-file", {SPEC: "name: p\nvars: {day: x}\nsql:\n  - program.sql\n"
                                    "  - extra.sql\n"},
         SPEC, 5, "sql file 'extra.sql' not found"),
    Case("no-sql-files", {SQL: None, "pipelines/p/program.txt": PROGRAM_SQL},
         SPEC, 1, "no *.sql files"),
    Case("only-comments", {SQL: "-- nothing here yet\n"},
         SPEC, 1, "defines no tables or views"),
    Case("empty-sql-list", {SPEC: PIPELINE_YAML + "sql: []\n"},
         SPEC, 14, "defines no tables or views"),
    Case("sql-not-utf8", {SQL: PROGRAM_SQL.encode() + b"-- \xff\n"},
         SQL, 13, "not UTF-8 text"),
    # --- Jinja ---------------------------------------------------------------------------
    Case("jinja-syntax-error", {SQL: PROGRAM_SQL.replace("{{ day }}", "{{ day }")},
         SQL, 11, "template error"),
    Case("jinja-unclosed-block", {SQL: "create table t (a int);\n{% if x %}\nselect 1;\n"},
         SQL, 2, "innermost block that needs to be closed is 'if'"),
    Case("jinja-undefined-variable", {SQL: PROGRAM_SQL.replace("{{ day }}", "{{ dya }}")},
         SQL, 11, "'dya' is undefined"),
    Case("jinja-undefined-in-later-line",
         {SQL: "create table t (a int);\n\n\ncreate view v as\nselect a\nfrom t\n"
               "where a > {{ limit }};\n"},
         SQL, 7, "'limit' is undefined"),
    Case("jinja-undefined-attribute",
         {SQL: "create table t (a int);\ncreate view v as select a from t\n"
               "where a > {{ day.year }};\n"},
         SQL, 3, "has no attribute 'year'"),
    Case("jinja-python-error",
         {SQL: "create table t (a int);\n\ncreate view v as select {{ 1 // 0 }} as z;\n"},
         SQL, 3, "template error: ZeroDivisionError"),
    # --- SQL syntax ----------------------------------------------------------------------
    Case("sql-syntax-later-line",
         {SQL: PROGRAM_SQL + "\ncreate view broken as\nselect day,\nfrom events\n"
                             "where (day > 1;\n"},
         SQL, 17, "SQL syntax error"),
    Case("sql-unterminated-string",
         {SQL: PROGRAM_SQL + "\ncreate view v2 as\nselect 'abc as x\nfrom daily;\n"},
         SQL, 15, "SQL syntax error: unterminated quote: missing closing '"),
    Case("sql-unterminated-comment",
         {SQL: PROGRAM_SQL + "\n/* work in progress\ncreate view v2 as select 1 as x;\n"},
         SQL, 14, "SQL syntax error: unterminated /* comment"),
    Case("sql-missing-semicolon",
         {SQL: PROGRAM_SQL + "\ncreate view v2 as select * from daily\n\n"
                             "create view v3 as select * from daily;\n"},
         SQL, 16, "unexpected 'create' (missing ';' before it?)"),
    Case("sql-trailing-garbage",
         {SQL: PROGRAM_SQL + "\ncreate table t2 (a int)\nusing delta nonsense here;\n"},
         SQL, 15, "SQL syntax error: unexpected"),
    Case("sql-unknown-type", {SQL: PROGRAM_SQL + "\ncreate table t2 (\n  a notatype\n);\n"},
         SQL, 15, "unknown type 'notatype'"),
    Case("sql-garbage-statement",
         {SQL: PROGRAM_SQL + "\nthis is not sql;\n"},
         SQL, 14, "SQL syntax error: expected CREATE TABLE or CREATE VIEW, got 'this'"),
    # --- unsupported statements ----------------------------------------------------------
    Case("insert", {SQL: PROGRAM_SQL + "\ninsert into events values (1, 'a', null);\n"},
         SQL, 14, "unsupported statement INSERT"),
    Case("drop", {SQL: PROGRAM_SQL + "\n\ndrop table events;\n"},
         SQL, 15, "unsupported statement DROP"),
    Case("create-function",
         {SQL: PROGRAM_SQL + "\ncreate function f as 'com.example.F';\n"},
         SQL, 14, "unsupported statement CREATE FUNCTION"),
    Case("select-statement", {SQL: PROGRAM_SQL + "\nselect * from events;\n"},
         SQL, 14, "unsupported statement SELECT"),
    Case("create-role", {SQL: PROGRAM_SQL + "\ncreate role admin;\n"},
         SQL, 14, "unsupported statement CREATE ROLE"),
    Case("msck-repair", {SQL: PROGRAM_SQL + "\nmsck repair table events;\n"},
         SQL, 14, "unsupported statement MSCK REPAIR"),
    Case("create-table-as-select",
         {SQL: PROGRAM_SQL + "\ncreate table copy as select * from events;\n"},
         SQL, 14, "CREATE TABLE ... AS SELECT is not supported"),
    Case("create-table-like", {SQL: PROGRAM_SQL + "\ncreate table t2 like events;\n"},
         SQL, 14, "table 't2' needs a column list"),
    Case("view-without-query", {SQL: PROGRAM_SQL + "\ncreate view v2;\n"},
         SQL, 14, "view 'v2' needs AS <query>"),
    Case("create-or-replace-view",
         {SQL: PROGRAM_SQL + "\ncreate or replace view v2 as select * from daily;\n"},
         SQL, 14, "CREATE OR REPLACE is not supported"),
    Case("create-table-if-not-exists",
         {SQL: PROGRAM_SQL + "\ncreate table if not exists t2 (a int);\n"},
         SQL, 14, "CREATE IF NOT EXISTS is not supported"),
    Case("create-temporary-view",
         {SQL: PROGRAM_SQL + "\ncreate temporary view v2 as select * from daily;\n"},
         SQL, 14, "view 'v2': unsupported clause 'TEMPORARY'"),
    # --- tables --------------------------------------------------------------------------
    Case("unsupported-table-property",
         {SQL: PROGRAM_SQL + "\ncreate table t2 (a int)\nwith ('connector' = 'kafka');\n"},
         SQL, 14, "unsupported property 'connector'"),
    Case("bad-materialized-value",
         {SQL: PROGRAM_SQL + "\ncreate table t2 (a int)\n"
                             "tblproperties ('materialized' = 'yes');\n"},
         SQL, 14, "'materialized' must be 'true' or 'false', got 'yes'"),
    Case("numeric-materialized-value",
         {SQL: PROGRAM_SQL + "\ncreate table t2 (a int)\ntblproperties ('materialized' = 1);\n"},
         SQL, 14, "got '1'"),
    Case("duplicate-column",
         {SQL: PROGRAM_SQL + "\ncreate table t2 (\n  a int,\n  b string,\n  A bigint\n);\n"},
         SQL, 14, "duplicate column 'a'"),
    Case("primary-key-not-a-column",
         {SQL: PROGRAM_SQL + "\ncreate table t2 (a int, b int, primary key (a, c));\n"},
         SQL, 14, "primary key column 'c' is not a column"),
    Case("column-without-type",
         {SQL: PROGRAM_SQL + "\ncreate table t2 (a int, b);\n"},
         SQL, 14, "table 't2': column 'b' has no type"),
    Case("qualified-table-name",
         {SQL: PROGRAM_SQL + "\ncreate table db.t (a int);\n"},
         SQL, 14, "qualified name 'db.t' is not supported"),
    # --- views and the graph -------------------------------------------------------------
    Case("unknown-relation-in-view",
         {SQL: PROGRAM_SQL + "\ncreate view v2 as\nselect * from dialy;\n"},
         SQL, 15, "view 'v2' reads unknown relation 'dialy' (did you mean 'daily'?)"),
    Case("unknown-relation-in-join",
         {SQL: PROGRAM_SQL + "\ncreate view v2 as\nselect * from daily d\n"
                             "join people p on d.n = p.id;\n"},
         SQL, 16, "reads unknown relation 'people'"),
    Case("qualified-name-in-view",
         {SQL: PROGRAM_SQL + "\ncreate view v2 as select * from db.events;\n"},
         SQL, 14, "qualified names are not supported"),
    Case("qualified-view-name",
         {SQL: PROGRAM_SQL + "\ncreate view db.v2 as select * from events;\n"},
         SQL, 14, "qualified name 'db.v2' is not supported"),
    Case("cycle-of-two-views",
         {SQL: PROGRAM_SQL + "\ncreate view a as select * from b;\n\n"
                             "create view b as select * from a;\n"},
         SQL, 14, "cycle between views"),
    Case("self-reading-view",
         {SQL: PROGRAM_SQL + "\ncreate view loop as\nselect * from loop;\n"},
         SQL, 14, "cycle between views: loop -> loop"),
    Case("duplicate-relation-across-files",
         {SPEC: PIPELINE_YAML + "sql: [program.sql, more.sql]\n",
          "pipelines/p/more.sql": "-- more\n\ncreate view daily as select 1 as n;\n"},
         "pipelines/p/more.sql", 3, "duplicate relation 'daily' (first defined at "),
    Case("renamed-to-an-unknown-relation",
         {SPEC: PIPELINE_YAML + "renamed:\n  old_daily: dialy\n"},
         SPEC, 15, "renamed: old_daily -> dialy: 'dialy' is not a table or view of the pipeline"),
    Case("renamed-from-a-relation-still-defined",
         {SPEC: PIPELINE_YAML + "renamed: {events: daily}\n"},
         SPEC, 14, "renamed: events -> daily: 'events' is still defined"),
    Case("renamed-to-a-bad-name",
         {SPEC: PIPELINE_YAML + "renamed: {daily: '../x'}\n"},
         SPEC, 14, "renamed.daily: '../x' is not a valid name"),
    Case("snapshot-on-bootstrap-on-an-input",
         {SPEC: PIPELINE_YAML.replace("    path: data/in\n",
                                      "    path: data/in\n    snapshot_on_bootstrap: true\n")},
         SPEC, 5, "snapshot_on_bootstrap is for output connectors"),
    Case("default-that-calls-a-function",
         {SQL: PROGRAM_SQL.replace("kind string,", "kind string default current_user(),")},
         SQL, 1, "the DEFAULT of column 'kind' must be a literal"),
    Case("duplicate-relation-case-insensitive",
         {SQL: PROGRAM_SQL + "\ncreate table EVENTS (a int);\n"},
         SQL, 14, "duplicate relation 'events'"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_malformed_project(tmp_path: Path, case: Case) -> None:
    root = write_project(tmp_path, case.files)
    result = run_validate(root)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    lines = result.output.splitlines()
    pattern = rf"error: (?P<path>\S*?{re.escape(case.file)}):(?P<line>\d+)(:(?P<column>\d+))?: "
    match = re.match(pattern, lines[0])
    assert match, f"no '{case.file}:<line>: ' location in: {lines[0]}"
    # An error at a token is followed by its source line and a caret under it.
    assert len(lines) == (3 if match["column"] else 1), result.output
    assert (Path.cwd() / match["path"]).resolve() == (root / case.file).resolve(), lines[0]
    assert int(match["line"]) == case.line, lines[0]
    assert case.fragment in lines[0], lines[0]
    assert "Traceback" not in result.output


def test_cases_are_distinct() -> None:
    assert len({case.id for case in CASES}) == len(CASES) >= 30


def test_duplicate_relation_names_first_location(tmp_path: Path) -> None:
    case = next(case for case in CASES if case.id == "duplicate-relation-across-files")
    root = write_project(tmp_path, case.files)
    output = run_validate(root).output
    assert re.search(r"first defined at \S*pipelines/p/program\.sql:8\)", output), output


def test_valid_project_passes(tmp_path: Path) -> None:
    result = run_validate(write_project(tmp_path, {}))
    assert result.exit_code == 0, result.output
    assert result.output == ("p: 1 tables, 1 views, 1 input and 1 output connectors: ok\n"
                             "  view daily: maintained or recomputed, whichever is cheaper\n")


def test_valid_project_with_cte_named_like_a_view(tmp_path: Path) -> None:
    """A CTE may shadow another view's name: it is not a read of that view, so no cycle."""
    sql = PROGRAM_SQL + textwrap.dedent("""\

        create materialized view summary as
        with daily as (select kind, count(*) as n from events group by kind)
        select kind, n from daily;

        create view totals as
        with summary as (select sum(n) as total from daily)
        select total from summary;
        """)
    spec = PIPELINE_YAML + "sql: [program.sql]\nbootstrap_policy: allow\n"
    root = write_project(tmp_path, {SQL: sql, SPEC: spec})
    result = run_validate(root)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [  # totals only names its CTE's aggregate: that
        "p: 1 tables, 3 views, 1 input and 1 output connectors: ok",  # (desired/view_parts)
        "  view daily: maintained or recomputed, whichever is cheaper",
        "  view summary: maintained or recomputed, whichever is cheaper",
        "  view totals: maintained or recomputed, whichever is cheaper"]


def test_valid_materialized_spellings(tmp_path: Path) -> None:
    """Spark takes a quoted or a bare boolean as a property value; both must be accepted."""
    sql = PROGRAM_SQL + textwrap.dedent("""\

        create table t1 (a int) with ('materialized' = 'false');
        create table t2 (a int) tblproperties ('materialized' = true);
        create table t3 (a int) tblproperties ('MATERIALIZED' = FALSE);
        """)
    root = write_project(tmp_path, {SQL: sql})
    result = run_validate(root)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == \
        "p: 4 tables, 1 views, 1 input and 1 output connectors: ok"
    _, [program] = load_programs(root)
    assert {name: program.tables[name].materialized for name in ("t1", "t2", "t3")} == \
        {"t1": False, "t2": True, "t3": False}


def test_valid_project_two_pipelines_without_settings(tmp_path: Path) -> None:
    other = {
        "pipelines/q/pipeline.yaml": "name: q\n",
        "pipelines/q/a.sql": "create table t (a int);\n",
        "pipelines/q/b.sql": "create view v as select a from t;\n",
        "reconcile.yaml": None,
    }
    result = run_validate(write_project(tmp_path, other))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "p: 1 tables, 1 views, 1 input and 1 output connectors: ok",
        "  view daily: maintained or recomputed, whichever is cheaper",
        "q: 1 tables, 1 views, 0 input and 0 output connectors: ok",
        "  view v: maintained or recomputed, whichever is cheaper",
    ]


def test_debug_shows_traceback(tmp_path: Path) -> None:
    """With --debug the error propagates (Python prints the traceback) instead of one line."""
    root = write_project(tmp_path, {SQL: PROGRAM_SQL + "\ndrop table events;\n"})
    result = run_validate(root, "--debug")
    assert result.exit_code == 1
    assert isinstance(result.exception, ReconcileError), result.output
    assert "error: " not in result.output
    shown = "".join(traceback.format_exception(*result.exc_info))
    assert "desired/parsing/sql.py" in shown
    assert "program.sql:14: unsupported statement DROP" in shown.splitlines()[-1]


def test_a_missing_input_folder_is_an_error_at_validate_and_plan(tmp_path: Path) -> None:
    """A mistyped `path` is refused at its own line (the path said once) before anything is
    touched; an output's folder is made by the first step, and an object store is not
    looked at."""
    root = write_project(tmp_path, {SPEC: PIPELINE_YAML.replace("path: data/in",
                                                                "path: data/inn")})
    for command in (["validate"], ["plan", "--backend", str(tmp_path / "state")]):
        result = CliRunner().invoke(cli, ["-C", str(root), *command])
        assert result.exit_code == 1, result.output
        assert result.output.strip() == (
            f"error: {root / SPEC}:9: input connector 'src': no folder at data/inn: create it "
            "or correct `path`")
    assert not (tmp_path / "state").exists(), "nothing touched"
    on_s3 = PIPELINE_YAML.replace("path: data/in", "path: s3://bucket/in")
    assert run_validate(write_project(tmp_path / "s3", {SPEC: on_s3})).exit_code == 0


@pytest.mark.parametrize(("key", "message"), [
    ("'kind, nope'", "view 'v': key column 'nope' is not one of its output columns (kind, n)"),
    ("'kind;drop'", "view 'v': 'key' names output columns, as 'id' or 'id, day', not "
                    "'kind;drop'")])
def test_a_declared_view_key_names_output_columns(tmp_path: Path, key: str,
                                                  message: str) -> None:
    sql = ("create table events (id bigint, kind string);\n"
           f"create view v tblproperties ('key' = {key}) as\n"
           "select kind, count(*) as n from events group by kind;\n")
    result = run_validate(write_project(tmp_path, {SQL: sql, SPEC: "name: p\n"}))
    assert result.exit_code == 1
    assert result.output.strip() == f"error: {tmp_path / SQL}:2: {message}"
