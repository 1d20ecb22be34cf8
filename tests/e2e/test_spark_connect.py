"""The seed story, a files connector and killed clients through a real Spark Connect server:
no JVM on the client side.

Every command is the real CLI in a subprocess with `--spark-remote`, as a GitHub
runner or a laptop talking to a cluster would run it. Data files are written by the
server's executors and committed by the client with delta-rs (engine/delta/commit.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.cli_helpers import query, reconcile
from tests.projects import (
    SEED_GRADES,
    SEED_STUDENTS,
    apply_seed_modification,
    copy_example,
    events_pipeline,
)

ENRICHED = "SELECT * FROM avg_grade_enriched ORDER BY student_name, class"


def cli(project: Path, remote: str, *args: str, stderr: bool = False) -> str:
    """A command's stdout (and its stderr after it, with `stderr`), in its own process."""
    result = subprocess.run([sys.executable, "-m", "reconciler", "-C", str(project), *args,
                             "--spark-remote", remote], capture_output=True, text=True,
                            timeout=300, check=False, env={**os.environ}, cwd=project)
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr[-3000:]}"
    return result.stdout + (result.stderr if stderr else "")


def enriched(project: Path, remote: str) -> list[tuple[str, str, Decimal]]:
    rows = json.loads(cli(project, remote, "query", "-p", "grades", "--format", "json",
                          ENRICHED))
    return [(r["student_name"], r["class"], Decimal(r["class_avg"])) for r in rows]


@pytest.mark.nightly
@pytest.mark.slow
def test_seed_story_over_spark_connect(remote: str, delta_spark: str, tmp_path: Path) -> None:
    """Delta Lake's own writer, on the server, as on a Connect cluster with Delta."""
    project = copy_example("grades", tmp_path)  # its reconcile.yaml says spark.master
    assert "deployed" in cli(project, remote, "apply", "--auto-approve")
    cli(project, remote, "execute", "-p", "grades", SEED_STUDENTS)
    cli(project, remote, "execute", "-p", "grades", SEED_GRADES)
    assert enriched(project, remote) == [("Alice", "algebra", 97), ("Alice", "physics", 89),
                                         ("Bob", "algebra", 85), ("Bob", "physics", 93)]
    apply_seed_modification(project)
    out = cli(project, remote, "apply", "--auto-approve")
    assert "recomputed avg_grade, avg_grade_all_courses, avg_grade_enriched" in out, out
    assert enriched(project, remote) == [("Alice", "algebra", 96), ("Alice", "physics", 88),
                                         ("Bob", "algebra", Decimal("91.5")),
                                         ("Bob", "physics", 92)]
    assert not list((tmp_path / "grades").glob("spark-warehouse")), "no client-side Spark"
    status = subprocess.run([sys.executable, "-m", "reconciler", "-C", str(project), "status",
                             "--json", "-p", "grades"], capture_output=True, text=True,
                            timeout=60, check=True)
    assert json.loads(status.stdout)["spark"] == remote  # the flag, not the file's master
    plan = subprocess.run([sys.executable, "-m", "reconciler", "-C", str(project), "plan",
                           "--json"], capture_output=True, text=True, timeout=60, check=True)
    [notes] = [pipeline["notes"] for pipeline in json.loads(plan.stdout)["pipelines"]]
    assert any(note.startswith(f"last applied with Spark at {remote}; reconcile.yaml says ")
               for note in notes), notes


FILES_PROJECT = events_pipeline("""
    create table events (id bigint not null, k string, v int);
    create materialized view totals as select k, count(*) as n, sum(v) as s from events
    group by k;
    """)


def run_killed(project: Path, remote: str, point: str) -> None:
    """`reconcile run` SIGKILLed at crash point `point` (its lock, left behind, is taken
    over by the next command)."""
    killed = subprocess.run(
        [sys.executable, "-m", "reconciler", "-C", str(project), "run", "--spark-remote",
         remote], capture_output=True, text=True, timeout=300, check=False, cwd=project,
        env={**os.environ, "RECONCILE_CRASH_AT": point})
    assert killed.returncode == -9, killed.stderr[-2000:]


