"""Input and output connectors through the CLI, on the shared Spark session and real Delta tables.

Inputs: a `files` source ingests each file exactly once over several steps; a
step with no new file runs no Spark job and commits nothing; malformed rows
fail the step (nothing committed) or are quarantined. Outputs: a view's
changes reach a `files` output as delete/insert rows, and a `delta` output
mirrors the view.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reconciler.engine.delta.merge import apply_changes
from reconciler.engine.delta.relation import DeltaRelation
from reconciler.engine.delta.storage import DeltaStorage
from tests.cli_helpers import manifest, query, reconcile
from tests.projects import write_files

GRADES_SQL = """
create table grades (
  student_id bigint,
  class string,
  grade decimal(5,2)
);

create materialized view avg_grade as
select student_id, class, avg(grade) as class_avg
from grades
group by student_id, class;
"""

AVERAGES = "SELECT student_id, class, class_avg FROM avg_grade ORDER BY student_id, class"
RECOMPUTED = """SELECT student_id, class, avg(grade) AS class_avg FROM grades
GROUP BY student_id, class ORDER BY student_id, class"""


def grades_project(root: Path, connectors: str) -> Path:
    """Pipeline `p`: table `grades` and view `avg_grade`, with the given connectors YAML."""
    write_files(root, {
        "reconcile.yaml": "spark:\n  master: local[2]\n",
        "pipelines/p/pipeline.yaml": "name: p\nbootstrap_policy: allow\nconnectors:\n"
                                     + connectors,
        "pipelines/p/program.sql": GRADES_SQL,
    })
    return root


def json_lines(path: Path, rows: list[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n"
                            for row in rows), encoding="utf-8")


def grade_rows(project: Path) -> list[tuple[int, str, Decimal]]:
    rows = query(project, "p", "SELECT * FROM grades ORDER BY student_id, class, grade")
    return [(r["student_id"], r["class"], r["grade"]) for r in rows]


def serial(project: Path) -> int:
    return manifest(project, "p")["serial"]


def assert_views_consistent(project: Path) -> None:
    assert query(project, "p", AVERAGES) == query(project, "p", RECOMPUTED)


def next_job_id(spark: SparkSession) -> int:
    """The id the scheduler gives its next job: unchanged means no job ran, in any thread."""
    return int(spark.sparkContext._jsc.sc().dagScheduler().nextJobId())


JSON_INPUT = """
  - name: grades_in
    table: grades
    type: files
    format: json
    path: input/grades
