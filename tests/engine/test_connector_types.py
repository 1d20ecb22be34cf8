"""One interface per connector type (`engine.io.connector_types`, issue 83): the engine and
the CLI look at a connector's type in one place, and a step, a bootstrap and `status` go
through the registered interface for everything they ask of a connector."""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from reconciler.desired.settings import connector_kinds
from reconciler.engine.io import connector_types
from reconciler.engine.io.input_batch import land_batch
from reconciler.engine.runtime import PipelineRuntime
from reconciler.state.connectors import ConnectorDefinition, ConnectorState
from tests.cli_helpers import query, reconcile
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
    """No comparison of a type with a type's name anywhere: the engine asks
    `connector_types`, the declarations and the plan ask `connector_kinds`."""
    tests = [where for path in sorted(PACKAGE.rglob("*.py")) for where in _type_tests(path)]
    assert tests == []
    assert set(connector_types.TYPES) == set(connector_kinds.KINDS) == TYPE_NAMES


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
    assert calls == ["lag", "waiting"]


class LinesKind(connector_kinds.ConnectorKind):
    """A toy type's declaration: each line of a text file at `path` is a row."""

    name = "lines"
    reset_reads = "every line of {where}"


class LinesType(connector_types.UnpartitionedType):
    """The toy type's engine module: its offset is the count of lines ingested, kept as
    the connector's `source_version`."""

    def _lines(self, connector: ConnectorDefinition) -> list[str]:
        return Path(connector.location).read_text(encoding="utf-8").splitlines()

    def waiting(self, connector: ConnectorDefinition, state: ConnectorState,
                lag: Mapping[str, int] | None) -> int | None:
        return len(self._lines(connector)) - (state.source_version or 0)

    def ingest(self, runtime: PipelineRuntime, connector: ConnectorDefinition,
               state: ConnectorState, transaction: str) -> int:
        lines = self._lines(connector)
        new = lines[state.source_version or 0:]
        if not new:
            return 0
        rows = runtime.spark.createDataFrame([(line,) for line in new], "line string")
        land_batch(runtime, connector.relation, rows, marked=False, transaction=transaction,
                   batch_id=len(lines))
        state.source_version = len(lines)
        return 1

    def send(self, runtime: PipelineRuntime, connector: ConnectorDefinition,
             changes: DataFrame, serial: int, snapshot: bool, rows: int | None) -> int:
        raise AssertionError("the toy type is an input")


@pytest.mark.spark
def test_a_new_connector_type_is_its_declaration_and_its_engine_module(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Registered in the two registries, a type no file of the package knows is validated,
    planned, ingested, counted by status and refused where its declaration says so."""
    monkeypatch.setitem(connector_kinds.KINDS, "lines", LinesKind())
    monkeypatch.setitem(connector_types.TYPES, "lines", LinesType())
    project = write_files(tmp_path, {
        "reconcile.yaml": "",
        "pipelines/p/pipeline.yaml": "name: p\nbootstrap_policy: allow\nconnectors:\n"
                                     "  - name: words_in\n    table: words\n    type: lines\n"
                                     "    path: input/words.txt\n",
        "pipelines/p/program.sql": """
            create table words (line string);
            create materialized view lengths as
            select length(line) as size, count(*) as n from words group by length(line);""",
        "input/words.txt": "ab\ncd\n"})
    assert "words_in" in reconcile(project, "plan")
    reconcile(project, "apply", "--auto-approve")
    assert "step committed" in reconcile(project, "run")
    assert query(project, "p", "select size, n from lengths") == [{"size": 2, "n": 2}]
    (project / "input/words.txt").write_text("ab\ncd\nefg\n", encoding="utf-8")
    report = json.loads(reconcile(project, "status", "--json"))
    assert report[0]["waiting_input"] == {"words_in": 1}
    assert "step committed" in reconcile(project, "run")
    assert sorted(query(project, "p", "select size, n from lengths"),
                  key=lambda row: row["size"]) == [{"size": 2, "n": 2}, {"size": 3, "n": 1}]
    (project / "pipelines/p/pipeline.yaml").write_text(
        "name: p\nconnectors:\n  - name: words_in\n    table: words\n    type: lines\n"
        "    path: input/words.txt\n    format: json\n", encoding="utf-8")
    refused = reconcile(project, "plan", expect=1)
    assert "connector 'words_in' of type 'lines' takes no 'format'" in refused
