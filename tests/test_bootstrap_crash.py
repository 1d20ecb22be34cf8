"""Kill a bootstrap (SIGKILL, in a subprocess) at several points: the previous state
stays queryable, the stale lock is reported and can be released, and applying again
converges to the result of an uninterrupted run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.cli_helpers import manifest, reconcile
from tests.projects import apply_seed_modification, copy_example
from tests.test_seed_story import GRADES, STUDENTS, enriched

OLD = [("Alice", "algebra", 97), ("Alice", "physics", 89), ("Bob", "algebra", 85),
       ("Bob", "physics", 93)]
NEW = [("Alice", "algebra", 96), ("Alice", "physics", 88), ("Bob", "algebra", 91.5),
       ("Bob", "physics", 92)]


@pytest.mark.parametrize("point", ["bootstrap-started", "bootstrap-after-view:avg_grade",
                                   "bootstrap-before-commit"])
def test_killed_bootstrap_keeps_state_and_converges(spark: SparkSession, tmp_path: Path,
                                                    point: str) -> None:
    project = copy_example("grades", tmp_path)
    reconcile(project, "apply", "--auto-approve")
    reconcile(project, "execute", "-p", "grades", STUDENTS)
    reconcile(project, "execute", "-p", "grades", GRADES)
    before = manifest(project, "grades")
    apply_seed_modification(project)

    killed = subprocess.run(
        [sys.executable, "-m", "reconciler", "-C", str(project), "apply", "--auto-approve"],
        env={**os.environ, "RECONCILE_CRASH_AT": point}, capture_output=True, text=True,
        check=False, timeout=300)
    assert killed.returncode == -9, killed.stderr

    during = manifest(project, "grades")
    assert during["status"] == "Bootstrapping"
    assert during["relations"] == before["relations"], "the crash leaked uncommitted state"
    assert enriched(project) == OLD

    refused = reconcile(project, "apply", "--auto-approve", expect=1)
    lock_id = re.search(r"lock id (\S+),", refused)
    assert lock_id, refused
    reconcile(project, "state", "force-unlock", lock_id.group(1), "-p", "grades")
    assert "bootstrapped" in reconcile(project, "apply", "--auto-approve")
    assert enriched(project) == NEW
    assert manifest(project, "grades")["status"] == "Running"
