"""URL schemes are case-insensitive: `FILE://x` is `file://x` and `S3://b` is `s3://b`.

A location from `reconcile.yaml` or `pipeline.yaml` (backend, storage, connector path) whose
scheme is spelt in capitals must land exactly where the lower-case spelling does: never in a
folder named `FILE:` under the working directory, never at `/` with the URL's "host" dropped,
and never past a check that compares schemes in lower case.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from reconciler.desired.settings.project import load_project
from reconciler.engine.delta.log import table_uri
from reconciler.state.reader import pipeline_layout
from reconciler.support.locations import resolve_path
from state_backends import LocalBackend, StateBackendError, backend_from_url
from tests.cli_helpers import query, reconcile
from tests.projects import events_pipeline, write_files

BASE = Path("/proj")


@pytest.mark.parametrize(("location", "expected"), [
    ("FILE://in/events", "/proj/in/events"),
    ("file://in/events", "/proj/in/events"),
    ("File:///abs/events", "/abs/events"),
    ("S3://Bucket/Key", "s3://Bucket/Key"),
    ("s3A://bucket/key", "s3a://bucket/key"),
    ("in/x://y", "/proj/in/x:/y"),  # no scheme: a relative path, under the project
    ("/abs/plain", "/abs/plain"),
])
def test_locations_resolve_the_same_whatever_the_scheme_case(location: str,
                                                             expected: str) -> None:
    assert resolve_path(location, BASE) == expected


def test_storage_urls_are_read_with_lower_case_schemes(tmp_path: Path) -> None:
    """The layout every manifest path is held against, and the engine's table URIs."""
    for storage, root in (("S3://Bucket/data", "s3://Bucket/data"),
                          ("FILE://data", str(tmp_path / "data")),
                          ("FILE:///srv/data", "/srv/data")):
        write_files(tmp_path, {"reconcile.yaml": f"storage: {storage}\n",
                               "pipelines/p/pipeline.yaml": "name: p\n"})
        layout = pipeline_layout(load_project(tmp_path), "p")
        assert layout.relation("table", "t") == f"{root}/p/tables/t"
    assert table_uri("S3A://bucket/p/tables/t/") == "s3a://bucket/p/tables/t"


def test_state_backend_urls_are_read_with_lower_case_schemes() -> None:
    backend = backend_from_url("FILE://state", BASE)
    assert isinstance(backend, LocalBackend) and backend.root == BASE / "state"
    with pytest.raises(StateBackendError, match="scheme 'ftp' is not one of"):
        backend_from_url("FTP://host/state", BASE)


def test_a_project_with_capitalised_file_urls_applies_inside_the_project(
        spark: SparkSession, tmp_path: Path) -> None:
    """Through the CLI: state, tables and the connector's input where `file://` puts them."""
    files = events_pipeline("create table events (id bigint not null, k string);\n"
                            "create materialized view v as select k, count(*) as n "
                            "from events group by k;\n",
                            "backend: FILE://state\nstorage: FILE://data\n")
    spec = "pipelines/p/pipeline.yaml"
    files[spec] = files[spec].replace("path: input/events", "path: FILE://input/events")
    project = write_files(tmp_path / "project", {
        **files, "input/events/1.json": '{"id": 1, "k": "a"}\n{"id": 2, "k": "a"}\n'})
    reconcile(project, "apply", "--auto-approve")
    reconcile(project, "run")
    state = json.loads((project / "state/p/manifest.json").read_text())
    assert state["relations"]["v"]["path"] == "p/views/v"
    assert query(project, "p", "select k, n from v") == [{"k": "a", "n": 2}]
    assert not (project / "FILE:").exists() and not (tmp_path / "FILE:").exists()
