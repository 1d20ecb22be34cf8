"""Expectations (`CONSTRAINT name EXPECT (cond) [ON VIOLATION DROP ROW | FAIL UPDATE]`).

Parsed out of a table's column list or a view's parenthesis, checked as hostile SQL,
part of their relation's fingerprint; a keep or FAIL UPDATE change recomputes nothing
(plan: `keep`), a DROP ROW change on a view recomputes it. Through the real CLI, each
action on a stream of steps, the counts checked against the rows inserted, and a FAIL
UPDATE leaving the manifest and every committed Delta version as they were.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from reconciler.plan.diff import diff_programs
from reconciler.support.errors import ReconcileError
from tests.cli_helpers import manifest, query, reconcile, versions
from tests.projects import program_of, single_pipeline, write_files

# ---------------------------------------------------------------- parsing and the plan


def test_clauses_are_taken_out_of_tables_and_views(tmp_path: Path) -> None:
    program = program_of(single_pipeline(tmp_path, """
        CREATE TABLE t (k INT, a INT,
          CONSTRAINT positive EXPECT (a > 0 /* a comment */) ON VIOLATION DROP ROW,
          constraint Small expect (A < 100));
        CREATE MATERIALIZED VIEW v (CONSTRAINT known EXPECT (k IS NOT NULL) ON VIOLATION
          FAIL UPDATE) AS SELECT k, a FROM t;
        CREATE VIEW w AS SELECT 'CONSTRAINT c EXPECT (1)' AS s FROM t;
        """))
    assert [e.document() for e in program.tables["t"].expectations] == [
        {"name": "positive", "condition": "a > 0", "action": "drop"},
        {"name": "small", "condition": "a < 100", "action": "keep"}]
    assert [(e.name, e.action, e.line) for e in program.views["v"].expectations] == [
        ("known", "fail", 4)]
    assert program.views["w"].expectations == ()  # the words inside a string are not a clause
    assert program.views["v"].query == "SELECT k , a FROM t"
    assert program.document()["views"]["v"]["expectations"][0]["action"] == "fail"
    assert "expectations" not in program.document()["views"]["w"]


@pytest.mark.parametrize(("clause", "problem"), [
    ("CONSTRAINT c EXPECT (a > (SELECT max(a) FROM t))", "may not hold a subquery"),
    ("CONSTRAINT c EXPECT (reflect('java.lang.System', 'getenv', 'HOME') = a)",
     "function reflect() is not allowed"),
    ("CONSTRAINT c EXPECT (a = '${env:HOME}')", "'${...}' is not allowed"),
    ("CONSTRAINT c EXPECT (sum(a) > 0)", "no aggregate or window function"),
    ("CONSTRAINT c EXPECT (other.a > 0)", "write the relation's own columns unqualified"),
    ("CONSTRAINT c EXPECT (b > 0)", "reads 'b', which is not a column of it"),
    ("CONSTRAINT c EXPECT (current_date > '2020-01-01')", "current_date() is not allowed"),
    ("CONSTRAINT c EXPECT (a = 1 OR `user` = 'x')", "Spark would call user() instead"),
    ("CONSTRAINT c EXPECT (a + 1)", "must be true or false"),
    ("CONSTRAINT c EXPECT (a > 0) ON VIOLATION EXPLODE", "only ON VIOLATION DROP ROW"),
    ("CONSTRAINT c EXPECT (a > 0), CONSTRAINT c EXPECT (a < 9)", "duplicate expectation 'c'"),
])
def test_a_bad_condition_is_refused_at_validate_with_file_and_line(
        tmp_path: Path, clause: str, problem: str) -> None:
    single_pipeline(tmp_path, f"-- first line\nCREATE TABLE t (a INT,\n  {clause});\n")
    output = reconcile(tmp_path, "validate", expect=1)
    assert "pipelines/p/program.sql:3: table 't': expectation" in output or \
        "pipelines/p/program.sql:3: table 't': duplicate" in output, output
    assert problem in output
    assert len(output.strip().splitlines()) == 1


def test_a_view_condition_reads_the_view_s_own_columns(tmp_path: Path) -> None:
    single_pipeline(tmp_path, """
        CREATE TABLE t (k INT, a INT);
        CREATE VIEW v (CONSTRAINT c EXPECT (a > 0)) AS SELECT k FROM t;
        """)
    with pytest.raises(ReconcileError, match="view 'v': expectation 'c' reads 'a'"):
        program_of(tmp_path)


SQL = """
CREATE TABLE t (k INT, a INT{table});
CREATE MATERIALIZED VIEW v {view}AS SELECT k, a FROM t;
CREATE MATERIALIZED VIEW r AS SELECT k FROM v;
"""


def program_with(root: Path, table: str = "", view: str = "") -> dict:
    single_pipeline(root, SQL.format(table=table, view=view))
    return program_of(root).document()


def test_expectations_are_part_of_the_fingerprint_and_drop_row_of_the_readers(
        tmp_path: Path) -> None:
    plain = program_with(tmp_path)
    kept = program_with(tmp_path, view="(CONSTRAINT c EXPECT (a > 0)) ")
    failing = program_with(tmp_path, view="(CONSTRAINT c EXPECT (a > 0) ON VIOLATION FAIL "
                           "UPDATE) ")
    dropped = program_with(tmp_path, view="(CONSTRAINT c EXPECT (a > 0) ON VIOLATION DROP "
                           "ROW) ")
    fingerprints = {doc["views"]["v"]["fingerprint"] for doc in (plain, kept, failing, dropped)}
    assert len(fingerprints) == 4
    # Counting or failing changes no reader's input; dropping rows does.
    assert plain["views"]["r"]["fingerprint"] == kept["views"]["r"]["fingerprint"] \
        == failing["views"]["r"]["fingerprint"] != dropped["views"]["r"]["fingerprint"]
    on_table = program_with(tmp_path, table=", CONSTRAINT c EXPECT (a > 0) ON VIOLATION DROP "
                            "ROW")
    assert on_table["tables"]["t"]["fingerprint"] != plain["tables"]["t"]["fingerprint"]
    assert on_table["views"]["v"]["fingerprint"] == plain["views"]["v"]["fingerprint"]


def test_the_diff_keeps_a_keep_or_fail_change_and_recomputes_a_drop_row_one(
        tmp_path: Path) -> None:
    plain = program_with(tmp_path)
    kept = program_with(tmp_path, view="(CONSTRAINT c EXPECT (a > 0)) ",
                        table=", CONSTRAINT d EXPECT (k IS NOT NULL) ON VIOLATION FAIL UPDATE")
    diff = diff_programs(plain, kept)
    assert not diff.has_program_changes and diff.has_changes
    assert diff.expectation_changes == {
        "t": ["expectation d added: EXPECT (NOT k IS NULL) ON VIOLATION FAIL UPDATE"],
        "v": ["expectation c added: EXPECT (a > 0)"]}
    dropped = program_with(tmp_path, view="(CONSTRAINT c EXPECT (a > 0) ON VIOLATION DROP "
                           "ROW) ")
    diff = diff_programs(kept, dropped)
    assert diff.views == {"r": "modified", "v": "modified"}


# ---------------------------------------------------------------- steps through the CLI

PIPELINE = """
CREATE TABLE orders (id BIGINT, amount INT, note STRING,
  CONSTRAINT has_note EXPECT (note IS NOT NULL),
  CONSTRAINT not_huge EXPECT (amount < 1000) ON VIOLATION DROP ROW);
