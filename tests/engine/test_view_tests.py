"""`reconcile test`: view tests on fixture rows, computed, recomputed and maintained.

The grades example's tests pass; a wrong expectation fails with a diff of the rows
missing and extra; a deliberately wrong maintenance rule (deletions dropped, injected
here) is caught by a test with a change, in its maintained form only; a test of an
unknown view is one line naming the file and line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
import yaml
from pyspark.sql import SparkSession

from reconciler.engine.delta.relation import DeltaRelation
from tests.cli_helpers import reconcile
from tests.fake_github import FakeGitHub
from tests.github_harness import Workspace, approve, only_sticky, plant_python
from tests.projects import copy_example, write_files

SQL = """
create table orders (id bigint not null, customer string, amount int);
create materialized view big_orders as select id, customer, amount from orders where amount > 10;
create materialized view per_customer as
  select customer, count(*) as n, sum(amount) as total from orders group by customer;
"""
CHANGE_TEST = """
name: a_big_order_cancelled
view: big_orders
given:
  orders:
    - {id: 1, customer: ann, amount: 50}
    - {id: 2, customer: bob, amount: 5}
expect:
  - {id: 1, customer: ann, amount: 50}
change:
  orders:
    delete: [{id: 1, customer: ann, amount: 50}]
    insert: [{id: 3, customer: bob, amount: 20}]
expect_after:
  - {id: 3, customer: bob, amount: 20}
"""


def shop(root: Path, tests: dict[str, str]) -> Path:
    return write_files(root, {
        "pipelines/shop/pipeline.yaml": "name: shop\n",
        "pipelines/shop/program.sql": SQL,
        **{f"pipelines/shop/tests/{name}": text for name, text in tests.items()}})


def test_the_examples_tests_pass(spark: SparkSession, tmp_path: Path) -> None:
    project = copy_example("grades", tmp_path)
    output = reconcile(project, "test")
    assert "averages.yaml::averages_per_student_and_class PASSED" in output
    assert "averages.yaml::a_late_grade_and_a_correction PASSED" in output
    assert output.strip().splitlines()[-1].startswith("2 passed, 0 failed in ")
    assert not (project / ".reconcile").exists(), "a test run touched the project's state"
    assert "1 passed" in reconcile(project, "test", "-k", "late")
    orders = copy_example("orders", tmp_path)
    assert "revenue.yaml::revenue_per_country PASSED" in reconcile(orders, "test")


def test_a_test_run_starts_a_short_lived_jvm(spark: SparkSession, tmp_path: Path) -> None:
    """`reconcile test`'s own session gets JVM flags for a JVM that lives seconds, and no
    Delta Lake or S3A (Delta's jars stay at the start of its class path, unused, where the
    class archive expects them); the test suite's session exists already, so the settings
    it is asked for are what is checked."""
    from reconciler.cli.view_tests import SHORT_LIVED_JVM
    from reconciler.engine.spark import session

    project = copy_example("grades", tmp_path)
    asked = []
    with patch.object(session, "get_spark",
                      lambda settings, **flags: asked.append((settings, flags)) or spark):
        assert "2 passed" in reconcile(project, "test")
    [(settings, flags)] = asked
    assert settings.conf["spark.driver.extraJavaOptions"] == SHORT_LIVED_JVM
    assert settings.master is None and settings.remote is None
    assert flags["delta"] is False  # delta-rs writes the scratch tables
    conf = session.spark_conf("local[2]", {}, delta=False)
    assert "spark.sql.extensions" not in conf and "spark.hadoop.fs.s3.impl" not in conf
    assert "hadoop-aws" not in conf.get("spark.driver.extraClassPath", "")


def test_a_wrong_expectation_fails_with_a_diff(spark: SparkSession, tmp_path: Path) -> None:
    project = shop(tmp_path, {"totals.yaml": """
view: per_customer
given:
  orders: [{id: 1, customer: ann, amount: 50}, {id: 2, customer: ann, amount: 5}]
expect:
  - {customer: ann, total: 50}
