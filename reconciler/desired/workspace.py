"""Load a project and build the programs of the pipelines a command asks for."""

from __future__ import annotations

from pathlib import Path

from reconciler.desired.model.program import Program, build_program
from reconciler.desired.parsing.pipeline_sql import PipelineSource, load_pipeline
from reconciler.desired.settings.project import Project, display, load_project
from reconciler.support.errors import ReconcileError
from reconciler.support.locations import is_url, resolve_path


def select_pipelines(project: Project, pipeline: str | None) -> list[str]:
    """Names of the pipelines to act on: one when asked for, otherwise all of them."""
    if pipeline is None:
        if not project.pipeline_dirs:
            raise ReconcileError("no pipelines found (expected "
                                 f"{project.settings.pipelines}/<name>/pipeline.yaml)",
                                 file=display(project.root))
        return sorted(project.pipeline_dirs)
    if pipeline not in project.pipeline_dirs:
        known = ", ".join(sorted(project.pipeline_dirs)) or "none"
        raise ReconcileError(f"unknown pipeline '{pipeline}' (known: {known})")
    return [pipeline]


def load_source(project: Project, name: str) -> PipelineSource:
    """Load one pipeline; its `name` must equal its folder's, so names are unique."""
    source = load_pipeline(project.pipeline_dirs[name])
    if source.spec.name != name:
        raise ReconcileError(f"pipeline name '{source.spec.name}' must match its folder '{name}'",
                             file=source.spec_path, line=source.spec_lines.line_of(("name",)))
    return source


def load_programs(project_dir: Path, pipeline: str | None = None) -> tuple[Project, list[Program]]:
    """Validate and build every selected pipeline."""
    project = load_project(project_dir)
    programs = [build_program(load_source(project, name))
                for name in select_pipelines(project, pipeline)]
    return project, programs


def check_input_folders(program: Program, root: Path) -> None:
    """Refuse an input connector whose local folder does not exist, at its line in
    pipeline.yaml: a mistyped `path` would otherwise pass every check and read as `no new
    input` at each step, forever. Object stores are not looked at here (a `run` names
    what it could not find); `validate` and `plan` call this, `apply` does not, so a
    folder may still be made between a reviewed plan and the first step."""
    for name, connector in program.connectors.items():
        if connector.direction != "input":
            continue
        location = resolve_path(connector.path, root)
        if not is_url(location) and not Path(location).exists():
            raise connector.option_location("path").error(
                f"input connector '{name}': no folder at {connector.path}: create it or "
                "correct `path`")
