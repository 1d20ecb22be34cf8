"""`reconcile test`: each view test of the project's pipelines, reported like pytest.

Kept apart from `cli.py` (which registers it): it needs the engine, so it imports
PySpark only when it runs, like every command that starts Spark.
"""

from __future__ import annotations

import time
from typing import Any

import click

from reconciler.errors import ReconcileError
from reconciler.spec.project import display
from reconciler.spec.view_tests import load_view_tests
from reconciler.spec.workspace import load_programs


@click.command("test")
@click.option("--pipeline", "-p", help="Only this pipeline's tests.")
@click.option("-k", "keyword", help="Only tests whose name contains this text.")
@click.pass_obj
def test_command(obj: Any, pipeline: str | None, keyword: str | None) -> None:
    """Run the view tests (pipelines/*/tests/*.yaml) on embedded Spark, with no state: each
    view on its fixture rows, and with a change, maintained and recomputed."""
    project, programs = load_programs(obj.project_dir, pipeline)
    selected = []
    for program in programs:
        directory = project.pipeline_dirs[program.pipeline]
        for test in load_view_tests(directory, program, display(directory)):
            if keyword is None or keyword in test.name:
                selected.append((program, test))
    if not selected:
        click.echo("no view tests found (pipelines/<name>/tests/*.yaml)")
        return
    from reconciler.engine.session import get_spark  # the engine: Spark
    from reconciler.engine.view_tests import run_view_test

    started = time.monotonic()
    spark = get_spark(project.settings.spark, log_level="WARN" if obj.debug else "ERROR")
    failed = 0
    for program, test in selected:
        outcome = run_view_test(spark, program.document(), test)
        click.echo(f"{test.file}::{test.name} {'PASSED' if outcome.passed else 'FAILED'}"
                   + ("" if outcome.passed else f" ({outcome.failure})"))
        for line in outcome.diff:
            click.echo(line)
        failed += not outcome.passed
    summary = f"{len(selected) - failed} passed, {failed} failed in " \
              f"{time.monotonic() - started:.1f}s"
    if failed:
        raise ReconcileError(summary)
    click.echo(summary)