CREATE MATERIALIZED VIEW positive (
  CONSTRAINT above_zero EXPECT (amount > 0) ON VIOLATION DROP ROW,
  CONSTRAINT small EXPECT (amount < 100)
) AS SELECT id, amount FROM orders;
CREATE MATERIALIZED VIEW totals AS SELECT count(*) AS n, sum(amount) AS total FROM positive;
CREATE MATERIALIZED VIEW big (CONSTRAINT under_600 EXPECT (amount < 600))
  TBLPROPERTIES ('refresh' = 'full') AS SELECT id, amount FROM orders WHERE amount > 100;
"""


def stream_project(root: Path, sql: str = PIPELINE) -> Path:
    return write_files(root, {
        "reconcile.yaml": "spark:\n  master: local[2]\n",
        "pipelines/p/pipeline.yaml": (
            "name: p\nbootstrap_policy: allow\nconnectors:\n"
            "  - {name: orders_in, table: orders, type: files, format: json, "
            "path: input/orders}\n"),
        "pipelines/p/program.sql": sql,
    })


def add_orders(project: Path, name: str, rows: list[tuple[int, int, str | None]]) -> None:
    folder = project / "input/orders"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text("".join(
        json.dumps({"id": i, "amount": a, "note": n}) + "\n" for i, a, n in rows))


def step_counts(project: Path) -> dict:
    return manifest(project, "p")["last_step"]["expectations"]


def test_each_action_on_a_stream_of_steps(spark: SparkSession, tmp_path: Path) -> None:
    project = stream_project(tmp_path)
    reconcile(project, "apply", "--auto-approve")
    # Step 1: 5 rows; one huge (dropped by the table), one without a note (kept, counted),
    # one negative (dropped by the view), one of 500 (kept by the view, counted as not small).
    add_orders(project, "1", [(1, 10, "a"), (2, 5000, "b"), (3, 20, None), (4, -5, "d"),
                              (5, 500, "e")])
    assert "step committed" in reconcile(project, "run")
    assert step_counts(project) == {
        "orders": {"has_note": {"action": "keep", "rows": 5, "violations": 1},
                   "not_huge": {"action": "drop", "rows": 5, "violations": 1}},
        "positive": {"above_zero": {"action": "drop", "rows": 4, "violations": 1},
                     "small": {"action": "keep", "rows": 3, "violations": 1}},
        "big": {"under_600": {"action": "keep", "rows": 1, "violations": 0}}}
    assert [r["id"] for r in query(project, "p", "SELECT id FROM orders ORDER BY id")] == [
        1, 3, 4, 5]
    assert [r["id"] for r in query(project, "p", "SELECT id FROM positive ORDER BY id")] == [
        1, 3, 5]
    assert query(project, "p", "SELECT * FROM totals") == [{"n": 3, "total": 530}]
    # Step 2: 4 rows, two violating the table's keep expectation, one the view's drop,
    # one (700) both views' keep expectations; the recomputed view counts its change only.
    add_orders(project, "2", [(6, 1, None), (7, 0, None), (8, 2, "h"), (9, 700, "i")])
    assert "step committed" in reconcile(project, "run")
    assert step_counts(project) == {
        "orders": {"has_note": {"action": "keep", "rows": 4, "violations": 2},
                   "not_huge": {"action": "drop", "rows": 4, "violations": 0}},
        "positive": {"above_zero": {"action": "drop", "rows": 4, "violations": 1},
                     "small": {"action": "keep", "rows": 3, "violations": 1}},
        "big": {"under_600": {"action": "keep", "rows": 1, "violations": 1}}}
    assert query(project, "p", "SELECT * FROM totals") == [{"n": 6, "total": 1233}]
    totals = manifest(project, "p")["relations"]
    assert totals["orders"]["expectations"]["has_note"] == {
        "action": "keep", "rows": 9, "violations": 3}
    assert totals["positive"]["expectations"]["above_zero"] == {
        "action": "drop", "rows": 8, "violations": 2}
    assert totals["big"]["expectations"]["under_600"] == {
        "action": "keep", "rows": 2, "violations": 1}
    status = reconcile(project, "status")
    assert ("expectation orders.has_note: 2 of 4 rows violating in the last step, 3 of 9 "
            "rows violating in all") in status
    assert "expectation positive.above_zero (DROP ROW): 1 of 4 rows dropped" in status
    history = reconcile(project, "state", "history", "-p", "p").splitlines()
    assert "expectations: big.under_600 0/1, orders.has_note 1/5, orders.not_huge 1/5" \
        in history[-2]
    assert "orders.has_note 2/4" in history[-1]
    # No new input: no step, no job.
    assert "no new input" in reconcile(project, "run")


FAILING = """
CREATE TABLE orders (id BIGINT, amount INT, note STRING);
CREATE MATERIALIZED VIEW checked (
  CONSTRAINT positive EXPECT (amount > 0) ON VIOLATION FAIL UPDATE
) AS SELECT id, amount FROM orders;
"""


def test_fail_update_stops_the_step_and_leaves_the_state(
        spark: SparkSession, tmp_path: Path) -> None:
    project = stream_project(tmp_path, FAILING)
    reconcile(project, "apply", "--auto-approve")
    add_orders(project, "1", [(1, 10, "a"), (2, 20, "b")])
    assert "step committed" in reconcile(project, "run")
    assert step_counts(project) == {
        "checked": {"positive": {"action": "fail", "rows": 2, "violations": 0}}}
    manifest_file = project / ".reconcile/state/p/manifest.json"
    before, pinned = manifest_file.read_bytes(), versions(project, "p")
    add_orders(project, "2", [(3, 30, "c"), (4, -1, "d"), (5, 0, "e")])
    output = reconcile(project, "run", expect=1)
    assert "view 'checked': expectation 'positive'" in output
    assert "failed on 2 of 3 new row(s)" in output
    assert "id=4, amount=-1" in output and "id=5, amount=0" in output
    assert len(output.strip().splitlines()) == 1
    assert manifest_file.read_bytes() == before
    assert versions(project, "p") == pinned
    # What the step wrote is in versions no manifest commits (as after a crash): reads
    # see the committed state, and the next step meets the same rows again.
    assert [r["id"] for r in query(project, "p", "SELECT id FROM checked ORDER BY id")] == [1, 2]
    assert reconcile(project, "run", expect=1) == output
    assert manifest_file.read_bytes() == before
    # Status says the pipeline is stuck, and what lets it go on, without the rows' values.
    [report] = json.loads(reconcile(project, "status", "--json"))
    assert report["last_failure"]["stuck_until"].startswith(
        "the rows violating 'positive' are deleted")
    assert "amount=-1" not in json.dumps(report)
    assert "  stuck: every step fails the same way until the rows violating 'positive' are " \
        "deleted" in reconcile(project, "status")
    # Removing the bad rows lets the stream go on.
    reconcile(project, "execute", "-p", "p", "DELETE FROM orders WHERE amount <= 0")
    assert [r["id"] for r in query(project, "p", "SELECT id FROM checked ORDER BY id")] == [
        1, 2, 3]
    assert "stuck" not in reconcile(project, "status")


def test_plan_shows_expectation_changes_and_apply_lands_them(
        spark: SparkSession, tmp_path: Path) -> None:
    project = stream_project(tmp_path, PIPELINE.replace(
        "CONSTRAINT above_zero EXPECT (amount > 0) ON VIOLATION DROP ROW,", ""))
    reconcile(project, "apply", "--auto-approve")
    add_orders(project, "1", [(1, 10, "a"), (2, -3, "b")])
    reconcile(project, "run")
    assert [r["id"] for r in query(project, "p", "SELECT id FROM positive ORDER BY id")] == [1, 2]
    # A keep expectation added: shown, nothing recomputed, committed by apply.
    sql = project / "pipelines/p/program.sql"
    sql.write_text(sql.read_text().replace(
        "CONSTRAINT small EXPECT (amount < 100)",
        "CONSTRAINT small EXPECT (amount < 100), CONSTRAINT above_zero EXPECT (amount > 0)"))
    [plan] = json.loads(reconcile(project, "plan", "--json"))["pipelines"]
    [action] = [a for a in plan["actions"] if a["name"] == "positive"]
    assert action["action"] == "keep"
    assert "expectation above_zero added: EXPECT (amount > 0)" in action["reasons"]
    assert "above_zero" in reconcile(project, "plan")
    pinned = versions(project, "p")
    reconcile(project, "apply", "--auto-approve")
    assert versions(project, "p")["positive"] == pinned["positive"]
    assert [e["name"] for e in manifest(project, "p")["program"]["views"]["positive"][
        "expectations"]] == ["small", "above_zero"]
    # The same one changed to DROP ROW on a view with rows: recomputed, the plan says so.
    sql.write_text(sql.read_text().replace("EXPECT (amount > 0)",
                                           "EXPECT (amount > 0) ON VIOLATION DROP ROW"))
    [plan] = json.loads(reconcile(project, "plan", "--json"))["pipelines"]
    [action] = [a for a in plan["actions"] if a["name"] == "positive"]
    assert action["action"] == "recompute"
    assert any("recomputed without the rows they drop" in r for r in action["reasons"])
    assert [a["action"] for a in plan["actions"] if a["name"] == "totals"] == ["recompute"]
    reconcile(project, "apply", "--auto-approve")
    assert [r["id"] for r in query(project, "p", "SELECT id FROM positive ORDER BY id")] == [1]
    assert query(project, "p", "SELECT * FROM totals") == [{"n": 1, "total": 10}]
    # Counted over the bootstrap's change (every row), from zero: the view was recomputed.
    assert manifest(project, "p")["relations"]["positive"]["expectations"] == {
        "above_zero": {"action": "drop", "rows": 2, "violations": 1},
        "small": {"action": "keep", "rows": 1, "violations": 0}}
    # A new view whose FAIL UPDATE expectation the existing rows violate fails the apply.
    sql.write_text(sql.read_text() + "CREATE MATERIALIZED VIEW strict (CONSTRAINT noted "
                   "EXPECT (note = 'a') ON VIOLATION FAIL UPDATE) AS SELECT id, note FROM "
                   "orders;\n")
    output = reconcile(project, "apply", "--auto-approve", expect=1)
    assert "view 'strict': expectation 'noted'" in output and "id=2, note='b'" in output


CANARY = "canary-5e1f-row-value"
"""A value only violating rows hold: it may reach the terminal, never a manifest."""

PRIVATE = """
CREATE TABLE orders (id BIGINT, amount INT, note STRING,
  CONSTRAINT short_note EXPECT (length(note) < 30) ON VIOLATION FAIL UPDATE);
