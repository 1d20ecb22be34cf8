"""`reconcile test`: each view test of the project's pipelines, reported like pytest.

Kept apart from `cli.py` (which registers it): it needs the engine, so it imports
PySpark only when it runs, like every command that starts Spark.

Tests run on embedded Spark (`local[2]`) whatever `reconcile.yaml` says about where
Spark runs: they need no state and no backend, and their maintained check writes a
scratch pipeline into a local folder no cluster could read. `--json` prints one
document (`TESTS_FORMAT`) that the GitHub Action reads from a child process.
"""

from __future__ import annotations

import time

import click

from reconciler.cli.context import CliContext, pass_cli
from reconciler.cli.options import json_flag
from reconciler.support.errors import ReconcileError

SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""The JVM flags of a test run's session: it lives for seconds and runs fixture-sized
jobs, so Java's quick compiler alone and the serial collector start it sooner and leave
more of a small machine's cores to Spark (`make bench-view-tests` on 2 cores: 17.6 s for
the grades example's tests and 20.3 s for the orders example's, against 20.5 s and 23.2 s
with Java's defaults). They apply only where this command starts the JVM; a pipeline's
long-lived session keeps Java's defaults."""


@click.command("test")
@click.option("--pipeline", "-p", help="Only this pipeline's tests.")
@click.option("-k", "keyword", help="Only tests whose name contains this text.")
@json_flag("format and tests; exit 1 when a test fails")
@pass_cli
def test_command(obj: CliContext, pipeline: str | None, keyword: str | None) -> None:
    """Run the view tests (pipelines/*/tests/*.yaml) on embedded Spark, with no state: each
    view on its fixture rows, and with a change, maintained and recomputed."""
    from reconciler.desired.settings.project import display  # loaded when run, not for `--help`
    from reconciler.desired.view_test_files import load_view_tests
    from reconciler.desired.workspace import load_programs

    project, programs = load_programs(obj.project_dir, pipeline)
    selected = []
    for program in programs:
        directory = project.pipeline_dirs[program.pipeline]
        for test in load_view_tests(directory, program, display(directory)):
            if keyword is None or keyword in test.name:
                selected.append((program, test))
    if not selected:
        if obj.as_json:
            obj.emit({"format": TESTS_FORMAT, "tests": []})
        else:
            click.echo("no view tests found (pipelines/<name>/tests/*.yaml)")
        return
    from reconciler.engine.spark.session import get_spark  # the engine: Spark
    from reconciler.engine.view_tests import run_view_tests

    started = time.monotonic()
    # reconcile.yaml may not pass JVM options (`desired.settings.project`): these are the only ones
    conf = {**project.settings.spark.conf, "spark.driver.extraJavaOptions": SHORT_LIVED_JVM}
    local = project.settings.spark.model_copy(update={"master": None, "remote": None,
                                                      "conf": conf})
    # Tests write with delta-rs into a scratch folder: no Delta Lake in the session and no
    # S3A jars (the AWS SDK alone is 686 MB: a slower start and slower class lookups)
    spark = get_spark(local, master="local[2]", log_level="WARN" if obj.debug else "ERROR",
                      delta=False)
    results = []
    outcomes = run_view_tests(spark, [(program.document(), test) for program, test in selected])
    for (program, test), outcome in zip(selected, outcomes, strict=True):
        results.append({"pipeline": program.pipeline, "file": test.file, "name": test.name,
                        "passed": outcome.passed, "failure": outcome.failure,
                        "diff": list(outcome.diff)})
        if not obj.as_json:
            click.echo(f"{test.file}::{test.name} {'PASSED' if outcome.passed else 'FAILED'}"
                       + ("" if outcome.passed else f" ({outcome.failure})"))
            for line in outcome.diff:
                click.echo(line)
    failed = sum(not result["passed"] for result in results)
    summary = f"{len(selected) - failed} passed, {failed} failed in " \
              f"{time.monotonic() - started:.1f}s"
    if obj.as_json:
        obj.emit({"format": TESTS_FORMAT, "tests": results})
        if failed:
            raise SystemExit(1)
        return
    if failed:
        raise ReconcileError(summary)
    click.echo(summary)


TESTS_FORMAT = 1
"""`reconcile test --json`: {"format": 1, "tests": [{"pipeline", "file", "name", "passed",
"failure", "diff": [lines]}]}."""
