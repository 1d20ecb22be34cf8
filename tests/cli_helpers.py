"""Run the real CLI in-process (sharing the test run's Spark session) and read its output."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from reconciler.cli.main import cli
from tests.projects import SEED_GRADES, SEED_STUDENTS, copy_example


def reconcile(project: Path, *args: str, expect: int = 0) -> str:
    """`reconcile -C project ARGS...`; fails the test on an unexpected exit code."""
    result = CliRunner().invoke(cli, ["-C", str(project), *args], catch_exceptions=False)
    assert result.exit_code == expect, f"exit {result.exit_code}: {result.output}"
    return result.output


def query(project: Path, pipeline: str, sql: str) -> list[dict[str, Any]]:
    """Rows of a `reconcile query --format json`, numbers compared as Decimals."""
    rows = json.loads(reconcile(project, "query", "-p", pipeline, sql, "--format", "json"))
    return [{k: Decimal(v) if isinstance(v, str) and _is_number(v) else v for k, v in row.items()}
            for row in rows]


def _is_number(text: str) -> bool:
    try:
        Decimal(text)
    except ArithmeticError:
        return False
    return True


def manifest(project: Path, pipeline: str) -> dict[str, Any]:
    return json.loads(reconcile(project, "state", "show", "-p", pipeline))


def in_storage(project: Path, path: str, storage: str = ".reconcile/data") -> str:
    """A manifest's path (stored relative to the storage root) as a local path."""
    return str(project / storage / path)


def versions(project: Path, pipeline: str) -> dict[str, int]:
    """The Delta version the committed manifest pins for each relation."""
    return {name: state["version"]
            for name, state in manifest(project, pipeline)["relations"].items()}


_SEEDED: dict[str | None, Path] = {}
"""The seeded grades project each writer's tests copy, built once per test process."""


def seeded_grades(destination: Path) -> Path:
    """The grades example deployed with the story's students and grades, as a private copy
    under `destination`. The first call of a test process deploys and seeds it (an apply and
    two executes); later calls copy that folder, state and tables included: a project's
    state holds only paths relative to it, so a copy is a deployment of its own."""
    writer = os.environ.get("RECONCILE_DELTA_WRITER")
    if writer not in _SEEDED:
        template = Path(tempfile.mkdtemp(prefix="seeded-grades-"))
        atexit.register(shutil.rmtree, template, ignore_errors=True)
        project = copy_example("grades", template)
        reconcile(project, "apply", "--auto-approve")
        reconcile(project, "execute", "-p", "grades", SEED_STUDENTS)
        reconcile(project, "execute", "-p", "grades", SEED_GRADES)
        _SEEDED[writer] = project
    return Path(shutil.copytree(_SEEDED[writer], destination / "grades"))


def grades_plan_file(destination: Path) -> Path:
    """A plan of the grades example (not deployed) saved by `reconcile plan --out`."""
    out = destination / "plan.json"
    reconcile(copy_example("grades", destination), "plan", "--out", str(out))
    return out


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped): a killed run's, in a lock."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid
