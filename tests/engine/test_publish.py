"""`publish:` (`engine/publish.py`): a pipeline's materialized tables and views as views in
a Hive metastore (Derby, in a temporary folder), which another Spark session reads by name
and always at the committed state: after steps, after a step that failed having written
its Delta versions, after a bootstrap, and with a dropped view gone.

Derby lets one JVM open its metastore at a time, so the commands and each reader run in
their own processes, one after the other, with the same `spark-defaults.conf` (the
operator's, as on a cluster)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.jvm_options import FAST_JVM
from tests.projects import (
    SEED_GRADES,
    SEED_STUDENTS,
    apply_seed_modification,
    copy_example,
    write_files,
)

PROCESS = """
import json, sys
from click.testing import CliRunner
from pyspark.errors import AnalysisException
from reconciler.cli.main import cli
from reconciler.engine.spark.session import get_spark
job = json.loads(sys.argv[1])
if job["read"]:  # before any command: this JVM has written nothing yet
    spark, found = get_spark(), {}
    for name in job["read"]:
        try:  # a few rows of a test view
            found[name] = sorted([[str(v) for v in row] for row in
                                  spark.sql(f"SELECT * FROM analytics.{name}").collect()])
        except AnalysisException as error:
            found[name] = error.getCondition()
    print(json.dumps({"read": found}))
for args in job["commands"]:
    result = CliRunner().invoke(cli, args)
    print(json.dumps({"args": args, "exit": result.exit_code, "output": result.output}))
"""


@pytest.fixture
def metastore(tmp_path: Path) -> dict[str, str]:
    """The environment of a process whose Spark catalog is a Derby-backed Hive metastore."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        "spark.sql.catalogImplementation hive\n"
        "spark.hadoop.javax.jdo.option.ConnectionURL "
        f"jdbc:derby:;databaseName={tmp_path / 'metastore_db'};create=true\n"
        "spark.hadoop.datanucleus.schema.autoCreateAll true\n"
        "spark.hadoop.hive.metastore.schema.verification false\n")
    return {**os.environ, "SPARK_CONF_DIR": str(conf), "SPARK_SUBMIT_OPTS": FAST_JVM}


Commands = tuple[tuple[Path, list[str]], ...]
JVM_FRAME = re.compile(r"\s+at [\w$.]+\(")
"""A frame of a Java stack trace (`\tat py4j.ClientServerConnection.run(...)`), which the
metastore's handler logged for a database that existed (issue 82): apply, a step (execute)
and destroy with publishing, each in `process`, print none."""