@pytest.mark.slow
def test_files_connector_steps_over_spark_connect_and_a_killed_client(
        remote: str, spark: SparkSession, tmp_path: Path) -> None:
    """The client lists new files and the server reads them as batches; a client killed
    after a batch's rows were appended but before anything was committed leaves the last
    manifest in force, and the next step takes every row exactly once."""
    from tests.projects import write_files

    project = write_files(tmp_path, FILES_PROJECT)
    inbox = project / "input/events"
    inbox.mkdir(parents=True, exist_ok=True)
    cli(project, remote, "apply", "--auto-approve")
    (inbox / "a.json").write_text('{"id": 1, "k": "a", "v": 2}\n{"id": 2, "k": "b", "v": 3}\n'
                                  'not json\n')
    failed = subprocess.run([sys.executable, "-m", "reconciler", "-C", str(project), "run",
                             "--spark-remote", remote], capture_output=True, text=True,
                            timeout=300, check=False, cwd=project)
    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines()[-1] == (
        "error: input connector 'events_in' (input/events): 1 malformed row(s) in batch 0 "
        f"({(inbox / 'a.json').resolve()}); fix the input, or set on_error: quarantine or "
        "on_bad_input: skip"), failed.stderr[-2000:]
    (inbox / "a.json").write_text('{"id": 1, "k": "a", "v": 2}\n{"id": 2, "k": "b", "v": 3}\n')
    assert "step committed" in cli(project, remote, "run")
    assert "no new input" in cli(project, remote, "run")

    (inbox / "b.json").write_text('{"id": 3, "k": "a", "v": 5}\n')
    run_killed(project, remote, "listed-batch-before-done")
    resumed = cli(project, remote, "run", stderr=True)
    assert "step committed" in resumed and "took over the lock of" in resumed
    (inbox / "c.json").write_text('{"id": 4, "k": "b", "v": 1}\n')
    run_killed(project, remote, "step-before-commit")
    assert "step committed" in cli(project, remote, "run")
    rows = json.loads(cli(project, remote, "query", "-p", "p", "--format", "json",
                          "SELECT k, n, s FROM totals ORDER BY k"))
    assert rows == [{"k": "a", "n": 2, "s": 7}, {"k": "b", "n": 2, "s": 4}]
    events = json.loads(cli(project, remote, "query", "-p", "p", "--format", "json",
                            "SELECT count(*) AS n, count(DISTINCT id) AS ids FROM events"))
    assert events == [{"n": 4, "ids": 4}]

    # Back on an embedded session, the connector keeps its listed log: no file is read twice.
    (inbox / "d.json").write_text('{"id": 5, "k": "a", "v": 10}\n')
    assert "step committed" in reconcile(project, "run")
    assert query(project, "p", "SELECT count(*) AS n, sum(v) AS s FROM events") == [
        {"n": 5, "s": 21}]


@pytest.mark.nightly  # in `make test`: test_bootstrap_crash.py kills the same client there
@pytest.mark.slow
def test_a_client_killed_mid_bootstrap_over_spark_connect_converges(remote: str,
                                                                    tmp_path: Path) -> None:
    """The client (a runner, say) is SIGKILLed between two views of a bootstrap: the server
    keeps running, the last committed state stays readable, and the next apply resumes."""
    project = copy_example("grades", tmp_path)
    cli(project, remote, "apply", "--auto-approve")
    cli(project, remote, "execute", "-p", "grades", SEED_STUDENTS)
    cli(project, remote, "execute", "-p", "grades", SEED_GRADES)
    apply_seed_modification(project)
    killed = subprocess.run(
        [sys.executable, "-m", "reconciler", "-C", str(project), "apply", "--auto-approve",
         "--spark-remote", remote], capture_output=True, text=True, timeout=300, check=False,
        cwd=project, env={**os.environ, "RECONCILE_CRASH_AT": "bootstrap-after-view:avg_grade"})
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert enriched(project, remote) == [("Alice", "algebra", 97), ("Alice", "physics", 89),
                                         ("Bob", "algebra", 85), ("Bob", "physics", 93)]
    resumed = cli(project, remote, "apply", stderr=True)  # approved before the kill
    assert "bootstrapped" in resumed and "took over the lock of" in resumed
    assert enriched(project, remote) == [("Alice", "algebra", 96), ("Alice", "physics", 88),
                                         ("Bob", "algebra", Decimal("91.5")),
                                         ("Bob", "physics", 92)]
