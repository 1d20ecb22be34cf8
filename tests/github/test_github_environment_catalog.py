"""Issue 81's story end to end, through `reconcile github` on a Derby metastore: the fake
GitHub REST server, moto's S3 for state, and each run of the Action a process of its own (one
JVM holds Derby's metastore at a time), as on a runner with a kept catalog.

A pull request modifies one view and adds one. Its plan builds `pr_7`, and a separate
reader's queries by name return the modified view's new rows and production's unchanged
ones, while production's manifest stays as it was. A writer's `/reconcile apply` promotes
the environment, and the promoted views equal their queries from scratch after a step.
Closing the pull request removes the environment's files and catalog database."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.test_environment_catalog import steps
from tests.engine.test_publish import metastore  # noqa: F401 (a fixture)
from tests.fake_github import FakeGitHub
from tests.github.test_github_environments import enable_environments
from tests.github_harness import PR, Workspace, approve, only_sticky
from tests.projects import SEED_GRADES, SEED_STUDENTS, apply_seed_modification

# Five JVMs on Derby (about 5 minutes on 2 cores): nightly. `make test` holds its parts, the
# Action's flow on the shared session (`test_github_environments`) and the catalog on Derby
# through the CLI (`tests/engine/test_environment_catalog.py`).
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.nightly]

ENRICHED = "SELECT student_name, class, class_avg FROM {} ORDER BY student_name, class"
ENRICHED_ORACLE = ("SELECT s.name, g.class, avg(g.grade) FROM {0}.grades g JOIN {0}.students s "
                   "ON g.student_id = s.id WHERE class_date >= DATE '2025-09-01' AND "
                   "class_date <= DATE '2026-06-10' GROUP BY s.name, g.class")
ALL_COURSES = ("SELECT student_id, round(avg(class_avg), 4) FROM (SELECT student_id, class, "
               "avg(grade) AS class_avg FROM {}.grades WHERE class_date >= DATE '2025-09-01' "
               "AND class_date <= DATE '2026-06-10' GROUP BY student_id, class) "
               "GROUP BY student_id")


def test_a_reviewer_queries_the_environment_and_the_apply_promotes_it(
        workspace: Workspace, github: FakeGitHub, s3_endpoint: str,
        metastore: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    env = {**metastore, "AWS_ENDPOINT_URL": s3_endpoint}
    enable_environments(workspace)
    spec = workspace.project / "pipelines/grades/pipeline.yaml"
    spec.write_text(spec.read_text() + "publish: {database: analytics}\n")
    workspace.base_sha = workspace.commit("published")
    project = str(workspace.project)
    deployed = steps(env, ("cli", ["-C", project, "apply", "--auto-approve"]),
                     ("cli", ["-C", project, "execute", "-p", "grades", SEED_STUDENTS]),
                     ("cli", ["-C", project, "execute", "-p", "grades", SEED_GRADES]))
    assert [result["exit"] for result in deployed] == [0, 0, 0], deployed
    production = workspace.manifest()
    assert production is not None

    apply_seed_modification(workspace.project)  # avg_grade modified, a view added
    workspace.commit("end date moved, a new view")
    workspace.child_env = env
    run = workspace.pull_request("opened")
    assert run.exit_code == 0, run.log
    assert "`review_pr_7` at production serial" in only_sticky(github)["body"], run.log
    assert workspace.manifest() == production

    tables, enriched, enriched_oracle, before, all_courses, oracle, students = steps(
        env, ("sql", "SHOW TABLES IN review_pr_7"),
        ("sql", ENRICHED.format("review_pr_7.avg_grade_enriched")),
        ("sql", ENRICHED_ORACLE.format("review_pr_7")),
        ("sql", ENRICHED.format("analytics.avg_grade_enriched")),
        ("sql", "SELECT student_id, round(avg, 4) FROM review_pr_7.avg_grade_all_courses"),
        ("sql", ALL_COURSES.format("review_pr_7")), ("sql", "SELECT * FROM review_pr_7.students"))
    assert sorted(row[1] for row in tables) == ["avg_grade_all_courses", "avg_grade_enriched",
                                                "grades", "students"]
    assert enriched == enriched_oracle and enriched != before  # the later end date's rows
    assert all_courses == oracle and all_courses
    assert students == [["1", "Alice"], ["2", "Bob"]]  # production's, as pinned

    run, _ = approve(workspace, "alice")
    assert run.exit_code == 0, run.log
    assert "promoted from its environment" in github.comments_on(PR)[-1]["body"]
    workspace.child_env = None
    step = steps(env, ("cli", ["-C", project, "execute", "-p", "grades",
                               "INSERT INTO grades VALUES (3, 'art', 70, '2025-10-01')"]),
                 ("sql", "SELECT student_id, round(avg, 4) FROM analytics.avg_grade_all_courses"),
                 ("sql", ALL_COURSES.format("analytics")))
    assert step[0]["exit"] == 0 and step[1] == step[2], step

    workspace.child_env = env
    run = workspace.pull_request("closed")
    assert run.exit_code == 0 and run.outputs["result"] == "environments-removed", run.log
    [databases] = steps(env, ("sql", "SHOW DATABASES"))
    assert ["review_pr_7"] not in databases and ["analytics"] in databases
    assert not (workspace.project / "environments" / "pr_7").exists()