"""})
    output = reconcile(project, "test", expect=1)
    lines = output.strip().splitlines()
    assert lines[0].endswith("pipelines/shop/tests/totals.yaml::totals FAILED (computed "
                             "from the given rows)"), output
    assert lines[1:3] == ["  - missing  {customer: ann, total: 50}",
                          "  + extra    {customer: ann, total: 55}"], output
    assert lines[-1].startswith("error: 0 passed, 1 failed in ")


def test_a_wrong_maintenance_rule_is_caught_in_the_maintained_form(
        spark: SparkSession, tmp_path: Path) -> None:
    project = shop(tmp_path, {"cancel.yaml": CHANGE_TEST})
    assert "a_big_order_cancelled PASSED" in reconcile(project, "test")

    applied = DeltaRelation.apply_changes

    def deletions_dropped(self: DeltaRelation, inserts: Any, deletes: Any,
                          **options: Any) -> DeltaRelation:
        """A refresh's change (the only writes with `steady_source`) without its deletes."""
        return applied(self, inserts, None if options.get("steady_source") else deletes,
                       **options)

    with patch.object(DeltaRelation, "apply_changes", deletions_dropped):
        output = reconcile(project, "test", expect=1)
    assert "a_big_order_cancelled FAILED (maintained through the change" in output, output
    assert "  + extra    {id: 1, customer: ann, amount: 50}" in output, output


def test_checks_side_by_side_keep_their_own_rows(spark: SparkSession, tmp_path: Path) -> None:
    """Every check runs at once in a session of its own: tests of one view over different
    rows each see their own (checks sharing one session would replace each other's
    temporary views as they run), outcomes come in the file's order, and the caller's
    session keeps its settings."""
    tests = "tests:\n" + "".join(f"""
  - name: {name}
    view: per_customer
    given:
      orders: [{{id: 1, customer: {customer}, amount: {amount}}}]
    expect:
      - {{customer: {customer}, total: {expected}}}
    change:
      orders:
        insert: [{{id: 2, customer: {customer}, amount: 1}}]
    expect_after:
      - {{customer: {customer}, total: {expected + 1}}}
""" for name, customer, amount, expected in [("ann_alone", "ann", 10, 10),
                                             ("bob_alone", "bob", 20, 20),
                                             ("cy_wrong", "cy", 30, 31),
                                             ("dan_alone", "dan", 40, 40)])
    project = shop(tmp_path, {"side.yaml": tests})
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    lines = reconcile(project, "test", expect=1).strip().splitlines()
    assert [line.rsplit("::", 1)[-1] for line in lines if "::" in line] == [
        "ann_alone PASSED", "bob_alone PASSED",
        "cy_wrong FAILED (computed from the given rows)", "dan_alone PASSED"], lines
    assert "  - missing  {customer: cy, total: 31}" in lines
    assert "  + extra    {customer: cy, total: 30}" in lines
    assert spark.conf.get("spark.sql.shuffle.partitions") == partitions


def test_a_test_of_an_unknown_view_is_one_line(spark: SparkSession, tmp_path: Path) -> None:
    project = shop(tmp_path, {"bad.yaml": "tests:\n  - view: nope\n    expect: []\n"})
    output = reconcile(project, "test", expect=1)
    assert output.startswith("error: ") and output.count("\n") == 1, output
    assert output.endswith("pipelines/shop/tests/bad.yaml:2: test of an unknown view "
                           "'nope'\n"), output


@pytest.mark.parametrize("row, problem", [
    ("{customer: ann, amount: 50}", "table 'orders' needs a value for its NOT NULL column(s) id"),
    ("{id: 4, client: ann}", "unknown column(s) client of table 'orders'; its columns are "
                             "id, customer, amount"),
])
def test_a_bad_fixture_row_is_one_line(tmp_path: Path, row: str,
                                                           problem: str) -> None:
    """Rows are checked against the table when the file loads: one line naming the file
    and the line of the rows' key, before any Spark work."""
    bad = CHANGE_TEST.replace("insert: [{id: 3, customer: bob, amount: 20}]",
                              f"insert:\n      - {row}")
    project = shop(tmp_path, {"bad.yaml": bad})
    with patch("reconciler.engine.spark.session.get_spark", side_effect=AssertionError("Spark")):
        output = reconcile(project, "test", expect=1)
    assert output.startswith("error: ") and output.count("\n") == 1, output
    assert output.endswith(f"pipelines/shop/tests/bad.yaml:13: {problem}\n"), output


