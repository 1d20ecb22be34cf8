"""Plan the selected pipelines of a project against their committed state (no JVM)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconciler.plan.document import plan_document, plan_pipeline
from reconciler.spec.connector_options import check_file_cleanup
from reconciler.spec.program import Program
from reconciler.spec.project import Project, settings_summary
from reconciler.spec.workspace import load_programs
from reconciler.state import open_backend, pipeline_layout, read_manifest


def compute_plan(project_dir: Path, pipeline: str | None,
                 backend_url: str | None) -> dict[str, Any]:
    """The plan artifact for every selected pipeline, each against its manifest."""
    project, programs = load_programs(project_dir, pipeline)
    return plan_project(project, programs, backend_url)


def plan_project(project: Project, programs: list[Program], backend_url: str | None = None,
                 notes: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
    """The plan artifact for `programs` under `project`'s settings (which the GitHub Action
    replaces with trusted ones, adding `notes` per pipeline on what it replaced). Options
    that delete or move input files are checked here, against those final settings."""
    for program in programs:
        check_file_cleanup(program, project.settings.allow_file_cleanup)
    backend = open_backend(project, backend_url)
    settings = settings_summary(project.settings)
    plans = []
    for program in programs:
        manifest, etag = read_manifest(backend, program.pipeline,
                                       pipeline_layout(project, program.pipeline))
        plans.append(plan_pipeline(program, manifest, etag, settings,
                                   (notes or {}).get(program.pipeline, ())))
    return plan_document(plans, project.root)
