"""A failed step, kept where `reconcile status` finds it.

A step that fails commits nothing, so the manifest cannot say so: after `run` failed on a
malformed file, `status` said `Running` with nothing waiting. Each `run` (one-shot or
continuous) therefore records its pipeline's last failure in the state backend beside the
manifest (`StateBackend.write_step_failure`): when, the one-line public reason, and the
connectors a bad input holds with their errors, and, for a failure every later step
repeats (a FAIL UPDATE expectation's rows), what lets the pipeline go on (`stuck_until`).
A step that succeeds clears it (one read, and a write only when there was something to
clear). A pipeline paused for approval is not a failure.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from reconciler.support.errors import PipelinePaused, public_message, repeats_until
from state_backends import StateBackend, StateBackendError


def recorded(backend: StateBackend, pipeline: str, step: Callable[[], Any]) -> Any:
    """`step()`'s outcome, its pipeline's last failure recorded or cleared on the way."""
    try:
        outcome = step()
    except PipelinePaused:
        raise
    except Exception as error:
        # The backend may be what failed the step: then its error is the one to see.
        with contextlib.suppress(StateBackendError):
            _record(backend, pipeline, public_message(error), {}, repeats_until(error))
        raise
    held = outcome.details.get("bad_input", {})
    if held:
        _record(backend, pipeline, "; ".join(held.values()), held)
    else:
        cleared(backend, pipeline)
    return outcome


def cleared(backend: StateBackend, pipeline: str) -> None:
    """Forget the pipeline's last failure: a step committed since (`run`, or `execute`'s,
    which a DELETE of the rows a FAIL UPDATE stopped at lets through)."""
    if backend.read_step_failure(pipeline) is not None:
        backend.write_step_failure(pipeline, {})


def _record(backend: StateBackend, pipeline: str, reason: str, held: dict[str, str],
            until: str | None = None) -> None:
    """`until`: what lets the pipeline go on, when every step would fail the same way."""
    backend.write_step_failure(pipeline, {
        "at": datetime.now(UTC).isoformat(timespec="seconds"), "reason": reason, "held": held,
        **({"stuck_until": until} if until else {})})
