"""A pull-request environment's catalog database (issue 81), in a Hive metastore (Derby, in a
temporary folder) as a reader finds it: every relation of the pipeline by name, the changed
views at the environment's rows, the others at production's pinned serial even after
production steps on, and nothing left once the environment is destroyed.

Derby lets one JVM open its metastore at a time: the environment is built in one process,
and another process (a new session: the views come from the metastore, not the builder's
session) reads it, steps production, reads again and destroys the environment."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.engine.test_publish import JVM_FRAME, metastore  # noqa: F401 (a fixture)
from tests.operations.test_environments import NEW, OLD
from tests.projects import write_files

pytestmark = [pytest.mark.spark, pytest.mark.slow]

STEPS = """
import json, sys
from click.testing import CliRunner
from pyspark.errors import AnalysisException
from reconciler.cli.main import cli
from reconciler.engine.spark.session import get_spark
for kind, value in json.loads(sys.argv[1]):
    if kind == "cli":
        result = CliRunner().invoke(cli, value)
        print(json.dumps({"exit": result.exit_code, "output": result.output}))
        continue
    try:  # a test view's few rows
        rows = sorted([[str(v) for v in row] for row in get_spark().sql(value).collect()])
        print(json.dumps({"rows": rows}))
    except AnalysisException as error:
        print(json.dumps({"rows": error.getCondition()}))
"""



def steps(env: dict[str, str], *steps: tuple[str, Any]) -> list[Any]:
    """Run `steps` (("cli", arguments) or ("sql", a query)) in one new process; each one's
    result: a command's exit code and output, a query's rows or error condition."""
    completed = subprocess.run([sys.executable, "-c", STEPS, json.dumps(steps)], env=env,
                               capture_output=True, text=True, timeout=600, check=False)
    lines = [json.loads(line) for line in completed.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == len(steps), completed.stderr[-3000:]
    assert not [line for line in completed.stderr.splitlines() if JVM_FRAME.match(line)], \
        completed.stderr[-3000:]
    return [line.get("rows", line) for line in lines]


def test_a_reader_finds_the_environment_by_name_and_production_as_pinned(
        tmp_path: Path, metastore: dict[str, str]) -> None:  # noqa: F811
    settings = (f"backend: {tmp_path}/state\nstorage: {tmp_path}/data\n"
                "environments: {database_prefix: review, storage: " + f"{tmp_path}/envs}}\n")
    production, change = (write_files(tmp_path / folder, {
        "reconcile.yaml": settings, "pipelines/p/program.sql": program,
        "pipelines/p/pipeline.yaml": "name: p\nbootstrap_policy: allow\n"})
        for folder, program in (("main", OLD), ("pr", NEW)))
    insert = "INSERT INTO grades VALUES (1, 'algebra', 90), (1, 'art', 70), (2, 'algebra', 60)"
    built = steps(metastore, ("cli", ["-C", str(production), "apply", "--auto-approve"]),
                  ("cli", ["-C", str(production), "execute", "-p", "p", insert]),
                  ("cli", ["-C", str(change), "env", "create", "-p", "p", "--name", "pr_7"]))
    assert [result["exit"] for result in built] == [0, 0, 0], built
    assert "review_pr_7, production serial 2" in built[2]["output"], built[2]

    found = steps(
        metastore, ("sql", "SHOW TABLES IN review_pr_7"),
        ("sql", "SELECT * FROM review_pr_7.best"), ("sql", "SELECT * FROM review_pr_7.counts"),
        ("sql", "SELECT * FROM review_pr_7.class_top"),
        ("cli", ["-C", str(production), "execute", "-p", "p",
                 "INSERT INTO grades VALUES (3, 'art', 10)"]),
        ("sql", "SELECT * FROM review_pr_7.counts"), ("sql", "SELECT * FROM review_pr_7.grades"),
        ("cli", ["-C", str(change), "env", "destroy", "-p", "p", "--name", "pr_7"]),
        ("sql", "SHOW DATABASES"))
    tables, best, counts, class_top, step, counts_after, grades, destroyed, databases = found
    assert sorted(row[1] for row in tables) == ["best", "class_top", "counts", "grades"]
    assert best == [["1", "70"], ["2", "60"]]  # the pull request's min, not production's max
    assert class_top == [["algebra", "90"], ["art", "70"]]
    assert counts == counts_after == [["algebra", "2"], ["art", "1"]]  # serial 2's, pinned
    assert step["exit"] == 0 and grades == [["1", "algebra", "90"], ["1", "art", "70"],
                                            ["2", "algebra", "60"]]
    assert destroyed["exit"] == 0, destroyed
    assert ["review_pr_7"] not in databases
    assert not (tmp_path / "envs/pr_7").exists()
