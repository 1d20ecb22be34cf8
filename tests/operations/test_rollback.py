"""`reconcile rollback` (issue 82): a view changed, stepped, rolled back to the serial before
the change. The views equal a fresh deployment of the old program over the same input,
no input is read again, and the policy and the history are held to. Real Delta tables
through the CLI on the shared Spark session."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.cli_helpers import manifest, query, reconcile
from tests.projects import GRADES_INPUT, feed_grades, write_files

pytestmark = pytest.mark.spark

PIPELINE = """
    name: p
    bootstrap_policy: {policy}
    connectors:
    """ + GRADES_INPUT + """
    """
OLD = """
    create table grades (student_id bigint, class string, grade int);
    create materialized view best as
    select student_id, max(grade) as top from grades group by student_id;
    create materialized view counts as select class, count(*) as n from grades group by class;
    """
NEW = OLD.replace("max(grade) as top", "min(grade) as top")
BEST = "SELECT student_id, top FROM best ORDER BY student_id"
COUNTS = "SELECT class, n FROM counts ORDER BY class"


def project_with(root: Path, program: str, policy: str = "allow") -> Path:
    return write_files(root, {"reconcile.yaml": "", "pipelines/p/program.sql": program,
                              "pipelines/p/pipeline.yaml": PIPELINE.format(policy=policy)})



FIRST = [(1, "algebra", 90), (1, "art", 70), (2, "algebra", 60)]
LATER = [(2, "art", 95), (3, "algebra", 50)]


def test_rollback_applies_the_earlier_program_from_the_current_state(
        spark: SparkSession, tmp_path: Path) -> None:
    project = project_with(tmp_path / "project", OLD)
    reconcile(project, "apply", "--auto-approve")
    feed_grades(project, "a.json", FIRST)
    reconcile(project, "run")
    before_change = manifest(project, "p")["serial"]
    (project / "pipelines/p/program.sql").write_text(NEW)
    assert "bootstrapped" in reconcile(project, "apply", "--auto-approve")
    feed_grades(project, "b.json", LATER)
    reconcile(project, "run")
    assert query(project, "p", BEST)[1] == {"student_id": 2, "top": 60}  # min now
    counts, rows = query(project, "p", COUNTS), manifest(project, "p")["relations"]
    grades_version = rows["grades"]["version"]
    checkpoint = manifest(project, "p")["connectors"]["grades_in"]

    rolled = reconcile(project, "rollback", "-p", "p", "--to", str(before_change),
                       "--auto-approve")
    assert "bootstrapped" in rolled and "recomputed best" in rolled, rolled
    after = manifest(project, "p")
    assert after["relations"]["grades"]["version"] == grades_version  # no input read again
    assert after["connectors"]["grades_in"] == checkpoint
    assert after["relations"]["counts"]["version"] == rows["counts"]["version"]  # unchanged

    fresh = project_with(tmp_path / "fresh", OLD)  # the old program over the same input
    reconcile(fresh, "apply", "--auto-approve")
    feed_grades(fresh, "a.json", FIRST + LATER)
    reconcile(fresh, "run")
    assert query(project, "p", BEST) == query(fresh, "p", BEST)
    assert query(project, "p", COUNTS) == query(fresh, "p", COUNTS) == counts
    assert "no new input" in reconcile(project, "run")
    # The files still hold the newer program: the next apply brings it back.
    assert "best" in reconcile(project, "plan")


def test_rollback_keeps_to_the_policy_and_the_history(spark: SparkSession,
                                                      tmp_path: Path) -> None:
    project = project_with(tmp_path, OLD, policy="await_approval")
    reconcile(project, "apply", "--auto-approve")
    (project / "pipelines/p/program.sql").write_text(NEW)
    reconcile(project, "apply", "--auto-approve")
    assert reconcile(project, "rollback", "-p", "p", "--to", "1", expect=1).strip() == (
        "error: rolling 'p' back to serial 1 bootstraps it: confirm on a terminal or add "
        "--auto-approve")
    missing = reconcile(project, "rollback", "-p", "p", "--to", "9", "--auto-approve",
                        expect=1)
    assert missing.strip() == ("error: pipeline 'p' has no serial 9 in its history "
                               "(serials 1 to 3)"), missing
    (project / "pipelines/p/pipeline.yaml").write_text(PIPELINE.format(policy="reject"))
    assert "reject" in reconcile(project, "rollback", "-p", "p", "--to", "1", "--auto-approve",
                                 expect=1)
    assert manifest(project, "p")["serial"] == 3
