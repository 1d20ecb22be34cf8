"""A manifest that travels: its paths are relative to the storage root.

A project moved to another folder (or state restored under another prefix) keeps
its manifest valid; manifests written with absolute paths are migrated when read;
a crafted path still cannot lead anywhere but the layout's own folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.cli_helpers import manifest, query, reconcile
from tests.projects import (
    SEED_GRADES,
    SEED_STUDENTS,
    copy_example,
    events_pipeline,
    write_files,
)

AVERAGES = "SELECT * FROM avg_grade_enriched ORDER BY student_name, class"
STORAGE = ".reconcile/data"


def stored_paths(document: dict[str, Any]) -> list[str]:
    """Every storage path a manifest document holds."""
    paths = []
    for state in document["relations"].values():
        paths.append(state["path"])
        if isinstance(state.get("state"), dict):
            paths.append(state["state"]["path"])
    paths += [state["checkpoint"] for state in document["connectors"].values()
              if "checkpoint" in state]
    return paths


def test_a_moved_project_plans_no_changes_and_runs_in_its_new_place(
        spark: SparkSession, tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path / "before")
    reconcile(project, "apply", "--auto-approve")
    reconcile(project, "execute", "-p", "grades", SEED_STUDENTS)
    reconcile(project, "execute", "-p", "grades", SEED_GRADES)
    averages = query(project, "grades", AVERAGES)
    assert averages

    moved = Path(shutil.move(project, tmp_path / "after" / "grades"))
    reconcile(moved, "plan", "--detailed-exitcode")  # exit 0: no changes
    assert query(moved, "grades", AVERAGES) == averages
    reconcile(moved, "execute", "-p", "grades",
              "INSERT INTO grades VALUES (1, 'chemistry', 70, DATE'2025-10-01')")
    reconcile(moved, "run", "-p", "grades")
    assert {"student_name": "Alice", "class": "chemistry", "class_avg": 70} in \
        query(moved, "grades", AVERAGES)

    document = manifest(moved, "grades")
    assert document["relations"]["avg_grade"]["path"] == "grades/views/avg_grade"
    assert all(path.startswith("grades/") for path in stored_paths(document))
    for file in (moved / ".reconcile/state/grades").rglob("*.json"):
        assert str(tmp_path) not in file.read_text(), file


def test_an_old_manifest_with_absolute_paths_is_migrated(spark: SparkSession,
                                                         tmp_path: Path) -> None:
    """Absolute paths under the current root are taken as they are; under another root
    (the folder the project was deployed in) they are rebased; the next commit stores
    them relative."""
    project = copy_example("grades", tmp_path)
    reconcile(project, "apply", "--auto-approve")
    reconcile(project, "execute", "-p", "grades", SEED_STUDENTS)
    reconcile(project, "execute", "-p", "grades", SEED_GRADES)
    averages = query(project, "grades", AVERAGES)
    state = project / ".reconcile/state/grades/manifest.json"
    document = json.loads(state.read_text())
    roots = [str(project / STORAGE), "/where/it/was/deployed/.reconcile/data"]
    for index, relation in enumerate(sorted(document["relations"].values(),
                                            key=lambda entry: entry["path"])):
        relation["path"] = f"{roots[index % 2]}/{relation['path']}"
    state.write_text(json.dumps(document))

    reconcile(project, "plan", "--detailed-exitcode")
    assert query(project, "grades", AVERAGES) == averages
    reconcile(project, "execute", "-p", "grades",
              "INSERT INTO grades VALUES (2, 'chemistry', 60, DATE'2025-10-01')")
    assert all(path.startswith("grades/") for path in stored_paths(manifest(project, "grades")))


TABLE = "create table t (id bigint not null, s string);\n"


def deployed_with_old_view(root: Path) -> Path:
    project = write_files(root, {"pipelines/p/pipeline.yaml": "name: p\nbootstrap_policy: allow\n",
                                 "pipelines/p/program.sql": TABLE + "create view old_view as "
                                 "select id from t;\ncreate view v as select id from t;\n"})
    reconcile(project, "apply", "--auto-approve")
    (project / "pipelines/p/program.sql").write_text(TABLE + "create view v as select id "
                                                             "from t;\n")
    return project


def craft(project: Path, path: str) -> None:
    state = project / ".reconcile/state/p/manifest.json"
    document = json.loads(state.read_text())
    document["relations"]["old_view"]["path"] = path
    state.write_text(json.dumps(document))


@pytest.mark.parametrize("crafted", [
    "{victim}", "../victim", "p/views/../../../victim", "{victim}/../p/views/old_view",
    "s3a://bucket/p/views/old_view", "file://{victim}/p/views/old_view", "victim/p/views/old_view",
], ids=["absolute", "up", "up-inside", "absolute-with-up", "other-scheme", "file-url",
        "relative-elsewhere"])
def test_a_crafted_path_is_refused_and_nothing_is_deleted(spark: SparkSession, tmp_path: Path,
                                                          crafted: str) -> None:
    victim = tmp_path / "victim"
    (victim / "p/views/old_view").mkdir(parents=True)
    (victim / "precious.txt").write_text("keep me")
    project = deployed_with_old_view(tmp_path / "project")
    craft(project, crafted.format(victim=victim))
    for command in (["plan"], ["apply", "--auto-approve"], ["run"]):
        output = reconcile(project, *command, expect=1)
        assert "manifest puts view 'old_view' at" in output and "refusing" in output, output
    assert (victim / "precious.txt").read_text() == "keep me"
    assert (project / STORAGE / "p/views/old_view").is_dir()


def test_an_absolute_path_elsewhere_is_rebased_never_followed(spark: SparkSession,
                                                              tmp_path: Path) -> None:
    """An old absolute path with the layout's tail names the project's own folder: dropping
    the view deletes that one, not the folder the manifest spelt."""
    victim = tmp_path / "victim/p/views/old_view"
    victim.mkdir(parents=True)
    (victim / "precious.txt").write_text("keep me")
    project = deployed_with_old_view(tmp_path / "project")
    craft(project, str(victim))
    reconcile(project, "apply", "--auto-approve")
    assert (victim / "precious.txt").read_text() == "keep me"
    assert not (project / STORAGE / "p/views/old_view").exists()


def test_a_moved_files_input_is_refused_not_read_twice(spark: SparkSession,
                                                       tmp_path: Path) -> None:
    """A `files` connector's checkpoint knows its input files by absolute path: after a
    move every file would look new, so `run` refuses instead of duplicating rows."""
    project = write_files(tmp_path / "before", {
        **events_pipeline("create table events (id bigint not null, k string);\n"
                          "create materialized view n as select count(*) as n from events;\n"),
        "input/events/1.json": '{"id": 1, "k": "a"}\n{"id": 2, "k": "b"}\n'})
    reconcile(project, "apply", "--auto-approve")
    reconcile(project, "run", "-p", "p")
    assert query(project, "p", "SELECT n FROM n") == [{"n": 2}]

    moved = Path(shutil.move(project, tmp_path / "after"))
    refused = reconcile(moved, "run", "-p", "p", expect=1)

    assert "the input (or the project) moved" in refused
    assert len(refused.strip().splitlines()) == 1
    assert query(moved, "p", "SELECT n FROM n") == [{"n": 2}]


@pytest.mark.parametrize("state, problem", [
    ({"generation": "g1", "checkpoint": ["/etc"]}, "checkpoint"),
    ({"generation": "g1", "checkpoint": "c", "source_version": "7"}, "source_version"),
    ({"generation": "g1", "checkpoint": "c", "command": "rm -rf /"}, "command"),
], ids=["checkpoint-not-text", "version-not-a-number", "unknown-field"])
def test_a_crafted_connector_state_is_refused(spark: SparkSession, tmp_path: Path,
                                              state: dict[str, object], problem: str) -> None:
    """A connector's state is typed where the manifest is read: a field of the wrong type,
    or one no version writes, is one line naming the connector, before anything runs."""
    project = deployed_with_old_view(tmp_path / "project")
    manifest_file = project / ".reconcile/state/p/manifest.json"
    document = json.loads(manifest_file.read_text())
    document["connectors"] = {"orders_in": state}
    manifest_file.write_text(json.dumps(document))
    for command in (["plan"], ["status"], ["run"]):
        output = reconcile(project, *command, expect=1)
        assert output.startswith("error: ") and output.count("\n") == 1, output
        assert f"manifest: connector 'orders_in' has a bad {problem}" in output, output
