"""State and data both on S3 (moto on loopback): the path a cluster user runs.

The manifest goes to an `s3://` backend (boto3) and every table and view to
`s3a://` storage, written by Delta Lake's own Spark writer through Hadoop's S3A
connector (both fetched by `make jars`), as on a cluster with Delta: Delta's S3
log store assumes one writer per table, which the pipeline lock guarantees. The
seed pipeline is deployed, fed, stepped, changed (a bootstrap), a view dropped
(its prefix removed), and everything is read again by a fresh run from the manifest.

Nightly (`make test-nightly`): S3A against moto is the slowest storage the suite has. In
`make test`, `tests/github/test_github_s3a.py` applies and bootstraps on the same path.
"""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from pyspark.sql import SparkSession

from tests.cli_helpers import manifest, query, reconcile
from tests.projects import SEED_GRADES, SEED_STUDENTS, apply_seed_modification, grades_on_s3

AVERAGES = "SELECT * FROM avg_grade_enriched ORDER BY student_name, class"


def keys(s3, bucket: str, prefix: str) -> list[str]:  # type: ignore[no-untyped-def]
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return [item["Key"] for item in listed.get("Contents", [])]


@pytest.mark.nightly  # in `make test`: tests/github/test_github_s3a.py (apply and bootstrap)
def test_the_seed_pipeline_runs_with_state_and_data_on_s3(
        spark: SparkSession, delta_spark: str, s3_endpoint: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    project, bucket = grades_on_s3(s3_endpoint, tmp_path)
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)

    outputs = [reconcile(project, "apply", "--auto-approve"),
               reconcile(project, "execute", "-p", "grades", SEED_STUDENTS),
               reconcile(project, "execute", "-p", "grades", SEED_GRADES),
               reconcile(project, "run", "-p", "grades")]
    assert query(project, "grades", AVERAGES)
    students = query(project, "grades", "SELECT count(*) AS n FROM students")
    assert any(key.endswith(".parquet") for key in keys(s3, bucket, "data/grades/views/"))

    apply_seed_modification(project)
    outputs.append(reconcile(project, "apply", "--auto-approve"))
    document = manifest(project, "grades")
    assert document["relations"]["avg_grade"]["path"] == "grades/views/avg_grade"
    assert query(project, "grades", AVERAGES)

    sql = project / "pipelines/grades/program.sql"
    sql.write_text(sql.read_text().rsplit("create", 1)[0])  # the new view goes again
    reconcile(project, "apply", "--auto-approve")
    dropped = set(document["relations"]) - set(manifest(project, "grades")["relations"])
    assert dropped
    for name in dropped:
        assert keys(s3, bucket, f"data/grades/views/{name}/") == []
    assert not list(project.glob(".reconcile"))  # nothing landed in the project folder
    assert query(project, "grades", "SELECT count(*) AS n FROM students") == students
    assert "removed" in reconcile(project, "state", "gc", "-p", "grades")  # strict: no skip
    assert not any("retention skipped" in output for output in outputs)
