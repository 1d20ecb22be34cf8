"""`reconcile rollback`: apply the program an earlier serial committed, from the state the
pipeline holds now.

The history keeps every committed manifest (`StateBackend.read_history`), each with its
program: its SQL and connectors. Rolling back to serial N builds that program again, through
the checks a pull request's goes through (`desired.model.committed.earlier_program`), and applies
it exactly as `apply` would apply those files: the same plan (which views are recomputed,
which connectors reset), the same `bootstrap_policy`, a bootstrap from the current state. No
input is read again: the tables keep every row that arrived since serial N, and each changed
view is computed from them; output connectors receive the net change, as a bootstrap sends.

The project's files still hold the newer program, so the next `apply` brings it back:
revert the commit in git too (as after a Terraform rollback by re-applying an old config).
"""

from __future__ import annotations

from reconciler.desired.model.committed import earlier_program
from reconciler.desired.model.program import Program
from reconciler.desired.settings.project import Project, load_pipeline_spec
from reconciler.support.errors import ReconcileError
from state_backends import StateBackend, StateBackendError


def program_at(project: Project, backend: StateBackend, pipeline: str, serial: int) -> Program:
    """The program `pipeline` committed at `serial`, ready to apply (one line naming what is
    missing when it cannot be)."""
    folder = project.pipeline_dirs.get(pipeline)
    if folder is None:
        raise ReconcileError(f"pipeline '{pipeline}' is not in the project: only a pipeline "
                             "the project has can be rolled back")
    try:
        document = backend.read_history(pipeline, serial)
    except StateBackendError:
        known = backend.list_history(pipeline)
        raise ReconcileError(f"pipeline '{pipeline}' has no serial {serial} in its history "
                             f"({_serials(known)})") from None
    program = document.get("program")
    if not isinstance(program, dict):
        raise ReconcileError(f"pipeline '{pipeline}': serial {serial} holds no program")
    where = f"{backend.url}/{pipeline}/history/{serial}.json"
    spec, _, _ = load_pipeline_spec(folder)
    return earlier_program(pipeline, program, where, spec)


def _serials(known: list[int]) -> str:
    if not known:
        return "it has none"
    return f"serials {known[0]} to {known[-1]}" if len(known) > 1 else f"serial {known[0]}"
