"""A first deployment, a bootstrap, a refresh and a destroy interrupted at a random moment
(issue 82): SIGKILL of the command, or SIGINT to its whole process group as Ctrl-C sends it
(the embedded Spark JVM included). The next run of the same command finishes by itself,
with no human step, and every view then equals its query over the same input, as after an
uninterrupted command (a destroy: nothing of the pipeline is left).

Each interrupted `apply` runs in its own process and session (`start_new_session`: the
signal reaches its JVM, never pytest); the moment is drawn from a seeded generator, printed
with any failure (`RECONCILE_CHAOS_SEED` replays one). The recovery runs in-process on the
shared Spark session."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.cli_helpers import manifest, query, reconcile
from tests.jvm_options import FAST_JVM_ENV
from tests.projects import GRADES_INPUT, feed_grades, write_files

SEED = int(os.environ.get("RECONCILE_CHAOS_SEED") or random.SystemRandom().randrange(1 << 30))

PIPELINE = """
    name: p
    bootstrap_policy: allow
    connectors:
    """ + GRADES_INPUT + """
      - name: averages_out
        view: avg_grade
        type: files
        format: json
        path: output/averages
    """
PROGRAM = """
    create table grades (student_id bigint, class string, grade int);
    create table students (id bigint, name string);
    create materialized view avg_grade as
    select student_id, class, avg(grade) as class_avg from grades group by student_id, class;
    create materialized view named as
    select s.name, a.class, a.class_avg from avg_grade a join students s on a.student_id = s.id;
    """
CHANGED = PROGRAM.replace("avg(grade) as class_avg", "max(grade) as class_avg") + """
    create materialized view per_class as select class, count(*) as n from grades group by class;
    """
QUERIES = {
    "avg_grade": "SELECT student_id, class, class_avg FROM avg_grade",
    "named": "SELECT name, class, class_avg FROM named",
    "per_class": "SELECT class, n FROM per_class",
}
SCRATCH = {
    "avg_grade": "SELECT student_id, class, {f}(grade) AS class_avg FROM grades "
                 "GROUP BY student_id, class",
    "named": "SELECT s.name, a.class, a.class_avg FROM ({avg}) a JOIN students s "
             "ON a.student_id = s.id",
    "per_class": "SELECT class, count(*) AS n FROM grades GROUP BY class",
}


def interrupted(project: Path, how: str, delay: float,
                command: tuple[str, ...] = ("apply", "--auto-approve")) -> str:
    """`reconcile <command>` in its own process group, sent `how` (kill: SIGKILL to the
    command; int: SIGINT to the group) after `delay` seconds unless done; its stderr."""
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "-C", str(project), *command],
        env={**os.environ, **FAST_JVM_ENV}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True)
    try:
        process.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        if how == "kill":
            os.kill(process.pid, signal.SIGKILL)
        else:
            os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=180)
    return stderr


def deployed_with_input(tmp_path: Path) -> Path:
    """The pipeline deployed, with students and grades stepped in."""
    project = write_files(tmp_path, {"reconcile.yaml": "", "pipelines/p/program.sql": PROGRAM,
                                     "pipelines/p/pipeline.yaml": PIPELINE})
    reconcile(project, "apply", "--auto-approve")
    reconcile(project, "execute", "-p", "p", "INSERT INTO students VALUES (1, 'Ann'), "
                                              "(2, 'Bo')")
    feed_grades(project, "a.json", [(1, "algebra", 90), (1, "algebra", 70), (2, "art", 60)])
    reconcile(project, "run")
    return project


def assert_views_equal_their_queries(project: Path, views: list[str], function: str,
                                     context: str) -> None:
    for view in views:
        inner = SCRATCH["avg_grade"].format(f=function)
        scratch = SCRATCH[view].format(f=function, avg=inner)
        key = lambda row: json.dumps(row, sort_keys=True, default=str)  # noqa: E731
        assert sorted(query(project, "p", QUERIES[view]), key=key) == sorted(
            query(project, "p", scratch), key=key), f"{view} ({context})"


@pytest.mark.slow
@pytest.mark.parametrize("how", ["int", pytest.param("kill", marks=pytest.mark.nightly)])
def test_an_interrupted_first_deployment_is_finished_by_the_next_apply(
        spark: SparkSession, tmp_path: Path, how: str) -> None:
    delay = random.Random(SEED).uniform(3.0, 25.0)
    context = f"seed {SEED}, {how} after {delay:.1f} s"
    project = write_files(tmp_path, {"reconcile.yaml": "", "pipelines/p/program.sql": PROGRAM,
                                     "pipelines/p/pipeline.yaml": PIPELINE})
    said = interrupted(project, how, delay)
    assert "Traceback" not in said, f"{context}: {said[-3000:]}"
    finished = reconcile(project, "apply", "--auto-approve")  # no force-unlock, no cleanup
    assert "deployed" in finished or "no changes" in finished, f"{context}: {finished}"
    assert manifest(project, "p")["status"] == "Running", context
    reconcile(project, "execute", "-p", "p", "INSERT INTO students VALUES (1, 'Ann'), "
                                              "(2, 'Bo')")
    feed_grades(project, "a.json", [(1, "algebra", 90), (1, "algebra", 70), (2, "art", 60)])
    assert "step committed" in reconcile(project, "run"), context
    assert_views_equal_their_queries(project, ["avg_grade", "named"], "avg", context)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["kill", pytest.param("int", marks=pytest.mark.nightly)])
def test_an_interrupted_bootstrap_is_finished_by_the_next_apply(
        spark: SparkSession, tmp_path: Path, how: str) -> None:
    delay = random.Random(SEED + 1).uniform(3.0, 25.0)
    context = f"seed {SEED}, {how} after {delay:.1f} s"
    project = deployed_with_input(tmp_path)
    (project / "pipelines/p/program.sql").write_text(CHANGED)
    said = interrupted(project, how, delay)
    assert "Traceback" not in said, f"{context}: {said[-3000:]}"
    finished = reconcile(project, "apply", "--auto-approve")
    assert "bootstrapped" in finished or "no changes" in finished, f"{context}: {finished}"
    assert manifest(project, "p")["status"] == "Running", context
    feed_grades(project, "b.json", [(2, "art", 100), (3, "algebra", 40)])
    reconcile(project, "run")
    assert_views_equal_their_queries(project, ["avg_grade", "named", "per_class"], "max",
                                     context)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["int", pytest.param("kill", marks=pytest.mark.nightly)])
def test_an_interrupted_refresh_is_finished_by_the_next_refresh(
        spark: SparkSession, tmp_path: Path, how: str) -> None:
    delay = random.Random(SEED + 2).uniform(3.0, 20.0)
    context = f"seed {SEED}, {how} after {delay:.1f} s"
    project = deployed_with_input(tmp_path)
    command = ("refresh", "-p", "p", "-s", "avg_grade+", "--auto-approve")
    said = interrupted(project, how, delay, command)
    assert "Traceback" not in said, f"{context}: {said[-3000:]}"
    finished = reconcile(project, *command)
    assert "refreshed" in finished or "bootstrapped" in finished, f"{context}: {finished}"
    assert manifest(project, "p")["status"] == "Running", context
    feed_grades(project, "b.json", [(2, "art", 100), (3, "algebra", 40)])
    reconcile(project, "run")
    assert_views_equal_their_queries(project, ["avg_grade", "named"], "avg", context)


@pytest.mark.parametrize("how", ["kill", "int"])
def test_an_interrupted_destroy_is_finished_by_the_next_destroy(
        spark: SparkSession, tmp_path: Path, how: str) -> None:
    """A destroy starts no JVM here (nothing published): the moment is within its second."""
    delay = random.Random(SEED + 3).uniform(0.5, 3.0)
    context = f"seed {SEED}, {how} after {delay:.1f} s"
    project = deployed_with_input(tmp_path)
    command = ("destroy", "-p", "p", "--auto-approve")
    said = interrupted(project, how, delay, command)
    assert "Traceback" not in said, f"{context}: {said[-3000:]}"
    finished = reconcile(project, *command)
    assert "destroyed" in finished or "nothing to destroy" in finished, f"{context}: {finished}"
    assert not (project / ".reconcile/data/p").exists(), context
    assert not (project / ".reconcile/state/p").exists(), context
    assert "nothing to destroy" in reconcile(project, *command), context


def test_a_create_stopped_before_its_first_commit_does_not_block_the_next_apply(
        spark: SparkSession, tmp_path: Path) -> None:
    """What Ctrl-C inside Delta's CREATE TABLE leaves: the table's `_delta_log` folder and
    no commit in it. Spark takes the folder for a table (TABLE_OR_VIEW_ALREADY_EXISTS at
    every retry, as reported); the next apply clears it and creates the table."""
    project = write_files(tmp_path, {"reconcile.yaml": "", "pipelines/p/program.sql": PROGRAM,
                                     "pipelines/p/pipeline.yaml": PIPELINE})
    log = project / ".reconcile/data/p/tables/grades/_delta_log"
    log.mkdir(parents=True)
    (log / ".00000000000000000000.json.tmp").write_text("{")  # a commit never renamed in
    assert "deployed" in reconcile(project, "apply", "--auto-approve")
    assert query(project, "p", "SELECT count(*) AS n FROM grades") == [{"n": 0}]
