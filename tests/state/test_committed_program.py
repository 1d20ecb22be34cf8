"""The state bucket is not trusted as code: a manifest's program is checked like a pull
request's before a step, `execute` or `query` runs it (`desired.model.committed`).

Someone who can write the state prefix, but not the repository or the runner, edits the
committed manifest of a deployed pipeline (here the local backend's file; on S3 the same
document). Through the real CLI, every command that would run the stored SQL refuses it
with one line naming the manifest and the object, and nothing is committed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import reconcile
from tests.projects import copy_example

Forgery = Callable[[dict[str, Any], Path], None]


def transform_view(program: dict[str, Any], canary: Path) -> None:
    """A view whose SQL runs a shell command (the canary file shows it ran)."""
    view = program["views"]["avg_grade"]
    view["sql"] = (f"CREATE VIEW avg_grade AS SELECT TRANSFORM(student_id) USING "
                   f"'touch {canary}' AS (student_id) FROM grades")
    view["query"] = view["sql"].split(" AS ", 1)[1]


def reflect_view(program: dict[str, Any], canary: Path) -> None:
    program["views"]["avg_grade"]["sql"] = (
        "CREATE VIEW avg_grade AS SELECT reflect('java.lang.System', 'getenv', 'HOME') AS "
        "student_id FROM grades")


def substituted_default(program: dict[str, Any], canary: Path) -> None:
    table = program["tables"]["students"]
    table["sql"] = table["sql"].replace("name string", "name string DEFAULT "
                                        "'${env:AWS_SECRET_ACCESS_KEY}'", 1)
    assert "${env:" in table["sql"], table["sql"]


def query_unlike_its_sql(program: dict[str, Any], canary: Path) -> None:
    """The SQL is honest, the definition the diff and the engine read beside it is not."""
    program["views"]["avg_grade"]["query"] = "SELECT 1 AS student_id"


def connector_name_climbing_out(program: dict[str, Any], canary: Path) -> None:
    program["connectors"]["../../escape"] = {
        "direction": "input", "relation": "grades", "type": "files", "format": "json",
        "path": "input", "options": {}, "on_error": "fail", "throughput_options": {}}


@pytest.mark.parametrize(("forgery", "refusal"), [
    (transform_view, "TRANSFORM"),
    (reflect_view, "function reflect() is not allowed"),
    (substituted_default, "is not allowed"),
    (query_unlike_its_sql, "view 'avg_grade': the stored definition is not what its SQL says"),
    (connector_name_climbing_out, "connector '../../escape'"),
])
def test_a_forged_program_is_refused_before_anything_runs_it(
        tmp_path: Path, spark: Any, forgery: Forgery, refusal: str) -> None:
    project = copy_example("grades", tmp_path)
    reconcile(project, "apply", "--auto-approve")
    reconcile(project, "execute", "-p", "grades", "INSERT INTO students VALUES (1, 'Ada')")
    manifest_file = project / ".reconcile/state/grades/manifest.json"
    document = json.loads(manifest_file.read_text())
    canary = tmp_path / "shell-ran"
    forgery(document["program"], canary)
    manifest_file.write_text(json.dumps(document))

    for command in (["run", "-p", "grades"],
                    ["execute", "-p", "grades", "INSERT INTO students VALUES (2, 'Bob')"],
                    ["query", "-p", "grades", "SELECT * FROM students"]):
        output = reconcile(project, *command, expect=1)
        assert "manifest.json" in output and refusal in output, (command, output)
        assert len(output.strip().splitlines()) == 1 and "Traceback" not in output
    assert not canary.exists()
    after = json.loads(manifest_file.read_text())
    assert after["serial"] == document["serial"]  # nothing committed


def test_an_honest_program_passes_the_check_and_runs(tmp_path: Path, spark: Any) -> None:
    """The seed story's manifest passes the check at every step, `execute` and `query`."""
    project = copy_example("grades", tmp_path)
    reconcile(project, "apply", "--auto-approve")
    reconcile(project, "execute", "-p", "grades", "INSERT INTO students VALUES (1, 'Ada')")
    reconcile(project, "execute", "-p", "grades",
              "INSERT INTO grades VALUES (1, 'algebra', 90, DATE'2025-10-01')")
    rows = json.loads(reconcile(project, "query", "-p", "grades",
                                "SELECT * FROM avg_grade_enriched", "--format", "json"))
    assert [(row["student_name"], row["class"], float(row["class_avg"])) for row in rows] == [
        ("Ada", "algebra", 90.0)]
