"""Bad input files through the CLI: a file Spark cannot read, or one with malformed rows.

With `on_bad_input: fail` (the default) the file's connector is held at its offset and
named in one error line, while the pipeline's other connectors step and commit; fixed
in place, the file goes in on the next step. With `skip` the file is set aside,
recorded in the checkpoint and in the manifest (`status` shows it), and the rest of its
batch goes in. A change of `on_bad_input` resets no offsets.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from tests.cli_helpers import manifest, query, reconcile
from tests.projects import write_files

SQL = """
create table grades (student_id bigint, grade int);
create table visits (student_id bigint, room string);
create materialized view per_student as
select g.student_id, count(*) as grades, sum(g.grade) as total
from grades g group by g.student_id;
create materialized view rooms as select room, count(*) as visits from visits group by room;
"""


def project_with(root: Path, grades_format: str, on_bad_input: str | None = None) -> Path:
    setting = f", on_bad_input: {on_bad_input}" if on_bad_input else ""
    return write_files(root, {
        "reconcile.yaml": "spark:\n  master: local[2]\n",
        "pipelines/p/pipeline.yaml": (
            "name: p\nbootstrap_policy: allow\nconnectors:\n"
            f"  - {{name: grades_in, table: grades, type: files, format: {grades_format}, "
            f"path: input/grades{setting}}}\n"
            "  - {name: visits_in, table: visits, type: files, format: json, "
            "path: input/visits}\n"),
        "pipelines/p/program.sql": SQL,
    })


def parquet_file(path: Path, rows: list[tuple[int, int]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"student_id": pa.array([r[0] for r in rows], pa.int64()),
                             "grade": pa.array([r[1] for r in rows], pa.int32())}), path)


def corrupt_file(path: Path) -> None:
    """Parquet's magic bytes around garbage: Spark's FAILED_READ_FILE."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PAR1" + b"\x00garbage" * 20 + b"PAR1")


def json_file(path: Path, lines: list[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n"
                            for line in lines), encoding="utf-8")


def grades(project: Path) -> list[tuple[int, int]]:
    return [(r["student_id"], r["grade"]) for r in
            query(project, "p", "SELECT * FROM grades ORDER BY student_id, grade")]


def assert_views_equal_their_queries(project: Path) -> None:
    assert query(project, "p", "SELECT * FROM per_student ORDER BY student_id") == query(
        project, "p", "SELECT student_id, count(*) AS grades, sum(grade) AS total FROM "
        "grades GROUP BY student_id ORDER BY student_id")
    assert query(project, "p", "SELECT * FROM rooms ORDER BY room") == query(
        project, "p", "SELECT room, count(*) AS visits FROM visits GROUP BY room ORDER BY room")


def test_an_unreadable_file_holds_its_connector_and_the_others_step(
        spark: SparkSession, tmp_path: Path) -> None:
    project = project_with(tmp_path, "parquet")
    reconcile(project, "apply", "--auto-approve")
    parquet_file(project / "input/grades/a.parquet", [(1, 90), (2, 80)])
    corrupt_file(project / "input/grades/b.parquet")
    json_file(project / "input/visits/v.json", [{"student_id": 1, "room": "lab"}])
    table = DeltaTable(str(project / ".reconcile/data/p/tables/grades"))
    version = table.version()

    output = reconcile(project, "run", expect=1)
    *committed, error = output.strip().splitlines()
    assert any("step committed" in line for line in committed), output
    bad = (project / "input/grades/b.parquet").resolve()
    assert error.startswith("error: input connector 'grades_in' (input/grades): cannot read "
                            f"{bad} (corrupted file"), error
    assert error.endswith("fix or remove it, or set on_bad_input: skip"), error
    assert manifest(project, "p")["last_step"]["ingested"] == {"visits_in": 1}
    assert query(project, "p", "SELECT room, visits FROM rooms") == [
        {"room": "lab", "visits": 1}]
    table.update_incremental()
    assert table.version() == version, "the held batch wrote to its table"
    assert grades(project) == []
    # The failure stays visible after the command: status names it and what it holds.
    [report] = json.loads(reconcile(project, "status", "--json"))
    assert report["last_failure"]["held"] == {"grades_in": error.removeprefix("error: ")}
    assert f"last step failed at {report['last_failure']['at']}: input connector " \
        "'grades_in'" in reconcile(project, "status")

    # Fixed in place, the file goes in with the rest of its batch, once.
    parquet_file(project / "input/grades/b.parquet", [(2, 70)])
    assert "step committed" in reconcile(project, "run")
    assert json.loads(reconcile(project, "status", "--json"))[0]["last_failure"] is None
    assert grades(project) == [(1, 90), (2, 70), (2, 80)]
    assert_views_equal_their_queries(project)
    assert "no new input" in reconcile(project, "run")


