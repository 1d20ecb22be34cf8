"""No row value stops a pipeline (issue 78), through `reconcile apply` and `reconcile run`.

A landing folder's writer chooses the values: dates Spark reads but Python's `date` cannot
hold (`+12345-01-01`, year 0, negative years, Spark's first and last day), timestamps as
far, the largest decimal(38,2), NaN and infinities, a 1 MB string, and bytes that are not
UTF-8 (JSON: a malformed row, quarantined per `on_error`; CSV: replaced by Spark; Parquet:
kept as they are). Each step with them commits, the later steps with good files too, every
view (maintained incrementally) equals its query from scratch, and where values come back
to Python (the engine's Delta statistics, the maintained views' key ranges, a FAIL UPDATE
message, the preview's sample rows, `reconcile query`) they come back as Spark's text or
are left out. On both writers: each commits small tables with the engine's statistics.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from tests.cli_helpers import query, reconcile
from tests.projects import write_files

SQL = """
create table events (id bigint, day date, at timestamp, amount decimal(38,2), x double,
  name string);
create table labels (day date, label string);
create materialized view per_day as
  select day, count(*) as n, max(at) as last_at, max(amount) as top from events group by day;
create materialized view labelled as
  select e.id, e.day, l.label from events e join labels l on e.day = l.day;
create materialized view by_x as
  select x, count(*) as n, max(length(name)) as longest from events group by x;
