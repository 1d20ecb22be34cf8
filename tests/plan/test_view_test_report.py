"""View tests as a plan carries them (plan/view_test_report.py): typed from the Action's
child to the comment and the apply's gate, JSON only in the saved plan."""

from __future__ import annotations

import json
from pathlib import Path

from reconciler.github.view_test_gate import failing_tests
from reconciler.plan.artifact import load_plan_file
from reconciler.plan.markdown import render_markdown
from reconciler.plan.view_test_report import ViewTestReport, ViewTestResult
from tests.cli_helpers import grades_plan_file

REPORT = ViewTestReport((
    ViewTestResult("averages", "pipelines/grades/tests/averages.yaml", True, None),
    ViewTestResult("enriched | <b>", "pipelines/grades/tests/enriched.yaml", False,
                   "computed from the given rows: 1 row missing"),
), format=1)


def test_a_report_is_written_and_read_back_as_it_was(tmp_path: Path) -> None:
    out = grades_plan_file(tmp_path)
    plan = load_plan_file(out)
    for report in (REPORT, ViewTestReport.could_not_run("the view tests took over 1 s")):
        tested = plan.with_view_tests({"grades": report})
        assert tested.plan_id == plan.plan_id  # they describe the checkout, not the apply
        out.write_text(json.dumps(tested.document()))
        again = load_plan_file(out)
        assert again.pipelines[0].tests == report
        assert again.document() == tested.document()
    assert REPORT.document()["results"][1] == {
        "name": "enriched | <b>", "passed": False,
        "failure": "computed from the given rows: 1 row missing",
        "file": "pipelines/grades/tests/enriched.yaml"}
    assert (REPORT.passed, REPORT.failed) == (1, 1)


def test_the_comment_and_the_gate_read_the_report(tmp_path: Path) -> None:
    plan = load_plan_file(grades_plan_file(tmp_path))
    tested = plan.with_view_tests({"grades": REPORT})
    comment = render_markdown(tested)
    assert "View tests of <code>grades</code>: 1 passed, 1 failed" in comment
    assert "<code>enriched \\| &lt;b&gt;</code>" in comment  # a name is inert text
    assert failing_tests(tested, ["grades"]) == ["grades: enriched | <b>"]
    assert failing_tests(tested, ["other"]) == []
    broken = plan.with_view_tests({"grades": ViewTestReport.could_not_run("no JVM")})
    assert "View tests of `grades` could not run:** no JVM" in render_markdown(broken)
    assert failing_tests(broken, ["grades"]) == ["grades: the tests could not run"]
    assert "View tests of" not in render_markdown(plan)
