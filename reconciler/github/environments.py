"""A pull request's environment in the Action: built on each push, removed when it closes.

When the trusted branch's `reconcile.yaml` enables `environments:`, every plan of a pull
request from this repository builds (or updates) environment `pr_<number>` of each pipeline
the plan changes (`operations.environments`), with the trusted settings the apply would use,
and the plan comment says where it is, what it holds and at which production serial. A fork's
pull request never gets one: its SQL does not run here with the workflow's access to state.
Closing the pull request (`pull_request: closed`, merged or not) destroys them.

A build that fails or is refused is said in the comment, one line per pipeline; the plan
stands, as with the data preview.
"""

from __future__ import annotations

from typing import Any

from reconciler.desired.settings.environments import pull_request_environment
from reconciler.desired.settings.project import Project
from reconciler.github.trusted import Trusted
from reconciler.github.workflow_commands import annotate, log
from reconciler.plan.artifact import Plan
from reconciler.support.errors import public_message


def same_repository(pull: dict[str, Any]) -> bool:
    """Whether the pull request's head is a branch of this repository (not a fork's)."""
    head = (pull.get("head") or {}).get("repo") or {}
    base = (pull.get("base") or {}).get("repo") or {}
    return bool(head.get("full_name")) and head.get("full_name") == base.get("full_name")


def environment_section(plan: Plan, trusted: Trusted, pull: dict[str, Any]) -> str:
    """Build pull request `pull`'s environments; the plan comment's section about them ("" when
    environments are off, or nothing changed)."""
    settings = trusted.project.settings.environments
    if settings is None or not plan.changed or pull.get("number") is None:
        return ""
    name = pull_request_environment(int(pull["number"]))
    if not same_repository(pull):
        log("environment skipped: the pull request comes from a fork")
        return ("\n### Environment\n\nNo environment: this pull request comes from a fork, "
                "whose SQL does not run with this repository's state.\n")
    from reconciler.operations.engine import Engine  # Spark: only with environments on
    from reconciler.operations.environments import build_environment
    from reconciler.state.reader import open_backend

    backend, engine = open_backend(trusted.project), Engine(trusted.project)
    lines = []
    for program in trusted.programs:
        if program.pipeline not in plan.changed:
            continue
        try:
            built = build_environment(trusted.project, backend, program, name, engine)
        except Exception as error:  # the plan is still right; say why there is none
            lines.append(f"- `{program.pipeline}`: not built: {public_message(error)}")
            continue
        environment = built.environment
        held = ", ".join(f"`{relation}`" for relation in sorted(environment.relations))
        computed = ", ".join(f"`{view}`" for view in built.computed) or "nothing new"
        where = (f"`{environment.database}`" if built.published
                 else f"`{environment.database}` (not published: the Spark catalog is in memory)")
        lines.append(f"- `{program.pipeline}`: {where} at production serial "
                     f"{environment.base_serial}; holds {held or 'no change of its own'} "
                     f"(this push computed {computed}); every other relation is production's "
                     f"at that serial")
    return (f"\n### Environment `{name}`\n\nQuery the changed views by name, e.g. "
            f"`SELECT * FROM {settings.database(name)}.<view>`:\n\n" + "\n".join(lines) + "\n")


def destroy_pull_request_environments(project: Project, number: int) -> list[str]:
    """Destroy environment `pr_<number>` of every pipeline that has one; the pipelines'
    names."""
    if project.settings.environments is None:
        return []
    from reconciler.operations.engine import Engine
    from reconciler.operations.environments import destroy_environment
    from reconciler.state.reader import open_backend

    name = pull_request_environment(number)
    backend, engine, gone = open_backend(project), Engine(project), []
    for pipeline in backend.list_pipelines():
        if name not in backend.read_environments(pipeline):
            continue
        try:
            destroy_environment(project, backend, pipeline, name, engine)
            gone.append(pipeline)
        except Exception as error:
            annotate("warning", f"{pipeline}: environment {name} not removed: "
                                f"{public_message(error)}")
    return gone