def test_tests_are_not_part_of_the_pipeline(tmp_path: Path) -> None:
    """Adding or editing a test changes no fingerprint: nothing to apply."""
    project = shop(tmp_path, {})
    before = json.loads(reconcile(project, "plan", "--json"))["pipelines"][0]
    (project / "pipelines/shop/tests").mkdir()
    (project / "pipelines/shop/tests/cancel.yaml").write_text(CHANGE_TEST)
    after = json.loads(reconcile(project, "plan", "--json"))["pipelines"][0]
    assert after["desired_fingerprint"] == before["desired_fingerprint"]


@pytest.mark.spark
def test_the_action_shows_view_tests_and_an_apply_waits_for_them(
        workspace: Workspace, github: FakeGitHub, tmp_path: Path) -> None:
    """In the pull request: the plan comment lists each test of the changed pipeline, and
    `/reconcile apply` is refused while one fails (the trusted branch requires them); fixed,
    the same flow applies.

    The pull request also commits Python where a child process might import it (issue 51:
    a `reconciler/` package whose `__main__` prints a forged passing result, `pyspark/`,
    `sitecustomize.py`, `usercustomize.py`, a `.pth`), in the project, its pipeline folder
    and the checkout's root: the tests shown are the real ones, and none of it ever runs,
    on the plan or on the privileged apply."""
    canary = tmp_path / "planted-code-ran"
    for folder in (workspace.project, workspace.root, workspace.project / "pipelines/grades"):
        plant_python(folder, canary)
    settings_file = workspace.project / "reconcile.yaml"
    settings = yaml.safe_load(settings_file.read_text())
    settings["tests"] = {"required": True}
    settings_file.write_text(yaml.safe_dump(settings))
    workspace.base_sha = workspace.commit("require view tests")
    tests_file = workspace.project / "pipelines/grades/tests/averages.yaml"
    right = tests_file.read_text()
    tests_file.write_text(right.replace("class_avg: 85", "class_avg: 86"))
    run = workspace.pull_request("opened", workspace.commit("a wrong expectation"), tests="on")
    assert run.exit_code == 0, run.log
    body = only_sticky(github)["body"]
    assert "View tests of <code>grades</code>: 1 passed, 1 failed" in body
    assert "<code>averages_per_student_and_class</code> | <code>pipelines/grades/tests/" \
           "averages.yaml</code> | **failed**: computed from the given rows" in body

    assert "forged" not in body
    assert not canary.exists(), canary.read_text()

    refused, _ = approve(workspace, "alice")
    assert refused.exit_code == 1
    assert refused.outputs["result"] == "refused"
    assert refused.outputs["failure-reason"].startswith(
        "view tests fail: grades: averages_per_student_and_class")
    assert workspace.manifest() is None  # nothing applied

    tests_file.write_text(right)  # the plan without tests this time: the apply runs them
    workspace.pull_request("synchronize", workspace.commit("the right average"))
    assert "View tests of" not in only_sticky(github)["body"]
    applied, _ = approve(workspace, "alice")
    assert applied.outputs["result"] == "applied", applied.log
    assert workspace.manifest() is not None
    assert not canary.exists(), canary.read_text()


def test_the_actions_view_tests_are_bounded_by_the_trusted_settings(
        workspace: Workspace, github: FakeGitHub) -> None:
    """`tests.timeout_seconds` of the trusted branch bounds the child that runs a pull
    request's view tests (its SQL, unreviewed): past it the child is stopped, the comment
    says the tests could not run and why, and the plan is still posted. The pull request's
    own, longer bound is not the one used."""
    settings_file = workspace.project / "reconcile.yaml"
    settings = yaml.safe_load(settings_file.read_text())
    settings["tests"] = {"required": False, "timeout_seconds": 1}
    settings_file.write_text(yaml.safe_dump(settings))
    workspace.base_sha = workspace.commit("a tight bound on view tests")
    settings["tests"]["timeout_seconds"] = 3600
    settings_file.write_text(yaml.safe_dump(settings))
    tests_file = workspace.project / "pipelines/grades/tests/averages.yaml"
    tests_file.write_text(tests_file.read_text().replace("class_avg: 85", "class_avg: 86"))
    run = workspace.pull_request("opened", workspace.commit("a longer bound"), tests="on")
    assert run.exit_code == 0, run.log
    body = only_sticky(github)["body"]
    assert ("View tests of `grades` could not run:** the view tests took over 1 s "
            "(tests.timeout_seconds in reconcile.yaml)") in body
