"""What output connectors receive when a pipeline is bootstrapped.

An output that follows a recomputed view receives only its net change (the rows
that differ, as `_op` delete/insert), so its changelog keeps integrating to the
view; a new output, a view whose columns changed, or `snapshot_on_bootstrap:
true` gets the full contents (a snapshot); `--silent` sends nothing; a new
output on an unchanged view receives only later changes.
"""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession

from tests.cli_helpers import manifest, query, reconcile
from tests.projects import write_files

SPEC = """
name: p
bootstrap_policy: allow
connectors:
  - {name: grades_in, table: grades, type: files, format: json, path: input}
  - {name: avg_out, view: avg_grade, type: files, format: json, path: out/avg}
"""
SQL = """
create table grades (student bigint, grade int);
create materialized view avg_grade as
  select student, avg(grade) as average from grades group by student;
create materialized view counts as select count(*) as n from grades;
"""


def files_in(folder: Path) -> dict[str, list[dict]]:
    """Each emitted file's rows, in a stable order."""
    return {path.name: sorted((json.loads(line) for line in path.read_text().splitlines()),
                              key=lambda row: json.dumps(row, sort_keys=True))
            for path in sorted(folder.glob("*.json"))} if folder.exists() else {}


def test_snapshots_silent_and_new_outputs(spark: SparkSession, tmp_path: Path) -> None:
    project = write_files(tmp_path, {"pipelines/p/pipeline.yaml": SPEC,
                                     "pipelines/p/program.sql": SQL})
    (project / "input").mkdir()
    (project / "input/a.json").write_text('{"student": 1, "grade": 80}\n'
                                          '{"student": 2, "grade": 60}\n')
    reconcile(project, "apply")
    reconcile(project, "run")
    before = set(files_in(project / "out/avg"))

    sql = project / "pipelines/p/program.sql"
    sql.write_text(SQL.replace("avg(grade) as average", "max(grade) as average"))
    spec = project / "pipelines/p/pipeline.yaml"
    spec.write_text(SPEC + "  - {name: count_out, view: counts, type: files, format: json, "
                           "path: out/counts}\n")
    assert "recomputed avg_grade" in reconcile(project, "apply")
    serial = manifest(project, "p")["serial"]
    snapshots = {name: rows for name, rows in files_in(project / "out/avg").items()
                 if name not in before}
    # A snapshot is the view's full contents (no `_op`): it replaces what came before.
    assert snapshots == {f"{serial:010d}-snapshot.json": [{"average": 60, "student": 2},
                                                          {"average": 80, "student": 1}]}
    assert files_in(project / "out/counts") == {}, "an unchanged view was re-emitted"

    sql.write_text(SQL.replace("avg(grade) as average", "min(grade) as average"))
    reconcile(project, "apply", "--silent")
    assert set(files_in(project / "out/avg")) == before | set(snapshots), "--silent emitted"

    (project / "input/b.json").write_text('{"student": 3, "grade": 90}\n')
    reconcile(project, "run")
    serial = manifest(project, "p")["serial"]
    assert files_in(project / "out/counts") == {f"{serial:010d}-changes.json": [
        {"n": 2, "_op": "delete"}, {"n": 3, "_op": "insert"}]}


NET_SPEC = """
name: p
bootstrap_policy: allow
connectors:
  - {name: grades_in, table: grades, type: files, format: json, path: input}
  - {name: changes_out, view: bonus, type: files, format: json, path: out/changes}
  - {name: dump_out, view: bonus, type: files, format: json, path: out/dump,
     snapshot_on_bootstrap: true}
"""
NET_SQL = """
create table grades (student bigint, grade int);
create materialized view bonus as select student, grade + 0 as points from grades;
"""


def integrate(folder: Path) -> list[dict]:
    """The rows an output's files add up to: the last snapshot, then each changelog."""
    rows: list[dict] = []
    for name, batch in files_in(folder).items():
        if name.endswith("-snapshot.json"):
            rows = list(batch)
            continue
        for row in batch:
            op = row.pop("_op")
            if op == "insert":
                rows.append(row)
            else:
                rows.remove(row)
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))


def test_bootstrap_sends_only_the_rows_that_change(spark: SparkSession,
                                                   tmp_path: Path) -> None:
    project = write_files(tmp_path, {"pipelines/p/pipeline.yaml": NET_SPEC,
                                     "pipelines/p/program.sql": NET_SQL})
    (project / "input").mkdir()
    (project / "input/a.json").write_text("".join(
        f'{{"student": {n}, "grade": {50 + n}}}\n' for n in range(1, 6)))
    reconcile(project, "apply")
    reconcile(project, "run")

    (project / "pipelines/p/program.sql").write_text(NET_SQL.replace(
        "grade + 0", "grade + case when student = 2 then 10 else 0 end"))
    plan = reconcile(project, "plan")
    assert "receives the rows of recomputed bonus that change" in plan
    reconcile(project, "apply")
    serial = manifest(project, "p")["serial"]
    changes = files_in(project / "out/changes")
    assert changes[f"{serial:010d}-changes.json"] == [
        {"_op": "delete", "points": 52, "student": 2},
        {"_op": "insert", "points": 62, "student": 2}]
    view = sorted(query(project, "p", "select * from bonus"),
                  key=lambda row: json.dumps(row, sort_keys=True, default=str))
    assert integrate(project / "out/changes") == [
        {k: int(v) for k, v in row.items()} for row in view]
    # The connector that asked for full dumps got the whole view, not the change.
    assert len(files_in(project / "out/dump")[f"{serial:010d}-snapshot.json"]) == 5
