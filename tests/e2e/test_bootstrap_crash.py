"""Kill a bootstrap (SIGKILL, in a subprocess) at several points: the previous state
stays queryable, the stale lock is taken over by the next command (its process is gone),
and applying again converges to the result of an uninterrupted run.

The killed process is a Spark Connect client of the run's server (it starts in a
second, where an embedded driver's JVM takes ten); what it leaves behind — a
`Bootstrapping` manifest, a lock, Delta writes no manifest names — is the same."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.cli_helpers import manifest, query, reconcile, seeded_grades
from tests.e2e.test_seed_story import enriched
from tests.projects import apply_seed_modification

OLD = [("Alice", "algebra", 97), ("Alice", "physics", 89), ("Bob", "algebra", 85),
       ("Bob", "physics", 93)]
NEW = [("Alice", "algebra", 96), ("Alice", "physics", 88), ("Bob", "algebra", 91.5),
       ("Bob", "physics", 92)]


def seeded_and_modified(root: Path) -> Path:
    """The seed story deployed with its rows, then changed (a bootstrap to approve)."""
    project = seeded_grades(root)
    apply_seed_modification(project)
    return project


@pytest.mark.parametrize("point", [pytest.param("bootstrap-started", marks=pytest.mark.nightly),
                                   "bootstrap-after-view:avg_grade",
                                   "bootstrap-before-commit"])
def test_killed_bootstrap_keeps_state_and_converges(spark: SparkSession, remote: str,
                                                    tmp_path: Path, point: str) -> None:
    project = seeded_and_modified(tmp_path)

    # The killed apply is a Spark Connect client (no JVM to start); the rest runs embedded.
    killed = subprocess.run(
        [sys.executable, "-m", "reconciler", "-C", str(project), "apply", "--auto-approve",
         "--spark-remote", remote], env={**os.environ, "RECONCILE_CRASH_AT": point},
        capture_output=True, text=True, check=False, timeout=300)
    assert killed.returncode == -9, killed.stderr

    assert manifest(project, "grades")["status"] == "Bootstrapping"
    assert enriched(project) == OLD

    # No --auto-approve: the change was approved before the crash, so apply resumes it,
    # taking over the lock the killed run left (its process is gone: no human needed).
    resumed = reconcile(project, "apply")
    assert "bootstrapped" in resumed and "took over the lock of" in resumed, resumed
    assert enriched(project) == NEW
    assert manifest(project, "grades")["status"] == "Running"


def test_abandoned_bootstrap_does_not_leak_an_emptied_table(spark: SparkSession, remote: str,
                                                             tmp_path: Path) -> None:
    """A bootstrap killed after truncating a modified table, then the change reverted:
    the table's committed rows must stay, not the uncommitted empty version."""
    project = seeded_grades(tmp_path)
    sql = project / "pipelines/grades/program.sql"
    original = sql.read_text()
    # NOT NULL added: the table cannot evolve in place, so the bootstrap empties it first.
    sql.write_text(original.replace("name string", "name string not null"))

    killed = subprocess.run(
        [sys.executable, "-m", "reconciler", "-C", str(project), "apply", "--auto-approve",
         "--spark-remote", remote],
        env={**os.environ, "RECONCILE_CRASH_AT": "bootstrap-after-view:avg_grade_enriched"},
        capture_output=True, text=True, check=False, timeout=300)
    assert killed.returncode == -9, killed.stderr
    assert manifest(project, "grades")["status"] == "Bootstrapping"
    lock_id = re.search(r", id (\S+)\)", reconcile(project, "status"))
    assert lock_id, "status shows the stale lock's holder and id"

    sql.write_text(original)
    reverted = reconcile(project, "apply")  # takes the killed run's lock over
    assert "no changes" in reverted and f"(lock id {lock_id.group(1)}" in reverted
    assert manifest(project, "grades")["status"] == "Running"
    assert "no new input" in reconcile(project, "run")
    assert enriched(project) == OLD
    rows = query(project, "grades", "SELECT count(*) AS n FROM students")
    assert rows == [{"n": 2}]


@pytest.mark.parametrize(("signal_point", "code", "name"), [
    ("term", 143, "SIGTERM"), pytest.param("int", 130, "SIGINT", marks=pytest.mark.nightly)])
def test_an_interrupted_apply_releases_its_lock_and_says_so(
        spark: SparkSession, remote: str, tmp_path: Path, signal_point: str, code: int,
        name: str) -> None:
    """A cancelled CI job (SIGTERM) or Ctrl-C (SIGINT) mid-bootstrap: one line, the shell's
    exit code, no lock left behind, and the next apply resumes the approved change."""
    project = seeded_and_modified(tmp_path)
    stopped = subprocess.run(
        [sys.executable, "-m", "reconciler", "-C", str(project), "apply", "--auto-approve",
         "--spark-remote", remote],
        env={**os.environ, "RECONCILE_CRASH_AT":
             f"{signal_point}:bootstrap-after-view:avg_grade"},
        capture_output=True, text=True, check=False, timeout=300)
    assert stopped.returncode == code, stopped.stderr
    assert stopped.stderr.strip().splitlines() == [
        f"error: interrupted by {name} during compute view avg_grade; locks "
        "released, the last committed state stands"]
    assert manifest(project, "grades")["status"] == "Bootstrapping"
    assert "locked by" not in reconcile(project, "status")
    assert "bootstrapped" in reconcile(project, "apply")  # no force-unlock needed
    assert manifest(project, "grades")["status"] == "Running"
    assert enriched(project) == NEW
