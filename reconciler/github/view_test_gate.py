"""The view tests of a pull request's changed pipelines, run apart from the workflow.

`reconcile test --json` runs in a child process (`child_process.run_reconciler`:
the installed package in isolated mode, from an empty folder, with
`helper_environment()`): a test runs the pull request's SQL on fixture rows, and
that process imports nothing from the checkout, and its JVM gets none of the
workflow's secrets (no AWS keys, no GitHub token) and no state to read. Its
result goes into the plan (`pipelines[].tests`, left out of `plan_id`: it
describes the checkout, not what an apply does) and the sticky comment; an apply
refuses while a test of a pipeline it applies fails, unless the trusted
`reconcile.yaml` says `tests: {required: false}`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from reconciler.github.workflow_commands import log
from reconciler.plan.artifact import Plan
from reconciler.plan.view_test_report import ViewTestReport, ViewTestResult
from reconciler.support.child_process import run_reconciler


def run_view_tests(project_dir: Path, pipeline: str, timeout: float) -> ViewTestReport:
    """One pipeline's test results, or why they could not run (a test file that does not
    load, a JVM that failed, over `timeout` seconds: the trusted `tests.timeout_seconds`,
    since they run a pull request's SQL; the child is killed then, and its JVM exits with
    it)."""
    args = ["-C", str(project_dir.resolve()), "test", "-p", pipeline, "--json"]
    try:
        done = run_reconciler(args, timeout=timeout)
    except subprocess.TimeoutExpired:
        return ViewTestReport.could_not_run(
            f"the view tests took over {timeout:.0f} s (tests.timeout_seconds in reconcile.yaml)")
    except OSError as error:
        return ViewTestReport.could_not_run(f"cannot start the view tests: {error.strerror}")
    try:  # stdout is the command's one JSON object (`CliContext.emit`), an error's too
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        report = {}
    if "tests" not in report:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        return ViewTestReport.could_not_run(str(report.get("error") or (
            lines[-1].strip() if lines else f"exit code {done.returncode}"))[:300])
    tests = ViewTestReport(tuple(
        ViewTestResult(test["name"], _in_project(test["file"], project_dir), test["passed"],
                       test["failure"]) for test in report["tests"]), format=report["format"])
    log(f"view tests of {pipeline}: {tests.passed} passed, {tests.failed} failed")
    return tests


def _in_project(file: str, project_dir: Path) -> str:
    """A test file as the comment shows it: relative to the project (the child runs in a
    folder of its own, so it names files by absolute path)."""
    try:
        return str(Path(file).relative_to(project_dir.resolve()))
    except ValueError:
        return file


def add_view_tests(plan: Plan, project_dir: Path, *, timeout: float,
                   only: list[str] | None = None) -> Plan:
    """`plan` with the tests of every pipeline it changes (of `only` these, when given)
    attached, each pipeline's run within `timeout` seconds. A pull request that changes
    only a test file changes no pipeline: its tests run with the next change that does,
    and with `reconcile test`."""
    return plan.with_view_tests({
        name: run_view_tests(project_dir, name, timeout)
        for name in plan.changed if only is None or name in only})


def failing_tests(plan: Plan, selected: list[str]) -> list[str]:
    """`pipeline: test` for each test of the `selected` pipelines that failed or did not run."""
    found = []
    for pipeline in plan.pipelines:
        tests = pipeline.tests
        if pipeline.name not in selected or not tests:
            continue
        if tests.error is not None:  # its text may quote the pull request's files: logged only
            log(f"view tests of {pipeline.name} could not run: {tests.error}")
            found.append(f"{pipeline.name}: the tests could not run")
            continue
        found.extend(f"{pipeline.name}: {test.name}" for test in tests.results
                     if not test.passed)
    return found
