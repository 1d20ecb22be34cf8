"""`--json` on every command that reports, and `--log-level` (issue 56).

Each command's JSON is one object on stdout with the keys its text is made of; progress
and errors stay on stderr, and an error under `--json` also prints `{"error": ...}` on
stdout so a script reading it never parses an empty string.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from pyspark.sql import SparkSession

from reconciler.cli.main import cli
from reconciler.cli.reference import _commands
from reconciler.support.errors import ReconcileError
from tests.projects import single_pipeline

SQL = """
CREATE TABLE orders (id BIGINT, amount INT);
CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n, sum(amount) AS amount FROM orders;
"""


def invoke(project: Path, *args: str, expect: int = 0) -> Result:
    result = CliRunner().invoke(cli, ["-C", str(project), *args], catch_exceptions=False)
    assert result.exit_code == expect, f"exit {result.exit_code}: {result.output}"
    return result


def as_json(project: Path, *args: str, expect: int = 0) -> Any:
    """The command's stdout, which must be exactly one JSON document."""
    return json.loads(invoke(project, *args, "--json", expect=expect).stdout)


def test_every_reporting_command_prints_one_json_object(spark: SparkSession,
                                                        tmp_path: Path) -> None:
    project = single_pipeline(tmp_path, SQL)
    assert as_json(project, "validate") == {"pipelines": [{
        "pipeline": "p", "tables": 1, "views": 1, "input_connectors": 0,
        "output_connectors": 0, "ok": True,
        "refresh": {"total": "maintained or recomputed, whichever is cheaper"}}]}

    [deployed] = as_json(project, "apply", "--auto-approve")["pipelines"]
    assert (deployed["pipeline"], deployed["result"], deployed["serial"]) == ("p", "deployed", 1)

    [stepped] = as_json(project, "execute", "-p", "p",
                        "INSERT INTO orders VALUES (1, 10), (2, 5)")["pipelines"]
    assert (stepped["result"], stepped["serial"]) == ("stepped", 2)
    [idle] = as_json(project, "run")["pipelines"]
    assert (idle["result"], idle["message"]) == ("idle", "p: no new input")

    # A change parked for approval (off a terminal, `--json` never asks): exit 3, and
    # the JSON says so; approve bootstraps it.
    sql = project / "pipelines/p/program.sql"
    sql.write_text(sql.read_text().replace("sum(amount) AS amount", "max(amount) AS amount"))
    [parked] = as_json(project, "apply", expect=3)["pipelines"]
    assert parked["result"] == "awaiting-approval"
    [approved] = as_json(project, "approve")["pipelines"]
    assert approved["result"] == "bootstrapped"

    history = as_json(project, "state", "history", "-p", "p")
    assert history["pipeline"] == "p"
    assert [entry["status"] for entry in history["history"]][-1] == "Running"
    assert [entry["serial"] for entry in history["history"]] == sorted(
        entry["serial"] for entry in history["history"])


def test_an_error_under_json_is_an_object_on_stdout_and_a_line_on_stderr(
        tmp_path: Path) -> None:
    project = single_pipeline(tmp_path, SQL + "DROP TABLE orders;\n")
    result = invoke(project, "validate", "--json", expect=1)
    error = json.loads(result.stdout)["error"]
    assert "program.sql:3" in error and "unsupported statement DROP" in error
    assert result.stderr.strip() == f"error: {error}"
    refused = invoke(single_pipeline(tmp_path / "c", SQL), "run", "--continuous", "--json",
                     expect=1)
    assert "--json reports one step" in json.loads(refused.stdout)["error"]


def test_log_level_sets_progress_and_tracebacks(spark: SparkSession, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECONCILE_PROGRESS", raising=False)  # the test run turns it off
    project = single_pipeline(tmp_path, SQL)
    shown = invoke(project, "--log-level", "info", "apply", "--auto-approve").stderr
    assert "create total" in shown or "view total" in shown, shown
    assert invoke(project, "--log-level", "warn", "execute", "-p", "p",
                  "INSERT INTO orders VALUES (3, 1)").stderr == ""
    broken = single_pipeline(tmp_path / "broken", SQL + "DROP TABLE orders;\n")
    with pytest.raises(ReconcileError, match="unsupported statement DROP"):
        CliRunner().invoke(cli, ["-C", str(broken), "--log-level", "debug", "validate"],
                           catch_exceptions=False)


def test_every_json_flag_is_the_shared_one() -> None:
    """One contract (issue 83): each command's `--json` sets the context's flag, so what it
    prints goes through `CliContext.emit` and its errors as `{"error": ...}`."""
    flags = {path: option for path, command in _commands(cli, "reconcile")
             for option in command.params if "--json" in getattr(option, "opts", ())}
    assert {"reconcile plan", "reconcile status", "reconcile test", "reconcile spark status",
            "reconcile state history"} <= set(flags)
    assert [path for path, option in flags.items() if option.expose_value] == []


@pytest.mark.parametrize("args", [
    ("plan",), ("status", "-p", "nosuch"), ("test",), ("state", "history", "-p", "nosuch"),
    ("state", "gc", "-p", "nosuch"), ("state", "show", "-p", "nosuch")])
def test_each_command_says_its_error_as_json(tmp_path: Path, args: tuple[str, ...]) -> None:
    """A broken program, or a pipeline nothing deployed: exit 1, one line on stderr, and
    the same words as `{"error": ...}` on stdout, whichever command met it."""
    broken = "plan" in args or "test" in args
    project = single_pipeline(tmp_path, SQL + ("DROP TABLE orders;\n" if broken else ""))
    printed = "show" not in args  # `state show` prints the manifest itself: no --json
    result = invoke(project, *args, *(["--json"] if printed else []), expect=1)
    said = result.stderr.strip()
    assert said.startswith("error: ") and ("nosuch" in said or "program.sql:3" in said), said
    if printed:
        assert json.loads(result.stdout) == {"error": said.removeprefix("error: ")}