def test_skip_sets_unreadable_files_aside_and_records_them(
        spark: SparkSession, tmp_path: Path) -> None:
    project = project_with(tmp_path, "parquet", on_bad_input="skip")
    reconcile(project, "apply", "--auto-approve")
    parquet_file(project / "input/grades/a.parquet", [(1, 90), (2, 80)])
    corrupt_file(project / "input/grades/b.parquet")
    corrupt_file(project / "input/grades/c.parquet")
    parquet_file(project / "input/grades/d.parquet", [(3, 60)])

    assert "step committed" in reconcile(project, "run")
    assert grades(project) == [(1, 90), (2, 80), (3, 60)]
    assert_views_equal_their_queries(project)
    skipped = manifest(project, "p")["connectors"]["grades_in"]["skipped_files"]
    assert [Path(entry["file"]).name for entry in skipped] == ["b.parquet", "c.parquet"]
    assert all("corrupted file" in entry["reason"] for entry in skipped), skipped
    assert "skipped files: grades_in: 2, last " in reconcile(project, "status")
    # Set aside means taken: the skipped files are not read again.
    assert "no new input" in reconcile(project, "run")
    parquet_file(project / "input/grades/e.parquet", [(3, 61)])
    assert "step committed" in reconcile(project, "run")
    assert grades(project) == [(1, 90), (2, 80), (3, 60), (3, 61)]
    assert len(manifest(project, "p")["connectors"]["grades_in"]["skipped_files"]) == 2


def test_skip_sets_aside_whole_files_with_malformed_rows(spark: SparkSession,
                                                         tmp_path: Path) -> None:
    project = project_with(tmp_path, "json", on_bad_input="skip")
    reconcile(project, "apply", "--auto-approve")
    json_file(project / "input/grades/a.json", [{"student_id": 1, "grade": 90}])
    json_file(project / "input/grades/b.json", [{"student_id": 2, "grade": 80}, "not json",
                                                "{also not"])
    assert "step committed" in reconcile(project, "run")
    assert grades(project) == [(1, 90)], "a file with malformed rows is set aside whole"
    [entry] = manifest(project, "p")["connectors"]["grades_in"]["skipped_files"]
    assert Path(entry["file"]).name == "b.json" and entry["reason"] == "2 malformed row(s)"
    assert_views_equal_their_queries(project)


def test_malformed_rows_name_their_file(spark: SparkSession, tmp_path: Path) -> None:
    project = project_with(tmp_path, "json")
    reconcile(project, "apply", "--auto-approve")
    json_file(project / "input/grades/a.json", [{"student_id": 1, "grade": 90}])
    json_file(project / "input/grades/b.json", ["not json"])
    output = reconcile(project, "run", expect=1)
    assert output.count("\n") == 1, output
    bad = (project / "input/grades/b.json").resolve()
    assert f"1 malformed row(s) in batch 0 ({bad}); fix the input, or set on_error: " \
        "quarantine or on_bad_input: skip" in output and "on_bad_input: skip" in output, output
    assert reconcile(project, "status").startswith("p: Running")


def test_changing_on_bad_input_resets_no_offsets(spark: SparkSession, tmp_path: Path) -> None:
    project = project_with(tmp_path, "json")
    reconcile(project, "apply", "--auto-approve")
    json_file(project / "input/grades/a.json", [{"student_id": 1, "grade": 90}])
    assert "step committed" in reconcile(project, "run")
    checkpoint = manifest(project, "p")["connectors"]["grades_in"]["checkpoint"]

    project_with(project, "json", on_bad_input="skip")
    (project / "input/visits").mkdir()  # plan refuses an input folder that does not exist
    [plan] = json.loads(reconcile(project, "plan", "--json"))["pipelines"]
    action = next(a for a in plan["actions"] if a["name"] == "grades_in")
    assert plan["has_changes"] and not plan["bootstrap_required"]
    assert action["action"] == "keep" and action["reasons"] == [
        "on_bad_input fail -> skip; offsets kept"]
    assert "connector grades_in: on_bad_input fail -> skip, no reset" in plan["notes"]
    reconcile(project, "apply", "--auto-approve")
    state = manifest(project, "p")
    assert state["connectors"]["grades_in"]["checkpoint"] == checkpoint
    assert state["program"]["connectors"]["grades_in"]["on_bad_input"] == "skip"
    assert "no new input" in reconcile(project, "run"), "a kept offset reads nothing again"
    assert grades(project) == [(1, 90)]


def test_a_mistyped_input_path_is_named_at_each_idle_run(spark: SparkSession,
                                                         tmp_path: Path) -> None:
    project = project_with(tmp_path, "json")
    reconcile(project, "apply", "--auto-approve")
    json_file(project / "input/visits/v.json", [{"student_id": 1, "room": "lab"}])
    assert "step committed" in reconcile(project, "run")
    missing = (project / "input/grades").resolve()
    assert reconcile(project, "run").strip() == (
        "p: no new input; input connector 'grades_in' reads input/grades, which does not "
        f"exist ({missing})")