def process(env: dict[str, str], read: tuple[str, ...] = (),
            commands: Commands = ()) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One process (one JVM, which alone holds Derby's metastore while it runs): first a
    reader's view of `read` by name, as another session sees the committed state (nothing
    is written before it), then each `(project, arguments)` command in turn."""
    job = {"read": list(read), "commands": [["-C", str(project), *args]
                                            for project, args in commands]}
    completed = subprocess.run([sys.executable, "-c", PROCESS, json.dumps(job)], env=env,
                               capture_output=True, text=True, timeout=300, check=False)
    lines = [json.loads(line) for line in completed.stdout.splitlines() if line.startswith("{")]
    stack = [line for line in completed.stderr.splitlines() if JVM_FRAME.match(line)]
    assert not stack, completed.stderr[-3000:]  # no command leaves Java's frames on stderr
    found = lines.pop(0)["read"] if read and lines and "read" in lines[0] else {}
    assert len(lines) == len(commands) and (found or not read), completed.stderr[-3000:]
    return found, lines


def commands(env: dict[str, str], project: Path, *commands: list[str]) -> list[dict[str, Any]]:
    return process(env, commands=tuple((project, c) for c in commands))[1]


def read(env: dict[str, str], *names: str) -> dict[str, Any]:
    return process(env, read=names)[0]


def averages(rows: list[list[str]]) -> list[tuple[str, str, Decimal]]:
    return [(name, subject, Decimal(average)) for name, subject, average in rows]


@pytest.mark.nightly
@pytest.mark.spark
@pytest.mark.slow
def test_readers_by_name_see_the_committed_state(tmp_path: Path,
                                                 metastore: dict[str, str]) -> None:
    project = copy_example("grades", tmp_path)
    spec = project / "pipelines/grades/pipeline.yaml"
    spec.write_text(spec.read_text() + "publish: {database: analytics}\n")
    sql = project / "pipelines/grades/program.sql"  # a failing average stops the step
    sql.write_text(sql.read_text().replace(
        "create materialized view avg_grade_enriched as",
        "create materialized view avg_grade_enriched (\n  CONSTRAINT passing EXPECT "
        "(class_avg >= 20) ON VIOLATION FAIL UPDATE\n) as"))
    results = commands(metastore, project, ["apply", "--auto-approve"],
                       ["execute", "-p", "grades", SEED_STUDENTS],
                       ["execute", "-p", "grades", SEED_GRADES])
    assert [r["exit"] for r in results] == [0, 0, 0], results
    before = [("Alice", "algebra", 97), ("Alice", "physics", 89), ("Bob", "algebra", 85),
              ("Bob", "physics", 93)]
    found = read(metastore, "avg_grade_enriched", "students", "avg_grade")
    assert averages(found["avg_grade_enriched"]) == before
    assert found["students"] == [["1", "Alice"], ["2", "Bob"]]
    assert found["avg_grade"] == "TABLE_OR_VIEW_NOT_FOUND"  # not materialized: not published

    # A step that wrote its Delta versions, then failed before its commit.
    [failed] = commands(metastore, project, ["execute", "-p", "grades",
                                             "INSERT INTO grades VALUES (1, 'chemistry', 5, "
                                             "'2025-10-01')"])
    assert failed["exit"] == 1 and "passing" in failed["output"], failed
    assert averages(read(metastore, "avg_grade_enriched")["avg_grade_enriched"]) == before

    apply_seed_modification(project)  # a bootstrap: a new view, two recomputed
    results = commands(metastore, project, ["apply"], ["approve"])
    assert [r["exit"] for r in results] == [3, 0], results  # apply: awaiting approval
    found = read(metastore, "avg_grade_enriched", "avg_grade_all_courses")
    assert averages(found["avg_grade_enriched"]) == [
        ("Alice", "algebra", 96), ("Alice", "physics", 88), ("Bob", "algebra", Decimal("91.5")),
        ("Bob", "physics", 92)]
    assert [(i, Decimal(a)) for i, a in found["avg_grade_all_courses"]] == [
        ("1", 92), ("2", Decimal("91.75"))]

    # the new view dropped again
    sql.write_text(sql.read_text().split("-- Overall average per student")[0])
    results = commands(metastore, project, ["apply", "--auto-approve"])
    assert [r["exit"] for r in results] == [0], results
    found = read(metastore, "avg_grade_all_courses", "avg_grade_enriched")
    assert found["avg_grade_all_courses"] == "TABLE_OR_VIEW_NOT_FOUND"
    assert len(found["avg_grade_enriched"]) == 4


def test_only_the_pipelines_own_views_are_replaced_or_dropped(spark: Any,
                                                               tmp_path: Path) -> None:
    """On the test run's session (its in-memory catalog holds views as a metastore does):
    a relation's view is replaced at each commit, one no longer published is dropped, and
    an object the pipeline did not publish is refused, not replaced: another project's view
    of a pipeline of the same name (another lineage) among them. An earlier version's view
    (the pipeline's name, no lineage) is taken over when published again, never dropped."""
    from reconciler.engine.publish import publish as publish_views
    from reconciler.engine.publish import published_views, unpublish
    from reconciler.support.errors import ReconcileError

    def publish(pipeline: str, relations: dict[str, tuple[str, int]],
                lineage: str = "lineage-1") -> tuple[list[str], list[str]]:
        return publish_views(spark, "published_here", pipeline, lineage, relations)

    table = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(table)
    spark.range(5).write.format("delta").mode("append").save(table)
    publish("p", {"a": (table, 0), "b": (table, 1)})
    assert spark.table("published_here.a").count() == 3
    assert publish("p", {"a": (table, 1)}) == (["b"], [])
    assert spark.table("published_here.a").count() == 8
    assert not spark.catalog.tableExists("published_here.b")

    spark.sql("CREATE VIEW published_here.theirs AS SELECT 1 AS one")
    _, [skipped] = publish("p", {"a": (table, 1), "theirs": (table, 1)})  # that one alone
    assert skipped.startswith("published_here.theirs is in the catalog and pipeline 'p' did "
                              "not publish it: not published"), skipped
    assert spark.table("published_here.theirs").count() == 1
    assert publish("q", {}, lineage="lineage-q") == ([], []), "another pipeline's views stay"
    assert spark.table("published_here.a").count() == 8

    # another project's pipeline `p`: its view is left alone, the rest published
    _, [skipped] = publish("p", {"_first": (table, 0), "a": (table, 0)}, lineage="lineage-2")
    assert re.fullmatch(r"published_here\.a is published by pipeline 'p' of another project "
                        r"\(its lineage lineage-1 is not this pipeline's, lineage-2\): not "
                        r"published [^\n]*", skipped), skipped
    assert spark.table("published_here._first").count() == 3
    assert publish("p", {"c": (table, 0)}, lineage="lineage-2") == (["_first"], [])
    assert spark.table("published_here.a").count() == 8
    assert unpublish(spark, "published_here", "lineage-2") == ["c"]
    assert spark.table("published_here.a").count() == 8

    spark.sql("CREATE VIEW published_here.old TBLPROPERTIES ('reconciler.pipeline' = 'p') "
              "AS SELECT 1 AS one")
    spark.sql("CREATE VIEW published_here.older TBLPROPERTIES ('reconciler.pipeline' = 'p') "
              "AS SELECT 1 AS one")
    _, [skipped] = publish("q", {"old": (table, 0)}, lineage="lineage-q")
    assert "published_here.old is published by pipeline 'p' (an earlier reconciler's" in skipped
    assert publish("p", {"a": (table, 1), "old": (table, 0)}) == ([], [])  # taken over
    assert spark.table("published_here.old").count() == 3
    owners = published_views(spark, "published_here")
    assert {name: (owner.pipeline, owner.lineage) for name, owner in owners.items()} == {
        "a": ("p", "lineage-1"), "old": ("p", "lineage-1"), "older": ("p", None)}
    assert publish("p", {}) == (["a", "old"], [])  # `older`: nothing says it is ours
    assert unpublish(spark, "published_here", "lineage-1") == []
    assert spark.catalog.tableExists("published_here.older")
    with pytest.raises(ReconcileError, match="lineage \"x'y\" is not a plain identifier"):
        publish("p", {}, lineage="x'y")

TWO_PROJECTS_SQL = {
    "a": """
        CREATE TABLE orders (id INT, amount INT);
        CREATE MATERIALIZED VIEW totals AS
          SELECT id, SUM(amount) AS amount FROM orders GROUP BY id;
        """,
    "b": """
        CREATE TABLE orders (id INT, amount INT);
        CREATE MATERIALIZED VIEW big AS SELECT id, amount FROM orders WHERE amount > 10;
        """,
}


def orders_project(root: Path, which: str, publish: str = "{database: analytics}") -> Path:
    """A project of its own (state and storage under its folder) with a pipeline `orders`
    publishing to the database `analytics`."""
    return write_files(root / which, {
        "reconcile.yaml": "",
        "pipelines/orders/pipeline.yaml": f"name: orders\npublish: {publish}\n",
        "pipelines/orders/program.sql": TWO_PROJECTS_SQL[which]})


@pytest.mark.spark
@pytest.mark.slow
def test_two_projects_pipelines_of_one_name_keep_their_own_views(
        tmp_path: Path, metastore: dict[str, str]) -> None:
    """Two projects, each with its own state backend and storage root and a pipeline named
    `orders`, publish to one database of one Derby metastore: the second leaves the view the
    first owns alone, in one line naming it, and publishes the rest; neither replaces, drops
    nor destroys the other's views. A pipeline whose folder is gone has its views dropped
    by its destroy, and one whose `publish:` is removed by its next apply."""
    first, second = orders_project(tmp_path, "a"), orders_project(tmp_path, "b")
    # each process reads by name first, in a JVM that has written nothing, then runs the
    # next commands: five JVMs, not ten
    _, results = process(metastore, commands=(
        (first, ["apply", "--auto-approve"]),
        (first, ["execute", "-p", "orders", "INSERT INTO orders VALUES (1, 5), (1, 7)"])))
    assert [r["exit"] for r in results] == [0, 0], results
    theirs = {"orders": [["1", "5"], ["1", "7"]], "totals": [["1", "12"]]}

    found, results = process(metastore, read=("orders", "totals"), commands=(
        (second, ["apply", "--auto-approve"]),
        (second, ["execute", "-p", "orders", "INSERT INTO orders VALUES (2, 50)"])))
    assert found == theirs
    assert [r["exit"] for r in results] == [0, 0], results
    for result in results:  # committed; the other project's view alone is not replaced
        [line] = [each for each in result["output"].splitlines() if "analytics." in each]
        assert "reconcile: orders: analytics.orders is published by pipeline 'orders' of " \
               "another project (its lineage" in line and "not published" in line, line

    spec = second / "pipelines/orders/pipeline.yaml"  # the clash left out: `big` alone
    spec.write_text("name: orders\npublish: {database: analytics, exclude: [orders]}\n")
    found, [result] = process(metastore, read=("orders", "totals"), commands=(
        (second, ["execute", "-p", "orders", "INSERT INTO orders VALUES (3, 30)"]),))
    assert found == theirs
    assert result["exit"] == 0, result

    shutil.rmtree(second / "pipelines/orders")  # the manifest says where its views are
    found, [result] = process(metastore, read=("orders", "totals", "big"), commands=(
        (second, ["destroy", "-p", "orders", "--auto-approve"]),))
    assert found == {**theirs, "big": [["2", "50"], ["3", "30"]]}
    assert result["exit"] == 0, result

    (first / "pipelines/orders/pipeline.yaml").write_text("name: orders\n")  # unpublished
    found, [result] = process(metastore, read=("orders", "totals", "big"), commands=(
        (first, ["apply", "--auto-approve"]),))
    assert found == {**theirs, "big": "TABLE_OR_VIEW_NOT_FOUND"}
    assert result["exit"] == 0 and "orders: no changes; its views in 'analytics' dropped" \
        in result["output"], result
    assert set(read(metastore, "orders", "totals").values()) == {"TABLE_OR_VIEW_NOT_FOUND"}
