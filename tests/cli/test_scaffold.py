"""`reconcile init` scaffolds a project that validates and applies as it is."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from tests.cli_helpers import query, reconcile
from tests.projects import EXAMPLES

PACKAGE_WORKFLOW = Path(__file__).resolve().parents[2] / "reconciler/cli/templates/workflow.yml"


def test_init_project_validates_applies_and_answers(spark: SparkSession, tmp_path: Path) -> None:
    project = tmp_path / "new"
    assert "created" in reconcile(tmp_path, "init", str(project))
    reconcile(project, "validate")
    assert "tests/totals.yaml::totals_count_big_events PASSED" in reconcile(project, "test")
    assert "deployed" in reconcile(project, "apply", "--auto-approve")
    reconcile(project, "execute", "-p", "events",
              "INSERT INTO events VALUES (1, 'click', 12.50), (2, 'click', 3), (3, 'buy', 40)")
    rows = query(project, "events", "SELECT * FROM totals_by_kind ORDER BY kind")
    assert [(r["kind"], r["events"], r["amount"]) for r in rows] == [("buy", 1, 40),
                                                                      ("click", 1, 12.5)]
    assert (project / ".github/workflows/reconcile.yml").read_text() == \
        PACKAGE_WORKFLOW.read_text()


def test_init_never_overwrites(tmp_path: Path) -> None:
    reconcile(tmp_path, "init")
    output = reconcile(tmp_path, "init", expect=1)
    assert "nothing to do" in output


def test_example_workflow_is_the_scaffolded_one() -> None:
    assert (EXAMPLES / "workflows/reconcile.yml").read_text() == PACKAGE_WORKFLOW.read_text()


def test_init_writes_nothing_through_a_symbolic_link(tmp_path: Path) -> None:
    """A checkout's links are never written through: a dangling `.gitignore` link counts as
    a file that exists, and a `pipelines` folder linked elsewhere refuses the whole init
    before anything is written."""
    outside, project = tmp_path / "outside", tmp_path / "project"
    outside.mkdir()
    project.mkdir()
    (project / ".gitignore").symlink_to(outside / "planted")
    (project / "pipelines").symlink_to(outside, target_is_directory=True)
    output = reconcile(project, "init", expect=1)
    assert "refusing to write a file that is reached through the symbolic link pipelines" \
        in output, output
    assert sorted(path.name for path in project.iterdir()) == [".gitignore", "pipelines"]
    assert list(outside.iterdir()) == []

    (project / "pipelines").unlink()
    reconcile(project, "init")
    assert (project / "pipelines/events/pipeline.yaml").is_file()
    assert list(outside.iterdir()) == [] and (project / ".gitignore").is_symlink()
