"""A committed program's connectors, read once for a pipeline's runtime: typed, with their
paths resolved against the project folder (`connector_records.connector_definitions`)."""

from __future__ import annotations

from pathlib import Path

from reconciler.state.connectors import connector_definitions
from tests.projects import program_of, write_files

PIPELINE = """
name: p
connectors:
  - name: events_in
    table: events
    type: files
    format: csv
    path: input/events
    options: {header: true, maxFilesPerTrigger: 2}
    on_bad_input: skip
    changes: true
  - name: mirror_in
    table: mirrored
    type: delta
    path: S3://Bucket/source
  - name: totals_out
    view: totals
    type: files
    format: json
    path: file://out/totals
    snapshot_on_bootstrap: true
"""

SQL = """
create table events (k string, v int);
create table mirrored (k string);
create materialized view totals as select k, sum(v) as s from events group by k;
"""


def test_definitions_are_typed_and_resolved_against_the_project(tmp_path: Path) -> None:
    project = write_files(tmp_path / "project", {"pipelines/p/pipeline.yaml": PIPELINE,
                                                 "pipelines/p/program.sql": SQL})
    document = program_of(project).document()
    read = connector_definitions(document, project)
    events, mirror, totals = read["events_in"], read["mirror_in"], read["totals_out"]
    assert (events.is_input, events.relation, events.format) == (True, "events", "csv")
    assert events.path == "input/events"  # as written, for messages
    assert events.location == events.local_location == str(project.resolve() / "input/events")
    # The program keeps throughput options apart (no modification); Spark's reader gets both.
    assert "maxFilesPerTrigger" not in document["connectors"]["events_in"]["options"]
    assert events.reader_options == {"header": True, "maxFilesPerTrigger": 2}
    assert (events.on_bad_input, events.changes, events.snapshot_on_bootstrap) == (
        "skip", True, False)
    assert mirror.location == "s3://Bucket/source"  # the scheme in lower case, nothing else
    assert mirror.local_location is None  # object storage: only Spark lists it
    assert (mirror.type, mirror.format, mirror.changes) == ("delta", None, False)
    assert (totals.is_input, totals.relation, totals.snapshot_on_bootstrap) == (
        False, "totals", True)
    assert totals.on_bad_input == "fail"
    # A `file://` location is a local folder, relative to the project like a plain path.
    assert totals.location == totals.local_location == str(project.resolve() / "out/totals")
