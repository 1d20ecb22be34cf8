"""`RECONCILE_ENGINE_COMMIT_BYTES=0` (issue 82): for a catalog that accepts only Delta's own
commits (Unity Catalog's managed tables, say), every commit the engine makes to a pipeline's
tables, views and aggregate states is Delta's writer's: none is delta-rs's. Checked on every
commit of the Delta logs after a deployment, ingested steps and a DELETE, with the views
equal to their queries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.cli_helpers import query, reconcile
from tests.projects import GRADES_INPUT, feed_grades, write_files

pytestmark = pytest.mark.spark

PROGRAM = """
    create table grades (student_id bigint, class string, grade int);
    create materialized view per_class as
    select class, count(*) as n, sum(grade) as total from grades group by class;
    create materialized view best as
    select g.student_id, g.class, g.grade from grades g
    where g.grade >= 80;
    """


def commit_engines(root: Path) -> dict[str, set[str]]:
    """Per Delta table under `root`, the engines its commits name (`engineInfo`, Delta's
    writer; `clientVersion`, delta-rs)."""
    engines: dict[str, set[str]] = {}
    for log in sorted(root.rglob("_delta_log")):
        table = str(log.parent.relative_to(root))
        for commit in sorted(log.glob("*.json")):
            for line in commit.read_text().splitlines():
                info = json.loads(line).get("commitInfo")
                if info is not None:
                    engine = str(info.get("engineInfo") or info.get("clientVersion"))
                    engines.setdefault(table, set()).add(engine.split("/")[0].split("-")[0])
    return engines


def test_every_commit_is_delta_s_own_writer_s(spark: SparkSession, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECONCILE_DELTA_WRITER", "delta-spark")
    monkeypatch.setenv("RECONCILE_ENGINE_COMMIT_BYTES", "0")
    project = write_files(tmp_path, {
        "reconcile.yaml": "", "pipelines/p/program.sql": PROGRAM,
        "pipelines/p/pipeline.yaml": "name: p\nrefresh: incremental\nconnectors:"
                                     + GRADES_INPUT})
    reconcile(project, "apply", "--auto-approve")
    feed_grades(project, "a.json", [(1, "algebra", 90), (2, "algebra", 70), (3, "art", 85)])
    reconcile(project, "run")
    feed_grades(project, "b.json", [(4, "art", 60)])
    reconcile(project, "run")
    reconcile(project, "execute", "-p", "p", "DELETE FROM grades WHERE student_id = 2")
    engines = commit_engines(project / ".reconcile/data/p")
    assert {"tables/grades", "views/per_class", "views/best", "state/per_class"} <= set(engines)
    assert all(found == {"Apache"} for found in engines.values()), engines  # Apache-Spark/...
    assert query(project, "p", "SELECT class, n, total FROM per_class ORDER BY class") == \
        query(project, "p", "SELECT class, count(*) AS n, sum(grade) AS total FROM grades "
                            "GROUP BY class ORDER BY class")
    assert query(project, "p", "SELECT student_id FROM best ORDER BY student_id") == [
        {"student_id": 1}, {"student_id": 3}]
