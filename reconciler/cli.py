"""The `reconcile` command line (click).

Every command catches the product's own errors and prints them as one line on
stderr with exit code 1; `--debug` shows the traceback instead.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from reconciler import __version__
from reconciler.errors import ReconcileError
from reconciler.plan import plan_document, plan_pipeline, verify_plan_id
from reconciler.render_markdown import render_markdown
from reconciler.render_terminal import render_plan
from reconciler.state import open_backend, read_manifest
from reconciler.workspace import load_programs
from state_backends import StateBackendError


@dataclass
class CliContext:
    project_dir: Path
    debug: bool


pass_cli = click.make_pass_decorator(CliContext)


class ReconcileGroup(click.Group):
    """A click group that turns product errors into one line and exit code 1."""

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except (ReconcileError, StateBackendError) as error:
            if ctx.params.get("debug"):
                raise
            click.echo(f"error: {error}", err=True)
            sys.exit(1)


@click.group(cls=ReconcileGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "--project-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("."), show_default=True, help="Project folder (holds reconcile.yaml).")
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.version_option(__version__, prog_name="reconcile")
@click.pass_context
def cli(ctx: click.Context, project_dir: Path, debug: bool) -> None:
    """Plan and apply changes to continuous Spark SQL pipelines, bootstrapping only what changed."""
    ctx.obj = CliContext(project_dir=project_dir, debug=debug)


@cli.command()
@click.option("--pipeline", "-p", help="Only this pipeline.")
@pass_cli
def validate(obj: CliContext, pipeline: str | None) -> None:
    """Parse and check every pipeline; print a short summary of each."""
    _, programs = load_programs(obj.project_dir, pipeline)
    for program in programs:
        inputs = sum(1 for c in program.connectors.values() if c.direction == "input")
        outputs = len(program.connectors) - inputs
        click.echo(f"{program.pipeline}: {len(program.tables)} tables, {len(program.views)} views, "
                   f"{inputs} input and {outputs} output connectors: ok")


def compute_plan(project_dir: Path, pipeline: str | None,
                 backend_url: str | None) -> dict[str, Any]:
    """Plan every selected pipeline against its committed manifest; starts no JVM."""
    project, programs = load_programs(project_dir, pipeline)
    backend = open_backend(project, backend_url)
    plans = []
    for program in programs:
        manifest, etag = read_manifest(backend, program.pipeline)
        plans.append(plan_pipeline(program, manifest, etag))
    return plan_document(plans, project.root)


def _console() -> Console:
    return Console(highlight=False, soft_wrap=True)


@cli.command()
@click.option("--pipeline", "-p", help="Only this pipeline.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the plan artifact (JSON) here, for `apply PLAN` or review.")
@click.option("--markdown", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the plan as Markdown (for PR comments) here.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan artifact as JSON.")
@click.option("--detailed-exitcode", is_flag=True,
              help="Exit 2 when there are changes, 0 when there are none.")
@click.option("--backend", "backend_url", help="State backend URL (overrides reconcile.yaml).")
@pass_cli
def plan(obj: CliContext, pipeline: str | None, out: Path | None, markdown: Path | None,
         as_json: bool, detailed_exitcode: bool, backend_url: str | None) -> None:
    """Show what apply would change: added, modified and removed tables, views, connectors."""
    document = compute_plan(obj.project_dir, pipeline, backend_url)
    if out:
        out.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if markdown:
        markdown.write_text(render_markdown(document), encoding="utf-8")
    if as_json:
        click.echo(json.dumps(document, indent=2, sort_keys=True))
    else:
        render_plan(document, _console())
    if detailed_exitcode and any(p["has_changes"] for p in document["pipelines"]):
        sys.exit(2)


@cli.command()
@click.argument("plan_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "output_format", type=click.Choice(["terminal", "markdown", "json"]),
              default="terminal", show_default=True)
def show(plan_file: Path, output_format: str) -> None:
    """Render a saved plan artifact."""
    document = load_plan_file(plan_file)
    if output_format == "markdown":
        click.echo(render_markdown(document), nl=False)
    elif output_format == "json":
        click.echo(json.dumps(document, indent=2, sort_keys=True))
    else:
        render_plan(document, _console())


def load_plan_file(path: Path) -> dict[str, Any]:
    """Read a plan artifact and check that its plan_id still matches its body."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ReconcileError(f"not a readable plan file: {error}", file=path) from None
    if not isinstance(document, dict):
        raise ReconcileError("not a plan file: expected a JSON object", file=path)
    verify_plan_id(document, str(path))
    return document


def main() -> None:
    cli(prog_name="reconcile")