"""


def test_a_failed_expectation_shows_values_on_the_terminal_only(
        spark: SparkSession, tmp_path: Path) -> None:
    """The violating rows' values are for whoever ran the command: the CLI prints them;
    the Failed manifest, `status --json` and the next plan's note hold the relation, the
    expectation and the counts only."""
    project = write_files(tmp_path, {
        "reconcile.yaml": "spark:\n  master: local[2]\n",
        "pipelines/p/pipeline.yaml": "name: p\nbootstrap_policy: allow\n",
        "pipelines/p/program.sql": PRIVATE})
    reconcile(project, "apply", "--auto-approve")
    manifest_file = project / ".reconcile/state/p/manifest.json"
    before = manifest_file.read_bytes()
    # A step (`execute`): the table's expectation stops it; the terminal names the row.
    refused = reconcile(project, "execute", "-p", "p",
                        f"INSERT INTO orders VALUES (1, 5, '{CANARY}-longer-than-thirty')",
                        expect=1)
    assert f"note='{CANARY}-longer-than-thirty'" in refused
    assert manifest_file.read_bytes() == before
    reconcile(project, "execute", "-p", "p", f"INSERT INTO orders VALUES (2, -3, '{CANARY}')")
    # A bootstrap: a new view whose FAIL UPDATE expectation the stored row violates.
    sql = project / "pipelines/p/program.sql"
    sql.write_text(sql.read_text() + "CREATE MATERIALIZED VIEW strict (CONSTRAINT positive "
                   "EXPECT (amount > 0) ON VIOLATION FAIL UPDATE) AS SELECT note, amount "
                   "FROM orders;\n")
    failed = reconcile(project, "apply", "--auto-approve", expect=1)
    assert f"note='{CANARY}', amount=-3" in failed  # the terminal: the row's key
    public = ("view 'strict': expectation 'positive' (ON VIOLATION FAIL UPDATE) failed on 1 "
              "of 1 new row(s); the step stopped and nothing was committed")
    stored = manifest(project, "p")
    assert stored["status"] == "Failed" and stored["status_details"]["error"] == public
    assert CANARY not in manifest_file.read_text()
    status = reconcile(project, "status", "--json")
    assert public in status and CANARY not in status
    plan = reconcile(project, "plan")
    assert f"last apply failed: {public}" in plan and CANARY not in plan


def test_a_continuous_runner_logs_the_values_and_reports_the_counts(
        spark: SparkSession, tmp_path: Path) -> None:
    """The runner's own log (its standard streams) is its operator's: it names the
    violating row; its report in the backend (`reconcile status`) does not."""
    project = stream_project(tmp_path, FAILING)
    reconcile(project, "apply", "--auto-approve")
    add_orders(project, "1", [(1, 10, "a"), (-7, -1, "c")])
    # The view's key: its first column and the condition's (id, amount), not the note.
    add_orders(project, "2", [(2, -2, "b")])
    log = reconcile(project, "run", "--continuous", "--interval", "0.1", "--max-failures",
                    "1", expect=1)
    assert "p: step failed: view 'checked': expectation 'positive' (EXPECT (amount > 0)" \
        in log and "id=-7, amount=-1" in log
    assert "1 rounds of steps in a row failed; last: p: step failed: view 'checked': " \
        "expectation 'positive' (ON VIOLATION FAIL UPDATE) failed on 2 of" in log
    report = (project / ".reconcile/state/p/runner.json").read_text()
    assert "failed on 2 of" in report and "id=-7" not in report and "amount=-1" not in report
