"""Which jars a project's set-up fetches (`engine/spark/jars.py`): Delta's always, S3A's (and the
SLF4J binding that keeps it quiet) only for storage on S3, named by version for a CI cache."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.engine.spark.jars import delta_set, kafka_set, s3a_set, sets_for, slf4j_binding_set


def jars_command(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-m", "reconciler.engine.spark.jars", *args],
                          capture_output=True, text=True, timeout=60, check=False, cwd=cwd)


@pytest.mark.parametrize(("reconcile_yaml", "storage", "with_s3a"), [
    ("storage: .reconcile/data\n", "", False),
    ("", "", False),  # the default storage is a local folder
    ("storage: s3a://bucket/data\n", "", True),
    ("storage: S3://bucket/data\n", "", True),
    ("storage: .reconcile/data\n", "s3a://bucket/data", True),  # the Action's input wins
    ("storage: [not, a, string]\n", "", False),
    ("storage: 's3a://unclosed\n", "", False),  # the commands that read it say why
])
def test_the_cache_key_names_the_sets_the_projects_storage_needs(
        tmp_path: Path, reconcile_yaml: str, storage: str, with_s3a: bool) -> None:
    (tmp_path / "reconcile.yaml").write_text(reconcile_yaml)
    result = jars_command("--cache-key", "--project", ".", "--storage", storage, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    wanted = [delta_set(), s3a_set(), slf4j_binding_set()] if with_s3a else [delta_set()]
    assert result.stdout == f"key={'+'.join(s.folder_name for s in wanted)}\n"


def test_without_a_project_every_set_is_fetched_as_make_test_needs() -> None:
    assert [s.folder_name for s in sets_for(None)] == [
        s.folder_name for s in (delta_set(), s3a_set(), slf4j_binding_set(), kafka_set())]
    assert sets_for("/local/folder") == [delta_set()]


def test_s3as_jars_are_on_the_class_path_only_of_a_project_that_reaches_s3(
        tmp_path: Path) -> None:
    from reconciler.desired.settings.project import load_project
    from reconciler.engine.spark.session import appended_jars, spark_conf
    from reconciler.operations.engine import reaches_s3
    from tests.projects import copy_example

    project = copy_example("grades", tmp_path)
    assert not reaches_s3(load_project(project))
    start = spark_conf("local[2]", {}, s3a=True)["spark.driver.extraClassPath"]
    assert "delta-spark" in start and "hadoop-aws" not in start and "bundle-" not in start
    assert appended_jars("local[2]", s3a=False, kafka=False) == []
    appended = [jar.name for jar in appended_jars("local[2]", s3a=True, kafka=False)]
    assert any(name.startswith("hadoop-aws") for name in appended), appended
    assert appended_jars("spark://cluster:7077", s3a=True, kafka=True) == []

    spec = project / "pipelines/grades/pipeline.yaml"  # input from S3 (a template variable)
    local_spec = spec.read_text()
    spec.write_text(local_spec.replace("vars:\n", "vars:\n  landing: S3A://bucket/landing\n"))
    assert reaches_s3(load_project(project))
    spec.write_text(local_spec)
    (project / "reconcile.yaml").write_text("storage: s3://bucket/data\n")
    assert reaches_s3(load_project(project))


def test_kafkas_jars_are_fetched_and_loaded_only_for_a_project_with_a_kafka_connector(
        tmp_path: Path) -> None:
    from reconciler.desired.settings.project import load_project
    from reconciler.engine.spark.session import appended_jars
    from reconciler.operations.engine import reaches_kafka
    from tests.projects import copy_example

    project = copy_example("grades", tmp_path)
    key = jars_command("--cache-key", "--project", ".", cwd=project)
    assert key.returncode == 0 and "kafka" not in key.stdout, key.stderr
    assert not reaches_kafka(load_project(project))
    assert appended_jars("local[2]", s3a=False, kafka=False) == []

    spec = project / "pipelines/grades/pipeline.yaml"
    spec.write_text(spec.read_text() + "# later: type: kafka\n")
    key = jars_command("--cache-key", "--project", ".", cwd=project)
    assert key.stdout.rstrip().endswith(f"+{kafka_set().folder_name}"), key.stdout
    assert reaches_kafka(load_project(project))
    assert any(jar.name.startswith("spark-sql-kafka")
               for jar in appended_jars("local[2]", s3a=False, kafka=True))
