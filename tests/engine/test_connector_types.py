"""One interface per connector type (`engine.io.connector_types`, issue 83): the engine and
the CLI look at a connector's type in one place, and a step, a bootstrap and `status` go
through the registered interface for everything they ask of a connector."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from reconciler.engine.io import connector_types
from tests.cli_helpers import reconcile
from tests.projects import GRADES_INPUT, feed_grades, write_files

PACKAGE = Path(__file__).resolve().parents[2] / "reconciler"
TYPE_NAMES = {"files", "delta", "kafka"}


def _constant(node: ast.AST | None) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _is_type(node: ast.expr) -> bool:
    """`x.type`, `x["type"]` or `x.get("type")`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "type"
    if isinstance(node, ast.Subscript):
        return _constant(node.slice) == "type"
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get" and bool(node.args) and _constant(node.args[0]) == "type")


def _type_tests(path: Path) -> list[str]:
    """Comparisons of something's `type` (or `["type"]`, `.get("type")`) with a connector
    type's name, in one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        names = {side.value for side in sides if isinstance(side, ast.Constant)}
        typed = any(_is_type(side) for side in sides)
        if typed and names & TYPE_NAMES:
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_the_engine_and_the_cli_look_at_a_connectors_type_in_one_place() -> None:
    tests = [where for folder in ("engine", "cli", "operations", "runner")
             for path in sorted((PACKAGE / folder).rglob("*.py")) for where in _type_tests(path)]
    assert tests == []
    assert set(connector_types.TYPES) == TYPE_NAMES


class Recorded:
    """A connector type's interface that records what it was asked, then asks the real one."""

    def __init__(self, real: Any, calls: list[str]) -> None:
        self.real, self.calls = real, calls

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.real, name)

        def recorded(*args: Any) -> Any:
            self.calls.append(name)
            return method(*args)

        return recorded


@pytest.mark.spark
def test_a_step_a_bootstrap_and_status_ask_the_registered_interface(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setitem(connector_types.TYPES, "files",
                        Recorded(connector_types.TYPES["files"], calls))
    project = write_files(tmp_path, {
        "reconcile.yaml": "",
        "pipelines/p/pipeline.yaml": "name: p\nbootstrap_policy: allow\nconnectors:\n"
                                     + GRADES_INPUT + "      - name: best_out\n"
                                     "        view: best\n        type: files\n"
                                     "        format: json\n        path: output/best\n",
        "pipelines/p/program.sql": """
            create table grades (student_id bigint, class string, grade int);
            create materialized view best as
            select class, max(grade) as top from grades group by class;"""})
    reconcile(project, "apply", "--auto-approve")
    assert calls == ["start"]  # a first deployment starts the input's generation only
    calls.clear()
    feed_grades(project, "a.json", [(1, "algebra", 90), (2, "algebra", 70)])
    assert "step committed" in reconcile(project, "run")
    assert calls == ["pending", "ingest", "send"]
    calls.clear()
    assert "no new input" in reconcile(project, "run")
    assert calls == ["pending"]
    calls.clear()
    reconcile(project, "status")
    assert calls == ["waiting"]
