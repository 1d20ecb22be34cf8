"""The Action with its tables on `s3a://` (moto) applies through Delta Lake's own writer:
what action.yml's jar steps give embedded Spark (`engine/spark/jars.py`,
`tests/engine/test_jars.py`)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

import boto3
import pytest

from tests.cli_helpers import reconcile
from tests.fake_github import FakeGitHub
from tests.github_harness import Workspace, approve, github, workspace
from tests.projects import SEED_GRADES, SEED_STUDENTS, apply_seed_modification

__all__ = ["github", "workspace"]  # the fixtures


def test_an_apply_to_s3a_storage_goes_through_deltas_writer(
        workspace: Workspace, github: FakeGitHub, spark: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECONCILE_DELTA_WRITER", raising=False)  # the writer it chooses
    monkeypatch.setenv("RECONCILE_ENGINE_COMMIT_BYTES", "0")  # every row commit Delta's
    storage = workspace.backend_url.replace("s3://", "s3a://").replace("/state", "/data")
    settings = workspace.project / "reconcile.yaml"
    settings.write_text(settings.read_text().replace(".reconcile/data", storage))
    workspace.base_sha = workspace.commit("tables on S3")
    assert workspace.pull_request("opened").exit_code == 0
    deployed, _ = approve(workspace, "alice")
    assert deployed.exit_code == 0, deployed.log
    for insert in (SEED_STUDENTS, SEED_GRADES):
        reconcile(workspace.project, "execute", "-p", "grades", insert)

    apply_seed_modification(workspace.project)  # a bootstrap recomputes two views
    assert workspace.pull_request("synchronize", workspace.commit("a view")).exit_code == 0
    bootstrapped, _ = approve(workspace, "bob", "grades")
    assert bootstrapped.exit_code == 0, bootstrapped.log
    assert bootstrapped.outputs["result"] == "applied"

    bucket = urlparse(storage).netloc
    s3 = boto3.client("s3")
    keys = [item["Key"] for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix="data/") for item in page.get("Contents", [])]
    engines: dict[str, set[tuple[str, str]]] = {}  # each table folder's commits
    for key in keys:
        if "/_delta_log/" in key and key.endswith(".json"):
            folder = key.split("/_delta_log/")[0].removeprefix("data/grades/")
            for line in s3.get_object(Bucket=bucket, Key=key)["Body"].read().splitlines():
                info = json.loads(line).get("commitInfo")
                if info:
                    engine = info.get("engineInfo", "").split(" ")[-1].split("/")[0]
                    engines.setdefault(folder, set()).add((info["operation"], engine))
    relations = {f"{kind}/{name}" for kind, names in (
        ("tables", ("students", "grades")),
        ("views", ("avg_grade", "avg_grade_enriched", "avg_grade_all_courses")))
        for name in names}
    assert relations <= set(engines), engines
    for folder in relations:  # an aggregate's state, which only the engine reads, aside
        assert {engine for _, engine in engines[folder]} == {"Delta-Lake"}, engines
    assert ("WRITE", "Delta-Lake") in engines["views/avg_grade_enriched"], engines
