"""A step killed with SIGKILL leaves the previous manifest in force; running again converges.

`reconcile run` runs in a subprocess (its own JVM) with `RECONCILE_CRASH_AT`
set, so it kills itself at a named point (see reconciler/support/faults.py): after the
input connectors have appended their batches to Delta, between a maintained
view's write and its state's, and after the views and outputs are written but
before the manifest is. The test process reads the
same local folders through the CLI in-process, on the shared Spark session.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from reconciler.support.faults import CRASH_ENV
from state_backends.base import default_who
from tests.cli_helpers import manifest, query, reconcile
from tests.jvm_options import FAST_JVM_ENV
from tests.projects import feed_grades, write_files

# The subprocess's JVM gets the flags the shared test session uses (tiny jobs start
# faster), the way an operator passes JVM flags: SPARK_SUBMIT_OPTS, not the project file.
PROJECT_FILES = {
    "reconcile.yaml": """
        spark:
          master: local[2]
        """,
    "pipelines/p/pipeline.yaml": """
        name: p
        bootstrap_policy: allow
        refresh: incremental  # the crash points between a maintained view's writes
        connectors:
          - name: grades_in
            table: grades
            type: files
            format: json
            path: input/grades
          - name: averages_out
            view: avg_grade
            type: files
            format: json
            path: output/averages
        """,
    "pipelines/p/program.sql": """
        create table grades (student_id bigint, class string, grade decimal(5,2));

        create materialized view avg_grade as
        select student_id, class, avg(grade) as class_avg
        from grades
        group by student_id, class;
        """,
}
GRADES = "SELECT student_id, class, grade FROM grades ORDER BY student_id, class, grade"
AVERAGES = "SELECT student_id, class, class_avg FROM avg_grade ORDER BY student_id, class"
RECOMPUTED = """SELECT student_id, class, avg(grade) AS class_avg FROM grades
GROUP BY student_id, class ORDER BY student_id, class"""


def grade_rows(project: Path) -> list[tuple[int, str, Decimal]]:
    return [(r["student_id"], r["class"], r["grade"]) for r in query(project, "p", GRADES)]


def killed_run(project: Path, point: str, remote: str | None = None) -> None:
    """`reconcile run` in its own process (a Spark Connect client of `remote`, or with its
    own embedded driver), SIGKILLed by itself at `point`."""
    env = {**os.environ, **FAST_JVM_ENV, CRASH_ENV: point}
    flags = ["--spark-remote", remote] if remote else []
    process = subprocess.run([sys.executable, "-m", "reconciler", "-C", str(project), "run",
                              *flags], env=env, capture_output=True, text=True, timeout=300)
    assert process.returncode == -signal.SIGKILL, \
        f"exit {process.returncode}, not killed at {point}: {process.stdout}{process.stderr}"


# After ingestion the step is the same code whatever Spark runs it, so those points kill a
# Spark Connect client (a second to start, where an embedded driver's JVM takes ten); the
# kill inside a Structured Streaming ingestion needs the embedded driver.
CLASSIC_ONLY = {"step-after-ingest"}


@pytest.mark.slow
@pytest.mark.parametrize("point", [
    pytest.param("storage-before-commit", marks=pytest.mark.nightly), "step-after-ingest",
    pytest.param("aggregate-between-writes", marks=pytest.mark.nightly), "step-before-commit"])
def test_killed_step_converges(spark: SparkSession, remote: str, tmp_path: Path,
                               point: str) -> None:
    project = write_files(tmp_path, PROJECT_FILES)
    reconcile(project, "apply", "--auto-approve")
    feed_grades(project, "part-1.json", [(1, "algebra", 90), (2, "algebra", 80)])
    reconcile(project, "run")
    committed = manifest(project, "p")
    averages = query(project, "p", AVERAGES)
    feed_grades(project, "part-2.json", [(1, "algebra", 94), (3, "physics", 70)])

    killed_run(project, point, None if point in CLASSIC_ONLY else remote)

    assert manifest(project, "p")["serial"] == committed["serial"]
    assert manifest(project, "p")["relations"] == committed["relations"]
    assert grade_rows(project) == [(1, "algebra", 90), (2, "algebra", 80)]
    assert query(project, "p", AVERAGES) == averages

    resumed = reconcile(project, "run")  # the killed run's lock is taken over: no human
    assert f"p: took over the lock of {default_who()} (lock id" in resumed, resumed
    assert "operation 'run'" in resumed and "is gone" in resumed, resumed
    assert "step committed" in resumed
    assert grade_rows(project) == [(1, "algebra", 90), (1, "algebra", 94), (2, "algebra", 80),
                                   (3, "physics", 70)]
    assert query(project, "p", AVERAGES) == query(project, "p", RECOMPUTED)
    step = manifest(project, "p")
    assert step["serial"] == committed["serial"] + 1
    emitted = project / f"output/averages/{step['serial']:010d}-changes.json"
    changes = sorted((r["_op"], r["student_id"], r["class"], Decimal(r["class_avg"]))
                     for r in map(json.loads, emitted.read_text().splitlines()))
    assert changes == [("delete", 1, "algebra", 90), ("insert", 1, "algebra", 92),
                       ("insert", 3, "physics", 70)]
    assert "no new input" in reconcile(project, "run")


INSERT = "INSERT INTO grades VALUES (4, 'art', 60), (4, 'art', 70)"


def test_killed_execute_is_discarded_and_retry_inserts_once(spark: SparkSession, remote: str,
                                                             tmp_path: Path) -> None:
    project = write_files(tmp_path, PROJECT_FILES)
    reconcile(project, "apply", "--auto-approve")
    committed = manifest(project, "p")
    env = {**os.environ, CRASH_ENV: "step-before-commit"}
    process = subprocess.run([sys.executable, "-m", "reconciler", "-C", str(project),
                              "execute", "-p", "p", INSERT, "--spark-remote", remote],
                             env=env, capture_output=True, text=True, timeout=300)
    assert process.returncode == -signal.SIGKILL, process.stderr
    assert manifest(project, "p")["relations"] == committed["relations"]
    assert grade_rows(project) == []

    retried = reconcile(project, "execute", "-p", "p", INSERT)  # takes the dead one's lock
    assert "took over the lock of" in retried and "step committed" in retried
    assert grade_rows(project) == [(4, "art", 60), (4, "art", 70)]
    assert query(project, "p", AVERAGES) == [{"student_id": 4, "class": "art", "class_avg": 65}]
    assert "no new input" in reconcile(project, "run")


@pytest.mark.slow
def test_a_dead_jvm_is_one_line_and_the_next_run_converges(spark: SparkSession,
                                                            tmp_path: Path) -> None:
    """The Spark JVM is SIGKILLed mid-step (as the kernel's OOM killer would): one line
    naming the stage, exit 1, the lock released, the committed state intact."""
    project = write_files(tmp_path, PROJECT_FILES)
    reconcile(project, "apply", "--auto-approve")
    committed = manifest(project, "p")
    feed_grades(project, "part-1.json", [(1, "algebra", 90)])
    env = {**os.environ, **FAST_JVM_ENV, CRASH_ENV: "jvm:step-after-ingest"}
    process = subprocess.run([sys.executable, "-m", "reconciler", "-C", str(project), "run"],
                             env=env, capture_output=True, text=True, timeout=300)
    assert process.returncode == 1, process.stderr
    ours = [line for line in process.stderr.splitlines() if line.startswith("error:")]
    assert len(ours) == 1 and "the Spark JVM died while" in ours[0], process.stderr
    assert "Traceback" not in process.stderr
    assert manifest(project, "p")["serial"] == committed["serial"]
    assert "step committed" in reconcile(project, "run")  # no stuck lock, converges
    assert grade_rows(project) == [(1, "algebra", 90)]
