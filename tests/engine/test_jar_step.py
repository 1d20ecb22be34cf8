"""Issue 78.2: the Action's jar step reads a pull request's files only through the safe reader.

`action.yml` names the jars with `python -P -m reconciler.engine.spark.jars --cache-key
--project DIR --storage S` and fetches them with `--no-class-archive --project DIR
--storage S`, both on the pull request's checkout (forks included) before anything else
of the reconciler runs. Both decide which jars a project needs from its `reconcile.yaml`
and `pipeline.yaml` files: a `pipeline.yaml` linked to `/dev/zero` once exhausted the
runner's memory and a named pipe hung the job. Here each is driven exactly as the Action
runs it, under an address-space limit (an unbounded read fails with `MemoryError` instead
of taking the machine) and a deadline (a read that waits on a pipe fails the test instead
of hanging it): each finishes at once with the jars of a project that names neither
Kafka nor S3, saying in one line which file it skipped. Neither mode starts a JVM here
(`--cache-key` never does; the fetch finds the jar cache complete).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.engine.spark.jars import (
    delta_jars,
    delta_set,
    jar_folder,
    kafka_set,
    local_fs_jar,
)

MEMORY_LIMIT = 2 << 30
"""The step's address space: far more than it needs, far less than `/dev/zero` gives."""

DEADLINE_SECONDS = 30
KAFKA_PIPELINE = "connectors:\n  - {name: events, type: kafka}\n"
LOCAL_PIPELINE = "description: no connector\n"


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def jar_step(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The jar module as action.yml runs it (`python -P -m`, the project named, the
    `storage` input empty), from a working directory outside the checkout."""
    return subprocess.run(
        [sys.executable, "-P", "-m", "reconciler.engine.spark.jars", *args, "--project",
         str(project), "--storage", ""],
        capture_output=True, text=True, timeout=DEADLINE_SECONDS, check=False,
        cwd=project.parent, preexec_fn=_limited, stdin=subprocess.DEVNULL,
        env=os.environ | {"PYTHONSAFEPATH": "1", "RECONCILE_JARS": str(jar_folder())})


def _link_to_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


HOSTILE: dict[str, tuple[str, Callable[[Path], None]]] = {
    "pipeline.yaml links to /dev/zero": ("pipelines/z/pipeline.yaml", _link_to_zero),
    "pipeline.yaml is a named pipe": ("pipelines/z/pipeline.yaml", _fifo),
    "reconcile.yaml is a named pipe": ("reconcile.yaml", _fifo),
    "reconcile.yaml links to /dev/zero": ("reconcile.yaml", _link_to_zero),
}


def hostile_project(tmp_path: Path, case: str) -> tuple[Path, str]:
    """A project with one ordinary pipeline and the case's hostile file; (project, its path)."""
    project = tmp_path / "checkout"
    (project / "pipelines" / "a").mkdir(parents=True)
    (project / "pipelines" / "z").mkdir()
    (project / "pipelines" / "a" / "pipeline.yaml").write_text(LOCAL_PIPELINE)
    relative, make = HOSTILE[case]
    if relative != "reconcile.yaml":
        (project / "reconcile.yaml").write_text("storage: .reconcile/data\n")
    make(project / relative)
    return project, relative


def skipped(stderr: str, relative: str) -> None:
    """The step said, in one line naming the file, that it did not read it."""
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert relative in lines[0] and "refusing to read" in lines[0], stderr


@pytest.mark.parametrize("case", HOSTILE)
def test_the_cache_key_step_reads_no_link_and_waits_on_no_pipe(tmp_path: Path,
                                                               case: str) -> None:
    project, relative = hostile_project(tmp_path, case)
    result = jar_step(project, "--cache-key")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"key={delta_set().folder_name}\n"
    skipped(result.stderr, relative)


@pytest.mark.parametrize("case", HOSTILE)
def test_the_fetch_step_reads_no_link_and_waits_on_no_pipe(tmp_path: Path, case: str) -> None:
    if delta_jars() is None or local_fs_jar() is None:
        pytest.skip("needs the jar cache `make jars` fills: the step would run Maven and javac")
    project, relative = hostile_project(tmp_path, case)
    result = jar_step(project, "--no-class-archive")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{delta_set().describe()}: "), result.stdout
    assert "kafka" not in result.stdout and "hadoop-aws" not in result.stdout
    skipped(result.stderr, relative)


def test_a_linked_pipeline_folder_is_not_followed_and_the_others_are_still_read(
        tmp_path: Path) -> None:
    """A pipeline folder linked elsewhere (here to a Kafka pipeline outside the checkout) is
    not listed, let alone read; a pipelines folder outside the project is not either; an
    ordinary Kafka pipeline beside a named pipe still asks for Kafka's jars."""
    outside = tmp_path / "outside" / "k"
    outside.mkdir(parents=True)
    (outside / "pipeline.yaml").write_text(KAFKA_PIPELINE)
    project = tmp_path / "checkout"
    (project / "pipelines").mkdir(parents=True)
    (project / "pipelines" / "k").symlink_to(outside, target_is_directory=True)
    result = jar_step(project, "--cache-key")
    assert (result.returncode, result.stdout) == (0, f"key={delta_set().folder_name}\n")
    skipped(result.stderr, "pipelines/k")

    (project / "reconcile.yaml").write_text("pipelines: ../outside\n")
    result = jar_step(project, "--cache-key")
    assert (result.returncode, result.stdout) == (0, f"key={delta_set().folder_name}\n")
    assert "goes up with '..'" in result.stderr and len(result.stderr.splitlines()) == 1

    (project / "reconcile.yaml").unlink()
    (project / "pipelines" / "a").mkdir()
    os.mkfifo(project / "pipelines" / "a" / "pipeline.yaml")
    (project / "pipelines" / "b").mkdir()
    (project / "pipelines" / "b" / "pipeline.yaml").write_text(KAFKA_PIPELINE)
    result = jar_step(project, "--cache-key")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"key={delta_set().folder_name}+{kafka_set().folder_name}\n"
    assert "pipelines/a/pipeline.yaml" in result.stderr