"""
ONE_FILE_PER_BATCH = JSON_INPUT + "    options:\n      maxFilesPerTrigger: 1\n"


def test_files_input_ingests_each_file_once(spark: SparkSession, tmp_path: Path) -> None:
    project = grades_project(tmp_path, ONE_FILE_PER_BATCH)
    reconcile(project, "apply", "--auto-approve")
    inbox = project / "input/grades"
    json_lines(inbox / "part-1.json", [
        {"student_id": 1, "class": "algebra", "grade": 90},
        {"student_id": 2, "class": "algebra", "grade": 80}])
    assert "step committed" in reconcile(project, "run")
    json_lines(inbox / "part-2.json", [{"student_id": 1, "class": "algebra", "grade": 94}])
    json_lines(inbox / "part-3.json", [{"student_id": 2, "class": "algebra", "grade": 84}])
    assert "refreshed avg_grade" in reconcile(project, "run")
    # maxFilesPerTrigger tunes throughput only (not a modification), yet Spark must get it.
    assert manifest(project, "p")["last_step"]["ingested"] == {"grades_in": 2}

    assert grade_rows(project) == [(1, "algebra", 90), (1, "algebra", 94), (2, "algebra", 80),
                                   (2, "algebra", 84)]
    assert_views_consistent(project)
    assert [(r["student_id"], r["class_avg"]) for r in query(project, "p", AVERAGES)] == \
        [(1, 92), (2, 82)]

    committed = serial(project)
    jobs_before = next_job_id(spark)
    assert "no new input" in reconcile(project, "run")
    assert next_job_id(spark) == jobs_before, "an idle step ran a Spark job"
    assert serial(project) == committed


def test_malformed_rows_fail_the_step(spark: SparkSession, tmp_path: Path) -> None:
    project = grades_project(tmp_path, JSON_INPUT)
    reconcile(project, "apply", "--auto-approve")
    json_lines(project / "input/grades/part-1.json", [
        {"student_id": 1, "class": "algebra", "grade": 90},
        "this is not json",
        {"student_id": "two", "class": "algebra", "grade": 80}])
    committed = serial(project)
    table = str(project / ".reconcile/data/p/tables/grades")
    table_version = DeltaTable(table).version()

    output = reconcile(project, "run", expect=1)
    assert output.count("\n") == 1, output
    assert output.startswith("error: input connector 'grades_in'"), output
    assert "2 malformed row(s)" in output and "on_error: quarantine" in output, output
    assert serial(project) == committed
    assert DeltaTable(table).version() == table_version, "the failed batch wrote to the table"
    assert grade_rows(project) == []
    assert reconcile(project, "status", "-p", "p").startswith("p: Running")

    # Spark already listed the file in the failed batch; fixed, it is taken on the next run.
    json_lines(project / "input/grades/part-1.json", [
        {"student_id": 1, "class": "algebra", "grade": 90},
        {"student_id": 2, "class": "algebra", "grade": 80}])
    assert "step committed" in reconcile(project, "run")
    assert grade_rows(project) == [(1, "algebra", 90), (2, "algebra", 80)]
    assert_views_consistent(project)


QUARANTINE_INPUT = JSON_INPUT + "    on_error: quarantine\n"


def test_malformed_rows_quarantined(spark: SparkSession, tmp_path: Path) -> None:
    project = grades_project(tmp_path, QUARANTINE_INPUT)
    reconcile(project, "apply", "--auto-approve")
    json_lines(project / "input/grades/part-1.json", [
        {"student_id": 1, "class": "algebra", "grade": 90},
        "this is not json",
        {"student_id": 2, "class": "algebra", "grade": 80}])
    reconcile(project, "run")

    assert grade_rows(project) == [(1, "algebra", 90), (2, "algebra", 80)]
    assert_views_consistent(project)
    quarantine = project / ".reconcile/data/p/quarantine/grades_in"
    quarantined = [line for file in sorted(quarantine.rglob("part-*")) if file.is_file()
                   for line in file.read_text(encoding="utf-8").splitlines()]
    assert quarantined == ["this is not json"]


CSV_AND_PARQUET_INPUTS = """
  - name: grades_csv
    table: grades
    type: files
    format: csv
    path: input/csv
    options:
      header: true
  - name: grades_parquet
    table: grades
    type: files
    format: parquet
    path: input/parquet/*.parquet
"""


def test_csv_and_parquet_inputs(spark: SparkSession, tmp_path: Path) -> None:
    project = grades_project(tmp_path, CSV_AND_PARQUET_INPUTS)
    reconcile(project, "apply", "--auto-approve")
    # Spark lists folders recursively and expands globs; so must the check for new files.
    (project / "input/csv/day=2025-01-01").mkdir(parents=True)
    (project / "input/csv/day=2025-01-01/a.csv").write_text(
        "student_id,class,grade\n1,algebra,90\n2,physics,70.5\n", encoding="utf-8")
    (project / "input/parquet").mkdir(parents=True)
    pq.write_table(pa.table({"student_id": pa.array([3], pa.int64()),
                             "class": ["algebra"],
                             "grade": pa.array([Decimal("88.25")], pa.decimal128(5, 2))}),
                   project / "input/parquet/a.parquet")
    reconcile(project, "run")

    assert grade_rows(project) == [(1, "algebra", 90), (2, "physics", Decimal("70.5")),
                                   (3, "algebra", Decimal("88.25"))]
    assert_views_consistent(project)
    assert manifest(project, "p")["last_step"]["ingested"] == {"grades_csv": 1,
                                                              "grades_parquet": 1}


OUTPUTS = """
  - name: averages_out
    view: avg_grade
    type: files
    format: json
    path: output/averages
  - name: averages_mirror
    view: avg_grade
    type: delta
    path: output/mirror
"""


def test_output_connectors(spark: SparkSession, tmp_path: Path) -> None:
    project = grades_project(tmp_path, OUTPUTS)
    reconcile(project, "apply", "--auto-approve")
    reconcile(project, "execute", "-p", "p",
              "INSERT INTO grades VALUES (1, 'algebra', 90), (2, 'algebra', 80)")
    reconcile(project, "execute", "-p", "p", "INSERT INTO grades VALUES (1, 'algebra', 94)")
    step = serial(project)

    emitted = project / f"output/averages/{step:010d}-changes.json"
    changes = sorted((row["_op"], row["student_id"], row["class"], Decimal(row["class_avg"]))
                     for row in map(json.loads, emitted.read_text().splitlines()))
    assert changes == [("delete", 1, "algebra", 90), ("insert", 1, "algebra", 92)]

    mirror = DeltaTable(str(project / "output/mirror")).to_pyarrow_table().to_pylist()
    assert sorted((r["student_id"], r["class"], r["class_avg"]) for r in mirror) == \
        [(r["student_id"], r["class"], r["class_avg"]) for r in query(project, "p", AVERAGES)]
    assert len(mirror) == 2


DELTA_FILES = {
    "pipelines/d/pipeline.yaml": """
        name: d
        connectors:
          - {name: upstream, table: events, type: delta, path: upstream/events}
        """,
    "pipelines/d/program.sql": """
        create table events (id bigint, kind string, amount decimal(8,2));
        create materialized view totals as
          select kind, count(*) as n, sum(amount) as amount from events group by kind;
        """,
}


def test_delta_input_ingests_new_versions_once(spark: SparkSession, tmp_path: Path) -> None:
    project = write_files(tmp_path, DELTA_FILES)
    upstream = str(project / "upstream/events")

    def append(rows: list[tuple[int, str, str]]) -> None:
        write_deltalake(upstream, pa.table({
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "kind": [r[1] for r in rows],
            "amount": pa.array([Decimal(r[2]) for r in rows], pa.decimal128(8, 2))}),
            mode="append")

    append([(1, "a", "1.50"), (2, "b", "2.00")])
    reconcile(project, "apply", "--auto-approve")
    assert "step committed" in reconcile(project, "run")
    append([(3, "a", "3.00")])
    append([(4, "b", "4.00")])
    assert "step committed" in reconcile(project, "run")
    assert "no new input" in reconcile(project, "run")
    rows = query(project, "d", "SELECT kind, n, amount FROM totals ORDER BY kind")
    assert [(r["kind"], r["n"], r["amount"]) for r in rows] == [("a", 2, Decimal("4.50")),
                                                               ("b", 2, Decimal("6.00"))]
    assert manifest(project, "d")["connectors"]["upstream"]["source_version"] == 2


def test_delta_input_reads_deletes_and_updates_from_the_change_feed(
        spark: SparkSession, tmp_path: Path, delta_spark: str) -> None:
    """A source that deletes and updates rows (Delta's MERGE, with the change data feed on):
    each step applies the feed since the last ingested version, once."""
    project = write_files(tmp_path, DELTA_FILES)
    upstream = str(project / "upstream/events")
    source = DeltaStorage(spark, writer="delta-spark")
    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("kind", T.StringType()),
                           T.StructField("amount", T.DecimalType(8, 2))])
    source.create(upstream, schema, change_feed=True)

    def rows(*values: tuple[int, str, str]) -> object:
        return spark.createDataFrame([(i, k, Decimal(a)) for i, k, a in values], schema)

    version = source.append(upstream, rows((1, "a", "1.50"), (2, "b", "2.00"), (3, "a", "3.00")))
    reconcile(project, "apply", "--auto-approve")
    assert "step committed" in reconcile(project, "run")
    # Row 1 deleted, row 2 updated, row 4 inserted: one version of the source.
    version = apply_changes(DeltaRelation(source, str(upstream), version, schema),
                            rows((2, "b", "5.00"), (4, "b", "4.00")),
                            rows((1, "a", "1.50"), (2, "b", "2.00")))
    assert "step committed" in reconcile(project, "run")
    assert "no new input" in reconcile(project, "run")
    totals = query(project, "d", "SELECT kind, n, amount FROM totals ORDER BY kind")
    # From scratch: the source as it is now.
    scratch = source.read(upstream, version, schema).groupBy("kind").agg(
        F.count("*").alias("n"), F.sum("amount").alias("amount")).orderBy("kind")
    assert [(r["kind"], r["n"], r["amount"]) for r in totals] == [
        (r["kind"], r["n"], r["amount"]) for r in scratch.collect()]
    assert sorted(r["id"] for r in query(project, "d", "SELECT id FROM events")) == [2, 3, 4]
    assert manifest(project, "d")["connectors"]["upstream"]["source_version"] == version


def test_a_streamed_connector_moves_to_listed_batches(spark: SparkSession, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A connector whose checkpoint a Structured Streaming query kept (before issue 79):
    a stream batch killed after its append, before its commit, is finished by the stream
    once; then the connector takes only new files as listed batches, numbered after the
    stream's, and every row lands once."""
    from reconciler.engine.io import files_connector

    project = grades_project(tmp_path, ONE_FILE_PER_BATCH)
    reconcile(project, "apply", "--auto-approve")
    inbox = project / "input/grades"
    with monkeypatch.context() as streamed:
        streamed.setattr(files_connector, "uses_listed_batches", lambda *_: False)
        json_lines(inbox / "part-1.json", [{"student_id": 1, "class": "algebra", "grade": 90}])
        json_lines(inbox / "part-2.json", [{"student_id": 2, "class": "algebra", "grade": 80}])
        assert "step committed" in reconcile(project, "run")
    [checkpoint] = (project / ".reconcile/data/p/connectors/grades_in").iterdir()
    assert sorted(entry.name for entry in (checkpoint / "commits").iterdir()
                  if entry.name.isdigit()) == ["0", "1"]
    for name in ("1", ".1.crc"):  # killed after batch 1's append, before its commit
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    json_lines(inbox / "part-3.json", [{"student_id": 1, "class": "algebra", "grade": 94}])
    assert "step committed" in reconcile(project, "run")  # the stream finishes batch 1
    assert not (checkpoint / "listed").exists()
    json_lines(inbox / "part-4.json", [{"student_id": 2, "class": "algebra", "grade": 84}])
    assert "step committed" in reconcile(project, "run")
    assert json.loads((checkpoint / "listed/3.json").read_text())["files"] == [
        str((inbox / "part-4.json").resolve())]
    assert (checkpoint / "listed/3.done").exists()
    assert grade_rows(project) == [(1, "algebra", 90), (1, "algebra", 94), (2, "algebra", 80),
                                   (2, "algebra", 84)]
    assert_views_consistent(project)
    assert "no new input" in reconcile(project, "run")
