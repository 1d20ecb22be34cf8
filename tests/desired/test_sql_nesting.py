"""Deeply nested SQL is refused in one line naming the file and line (issue 51, finding 7).

sqlglot recurses once per level of nesting, so a pull request's view of thousands of
nested parentheses used to end in a `RecursionError` traceback. Through the real CLI
(`validate`, `plan`: no Spark) and `reconcile github`'s plan on a pull request.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from reconciler.desired.parsing.nesting import MAX_DEPTH
from tests.cli_helpers import reconcile
from tests.fake_github import FakeGitHub
from tests.github_harness import Workspace, only_sticky
from tests.projects import single_pipeline

DEEP = 5000


def nested(depth: int, inner: str = "a") -> str:
    return "(" * depth + inner + ")" * depth


def refused_in_one_line(output: str, line: int) -> None:
    """One line, the file and line first, saying why: no traceback."""
    assert len(output.strip().splitlines()) == 1, output[-2000:]
    assert output.startswith("error: "), output
    assert f"pipelines/p/program.sql:{line}: SQL nested too deeply" in output, output


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_thousands_of_nested_parentheses_are_refused(tmp_path: Path, command: str) -> None:
    single_pipeline(tmp_path, "CREATE TABLE t (a INT);\n-- a comment\n"
                              f"CREATE VIEW v AS SELECT {nested(DEEP)} AS x FROM t;\n")
    refused_in_one_line(reconcile(tmp_path, command, expect=1), 3)


@pytest.mark.parametrize(("sql", "line"), [
    (f"CREATE TABLE t (a INT);\nCREATE VIEW v AS SELECT {'NOT ' * DEEP} a > 0 AS x FROM t;", 2),
    (f"CREATE TABLE t (a INT);\nCREATE VIEW v AS SELECT {'- ' * DEEP} a AS x FROM t;", 2),
    ("CREATE TABLE t (a INT);\nCREATE VIEW v AS SELECT "
     f"{'CASE WHEN a > 0 THEN ' * DEEP} 1 {' END' * DEEP} AS x FROM t;", 2),
    (f"CREATE TABLE u (b INT);\nCREATE TABLE t (a INT DEFAULT {nested(DEEP, '1')});", 2),
    # The line where the nesting goes too deep: the expectation's, not the statement's.
    ("CREATE TABLE u (b INT);\nCREATE TABLE t (a INT,\n"
     f"  CONSTRAINT c EXPECT ({nested(DEEP)} > 0));", 3),
], ids=["not", "minus", "case", "table-default", "expectation"])
def test_every_deep_shape_of_pipeline_sql_is_refused(tmp_path: Path, sql: str,
                                                     line: int) -> None:
    single_pipeline(tmp_path, sql + "\n")
    refused_in_one_line(reconcile(tmp_path, "validate", expect=1), line)


def test_nesting_up_to_the_limit_is_accepted(tmp_path: Path) -> None:
    single_pipeline(tmp_path, "CREATE TABLE t (a INT);\n"
                              f"CREATE VIEW v AS SELECT {nested(MAX_DEPTH)} AS x FROM t;\n")
    assert "p: 1 tables, 1 views" in reconcile(tmp_path, "validate")
    single_pipeline(tmp_path, "CREATE TABLE t (a INT);\n"
                              f"CREATE VIEW v AS SELECT {nested(MAX_DEPTH + 1)} AS x FROM t;\n")
    refused_in_one_line(reconcile(tmp_path, "validate", expect=1), 2)


@contextmanager
def recursion_limit(frames: int) -> Iterator[None]:
    """Python's recursion limit this many frames above the caller's depth (a thread with a
    small stack, or a deeper caller, meets it sooner than a test does)."""
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(saved)


def test_a_recursion_error_past_the_depth_check_is_one_line(tmp_path: Path) -> None:
    """What the depth check lets through can still exhaust a smaller stack: the
    `RecursionError` of parsing or analysing a statement says its file and line too."""
    single_pipeline(tmp_path, "CREATE TABLE t (a INT);\n"
                              f"CREATE VIEW v AS SELECT {nested(MAX_DEPTH - 1)} AS x FROM t;\n")
    with recursion_limit(120):  # validate itself needs fewer; a parse of 99 levels, more
        output = reconcile(tmp_path, "validate", expect=1)
    refused_in_one_line(output, 2)


def test_a_pull_request_s_deep_view_is_refused_in_the_plan_comment(
        workspace: Workspace, github: FakeGitHub) -> None:
    sql = workspace.project / "pipelines/grades/program.sql"
    sql.write_text(sql.read_text() + f"\ncreate view deep as select {nested(DEEP, 'id')} "
                                     "as x from students;\n")

    run = workspace.pull_request("opened", workspace.commit("a deep view"))

    assert run.exit_code == 1 and run.outputs["result"] == "failed", run.log
    assert "Traceback" not in run.log and "RecursionError" not in run.log
    body = only_sticky(github)["body"]
    assert "Reconcile plan failed" in body and "reconcile-plan-id" not in body
    assert "pipelines/grades/program.sql:" in body and "nested too deeply" in body
    assert "nested too deeply" in run.outputs["failure-reason"]