create materialized view checked (
  constraint before_10000 expect (year(day) < 10000) on violation fail update
) as select id, day from events where id > 100;
"""
SCRATCH = {
    "per_day": "select day, count(*) as n, max(at) as last_at, max(amount) as top from events "
               "group by day",
    "labelled": "select e.id, e.day, l.label from events e join labels l on e.day = l.day",
    "by_x": "select x, count(*) as n, max(length(name)) as longest from events group by x",
}
HUGE = "99999999999999999999999999999999999.99"  # decimal(38,2)'s largest
FAR = [  # (id, day, at): year +12345, 0, -44, Spark's first and last day (and time)
    (1, "+12345-01-01", "+12345-01-01T00:00:00Z"),
    (2, "0000-01-01", "0000-01-01T00:00:00Z"),
    (3, "-0044-03-15", "-0044-03-15T12:00:00Z"),
    (4, "-5877641-06-23", "-290308-12-21T19:59:06Z"),
    (5, "+5881580-07-11", "+294247-01-10T04:00:54Z"),
]


def json_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def differing_rows(project: Path, view: str) -> int:
    """Rows in the view or its query from scratch but not both (as multisets, in Spark: NaN
    equals NaN there)."""
    scratch = SCRATCH[view]
    [row] = query(project, "p", f"select count(*) as n from ((select * from {view} except all "
                                f"{scratch}) union all ({scratch} except all select * from "
                                f"{view}))")
    return int(row["n"])


@pytest.mark.parametrize("writer", ["delta-rs", "delta-spark"])
def test_far_dates_and_odd_values_go_through_every_step(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        writer: str) -> None:
    monkeypatch.setenv("RECONCILE_DELTA_WRITER", writer)
    project = write_files(tmp_path, {
        "reconcile.yaml": "spark:\n  master: local[2]\n",
        "pipelines/p/pipeline.yaml": (
            "name: p\nbootstrap_policy: allow\nrefresh: incremental\nconnectors:\n"
            "  - {name: events_in, table: events, type: files, format: json, "
            "path: input/events}\n"
            "  - {name: labels_in, table: labels, type: files, format: json, "
            "path: input/labels}\n"
            "  - {name: days_out, view: per_day, type: files, format: json, path: out/days}\n"),
        "pipelines/p/program.sql": SQL})
    reconcile(project, "apply", "--auto-approve")
    json_lines(project / "input/events/0.json", [json.dumps(
        {"id": 0, "day": "2024-01-01", "at": "2024-01-01T00:00:00Z", "amount": 1, "x": 1,
         "name": "a"})])
    json_lines(project / "input/labels/0.json", ['{"day": "2024-01-01", "label": "now"}'])
    assert "step committed" in reconcile(project, "run")

    odd = ['{"id": 6, "day": "2024-01-01", "amount": ' + HUGE + ', "x": NaN, "name": "b"}',
           '{"id": 7, "day": "2024-01-02", "amount": -' + HUGE + ', "x": Infinity}',
           '{"id": 8, "day": "2024-01-02", "x": -Infinity, "name": "' + "z" * 1_000_000 + '"}']
    json_lines(project / "input/events/1.json", [
        json.dumps({"id": id_, "day": day, "at": at, "amount": 2, "x": 2, "name": "far"})
        for id_, day, at in FAR] + odd)
    json_lines(project / "input/labels/1.json", [
        '{"day": "+12345-01-01", "label": "far"}', '{"day": "-5877641-06-23", "label": "first"}'])
    assert "step committed" in reconcile(project, "run")  # before: OverflowError, for good

    # Later steps, with good files and with more far rows, on the views maintained.
    json_lines(project / "input/events/2.json", [
        '{"id": 9, "day": "2024-01-01", "x": 1}', '{"id": 10, "day": "+12345-01-01", "x": 3}'])
    json_lines(project / "input/labels/2.json", ['{"day": "0000-01-01", "label": "zero"}'])
    assert "step committed" in reconcile(project, "run")
    json_lines(project / "input/events/3.json", ['{"id": 11, "day": "2024-01-03", "x": 4}'])
    assert "step committed" in reconcile(project, "run")
    for view in SCRATCH:
        assert differing_rows(project, view) == 0, view
    assert len(query(project, "p", "select * from labelled")) == 7  # 0, 6, 9; 1, 10; 2; 4

    # `reconcile query` prints what Python cannot hold as Spark writes it.
    days = query(project, "p", "select day, n, last_at, top from per_day "
                               "where year(day) not between 2024 and 2024 order by day")
    assert [(row["day"], row["last_at"]) for row in days] == [
        ("-5877641-06-23", "-290308-12-21 19:59:06"), ("-0044-03-15", "-0044-03-15 12:00:00"),
        ("0000-01-01", "0000-01-01 00:00:00"), ("+12345-01-01", "+12345-01-01 00:00:00"),
        ("+5881580-07-11", "+294247-01-10 04:00:54")]
    [huge] = query(project, "p", "select top from per_day where day = date'2024-01-01'")
    assert str(huge["top"]) == HUGE
    written = "".join(path.read_text() for path in (project / "out/days").glob("*.json"))
    assert "12345-01-01" in written and "5881580-07-11" in written

    # A FAIL UPDATE expectation names the violating row in one line, its date as Spark's.
    json_lines(project / "input/events/4.json", ['{"id": 101, "day": "+12345-01-01"}'])
    failed = reconcile(project, "run", expect=1).strip().splitlines()[-1]
    assert failed.startswith("error: view 'checked': expectation 'before_10000'"), failed
    assert "e.g. id=101, day=+12345-01-01; the step stopped" in failed, failed

    # The preview's sample rows show them too.
    (project / "pipelines/p/program.sql").write_text(
        SQL.replace("count(*) as n, max(at)", "count(*) + 1 as n, max(at)"))
    plan = reconcile(project, "plan", "--preview", "rows")
    assert "sample rows of per_day" in plan and "-290308-12-21 19:59:06 | 2.00" in plan, plan


def parquet_strings(path: Path, keys: list[bytes], name: str, values: list[object]) -> None:
    """A Parquet file whose string column `k` holds `keys` as they are: UTF-8 or not."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"k": pa.array(keys, pa.binary()).view(pa.string()),
                             name: values}), path)


