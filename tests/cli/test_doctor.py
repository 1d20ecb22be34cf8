"""`reconcile doctor` (`cli_doctor.py`): one line per check, `fix` lines say what to do and
make the exit code 1; no JVM is started."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest

from tests.cli_helpers import reconcile
from tests.projects import copy_example


def lines(output: str) -> dict[str, str]:
    return {line.split(":", 1)[0]: line for line in output.splitlines()}


def test_a_local_project_with_its_jars_is_well(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    project = copy_example("grades", tmp_path)
    monkeypatch.delenv("RECONCILE_DELTA_WRITER", raising=False)
    found = lines(reconcile(project, "doctor"))
    assert set(found) == {"ok   java", "ok   writer", "ok   backend", "ok   storage"}, found
    assert "Delta Lake's own writer" in found["ok   writer"]
    assert "0 pipeline(s) deployed" in found["ok   backend"]


def test_missing_jars_and_an_unreachable_bucket_are_fixes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_endpoint: str) -> None:
    project = copy_example("grades", tmp_path)
    monkeypatch.delenv("RECONCILE_DELTA_WRITER", raising=False)
    monkeypatch.setenv("RECONCILE_JARS", str(tmp_path / "empty-jar-cache"))
    found = lines(reconcile(project, "doctor", expect=1))
    assert "python -m reconciler.engine.spark.jars --project ." in found["fix  writer"]
    assert "ok   backend" in found and "ok   storage" in found

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    boto3.client("s3").create_bucket(Bucket="doctor-state")
    (project / "reconcile.yaml").write_text(
        "backend: s3://doctor-state/state\nstorage: s3a://doctor-missing/data\n")
    found = lines(reconcile(project, "doctor", expect=1))
    assert "needs S3A's jars" in found["fix  writer"]
    assert "s3://doctor-state/state answers" in found["ok   backend"]
    assert "bucket doctor-missing does not answer" in found["fix  storage"]
    report = json.loads(reconcile(project, "doctor", "--json", expect=1))
    assert report["ok"] is False and report["checks"]["backend"]["ok"] is True
    assert "does not answer" in report["checks"]["storage"]["detail"]
