"""The manifest's record of each connector: where its input stands between steps.

An input connector keeps `generation` (a new id each time it starts over: it names
its checkpoint folder and the app transactions of its writes, so a retried attempt
never finds an abandoned one's), `checkpoint` (the folder of files it has ingested),
`source_version` (a `delta` source: the last version read) and `skipped_files`
(files `on_bad_input: skip` set aside, each `{file, reason, ...}`). An output
connector keeps nothing: `{}`.

Parsed once where a manifest is read (`connectors_from_json`), type-checked: a
manifest may come from a pull request's checkout, and a bad field is refused with
its connector's name before anything reads it. A step works on its own copy, which
ingestion advances in place (offsets move even when a bad file stops the
connector); the manifest the step commits holds that copy.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reconciler.errors import ReconcileError


class ConnectorState(BaseModel):
    """One connector's state in the manifest (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", strict=True, validate_assignment=True)

    generation: str | None = None
    checkpoint: str | None = None
    source_version: int | None = None
    skipped_files: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def input_checkpoint(self) -> str:
        """The checkpoint folder of an input connector (a bootstrap always gives one)."""
        return self._started()[1]

    @property
    def input_generation(self) -> str:
        """The generation of an input connector (a bootstrap always gives one)."""
        return self._started()[0]

    def _started(self) -> tuple[str, str]:
        if self.generation is None or self.checkpoint is None:
            raise ReconcileError("an input connector's state has no generation or "
                                 "checkpoint: run `reconcile apply` to start it")
        return self.generation, self.checkpoint

    def to_json(self) -> dict[str, Any]:
        """The manifest's JSON: only what is set, so documents stay as they were."""
        return self.model_dump(exclude_defaults=True)

    def copy_for_step(self) -> ConnectorState:
        """A copy a step may advance without touching the committed state."""
        return self.model_copy(deep=True)


def connectors_from_json(entries: Any, where: str) -> dict[str, ConnectorState]:
    """A manifest's `connectors` object as states."""
    if entries is None:
        return {}
    if not isinstance(entries, dict):
        raise ReconcileError("manifest: connectors is not an object", file=where)
    states = {}
    for name, entry in entries.items():
        try:
            states[name] = ConnectorState.model_validate(entry)
        except ValidationError as error:
            problem = error.errors()[0]
            field = ".".join(str(part) for part in problem["loc"]) or "state"
            raise ReconcileError(f"manifest: connector '{name}' has a bad {field} "
                                 f"({problem['msg']})", file=where) from None
    return states