def test_bytes_that_are_not_utf8_are_kept_replaced_or_quarantined(
        spark: SparkSession, tmp_path: Path) -> None:
    """A Parquet string that is not UTF-8 is kept as its bytes, and a maintained join on it
    reads the other side's matching rows (before: the change's range came back to Python
    with U+FFFD, which sorts below the byte 0xFF, and the join missed the row); a CSV's are
    replaced by Spark; a JSON row's are a malformed row, quarantined under
    `on_error: quarantine`. A file whose name is not UTF-8 waits, named in one line, until
    renamed (before: handing it to Spark broke the session's connection, every step)."""
    project = write_files(tmp_path, {
        "reconcile.yaml": "spark:\n  master: local[2]\n",
        "pipelines/p/pipeline.yaml": (
            "name: p\nbootstrap_policy: allow\nrefresh: incremental\nconnectors:\n"
            "  - {name: a_in, table: a, type: files, format: parquet, path: input/a}\n"
            "  - {name: b_in, table: b, type: files, format: parquet, path: input/b}\n"
            "  - {name: notes_csv, table: notes, type: files, format: csv, path: input/csv, "
            "options: {header: 'true'}}\n"
            "  - {name: notes_json, table: notes, type: files, format: json, path: input/json, "
            "on_error: quarantine}\n"),
        "pipelines/p/program.sql": """
            create table a (k string, n bigint);
            create table b (k string, label string);
            create table notes (id bigint, note string);
            create materialized view joined as
              select a.k, a.n, b.label from a join b on a.k = b.k;
            create materialized view per_note as select note, count(*) as n from notes
              group by note;
            """})
    reconcile(project, "apply", "--auto-approve")
    for folder in ("csv", "json"):
        (project / "input" / folder).mkdir(parents=True)
    parquet_strings(project / "input/a/1.parquet", [b"m"], "n", [1])
    parquet_strings(project / "input/b/1.parquet", [b"m", b"z\xff", b"y"], "label",
                    ["M", "Z", "Y"])
    assert "step committed" in reconcile(project, "run")

    parquet_strings(project / "input/a/2.parquet", [b"z\xff", b"y"], "n", [2, 3])
    (project / "input/csv/1.csv").write_bytes(b"id,note\n1,ok\n2,bad\xff\n")
    (project / "input/json/1.json").write_bytes(
        b'{"id": 3, "note": "bad\xff"}\n{"id": 4, "note": "fine"}\n')
    unnamed = os.path.join(os.fsencode(project / "input/json"), b"2\xff.json")
    with open(unnamed, "wb") as file:  # a name that is not UTF-8: Spark cannot open it
        file.write(b'{"id": 5, "note": "renamed"}\n')
    output = reconcile(project, "run")
    assert "step committed" in output, output
    assert f"reconcile: input file {unnamed!r} waits: its name is not UTF-8" in output, output
    os.rename(unnamed, project / "input/json/2.json")  # renamed, it goes in
    assert "rows notes +1" in reconcile(project, "run")
    assert query(project, "p", "select concat('x', hex(k)) as k, n, label from joined "
                               "order by k") == [
        {"k": "x6D", "n": 1, "label": "M"}, {"k": "x79", "n": 3, "label": "Y"},
        {"k": "x7AFF", "n": 2, "label": "Z"}]
    assert query(project, "p", "select id, concat('x', hex(note)) as note from notes "
                               "order by id") == [
        {"id": 1, "note": "x6F6B"}, {"id": 2, "note": "x626164EFBFBD"},
        {"id": 4, "note": "x66696E65"}, {"id": 5, "note": "x72656E616D6564"}]
    quarantine = project / ".reconcile/data/p/quarantine/notes_json"
    quarantined = [line for file in sorted(quarantine.rglob("part-*")) if file.is_file()
                   for line in file.read_bytes().splitlines()]
    assert quarantined == [b'{"id": 3, "note": "bad\xff"}'], quarantined  # as it came
