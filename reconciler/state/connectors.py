"""The manifest's record of each connector: where its input stands between steps.

An input connector keeps `generation` (a new id each time it starts over: it names
its checkpoint folder and the app transactions of its writes, so a retried attempt
never finds an abandoned one's), `checkpoint` (the folder of files it has ingested),
`source_version` (a `delta` source: the last version read), `kafka_offsets` and
`kafka_batch` (a `kafka` source: the next offset to read per topic and partition, and
how many batches it has appended, `engine.io.kafka_source`) and `skipped_files`
(files `on_bad_input: skip` set aside, each `{file, reason, ...}`). An output
connector keeps nothing: `{}`.

Parsed once where a manifest is read (`connectors_from_json`), type-checked: a
manifest may come from a pull request's checkout, and a bad field is refused with
its connector's name before anything reads it. A step works on its own copy, which
ingestion advances in place (offsets move even when a bad file stops the
connector); the manifest the step commits holds that copy.

A connector's definition (what the committed program says it reads or writes) is
read once too, when a pipeline's runtime is made (`connector_definitions`): its
fields typed, its path resolved against the project folder (`layout.resolve_path`),
so a step neither looks fields up in the document nor resolves a path again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reconciler.support.errors import ReconcileError
from reconciler.support.locations import is_url, resolve_path


class ConnectorState(BaseModel):
    """One connector's state in the manifest (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", strict=True, validate_assignment=True)

    generation: str | None = None
    checkpoint: str | None = None
    source_version: int | None = None
    kafka_offsets: dict[str, dict[str, int]] | None = None
    kafka_batch: int | None = None
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


@dataclass(frozen=True)
class KafkaEndpoint:
    """Where a `kafka` connector reads or writes: its servers, and its topics or pattern;
    `env_options` names the environment variable of each secret client option."""

    bootstrap_servers: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    env_options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ConnectorDefinition:
    """One connector as the committed program defines it (see the module docstring)."""

    name: str
    direction: Literal["input", "output"]
    relation: str
    type: str
    format: str | None
    path: str
    """As `pipeline.yaml` writes it: what messages name."""
    location: str
    """`path` resolved: a URL, or a local folder's absolute path. Every read and write."""
    local_location: str | None
    """`location` when it is on the local file system (which this process can list and
    move files in), None on object storage (where only Spark lists)."""
    reader_options: dict[str, Any]
    """Every option Spark's reader gets: the program's and the throughput ones, which the
    program keeps apart because changing them is not a modification."""
    on_error: str = "fail"
    on_bad_input: str = "fail"
    changes: bool = False
    snapshot_on_bootstrap: bool = False
    kafka: KafkaEndpoint | None = None

    @property
    def is_input(self) -> bool:
        return self.direction == "input"


def connector_definitions(program: Mapping[str, Any], base_dir: Path
                          ) -> dict[str, ConnectorDefinition]:
    """A program document's connectors, typed, their paths resolved against `base_dir`
    (the project folder)."""
    return {name: _definition(name, entry, base_dir)
            for name, entry in program["connectors"].items()}


def _definition(name: str, entry: dict[str, Any], base_dir: Path) -> ConnectorDefinition:
    location = resolve_path(entry["path"], base_dir)
    return ConnectorDefinition(
        name=name, direction=entry["direction"], relation=entry["relation"],
        type=entry["type"], format=entry.get("format"), path=entry["path"],
        location=location, local_location=None if is_url(location) else location,
        reader_options={**entry.get("options", {}), **entry.get("throughput_options", {})},
        on_error=entry.get("on_error", "fail"), on_bad_input=entry.get("on_bad_input", "fail"),
        changes=bool(entry.get("changes")),
        snapshot_on_bootstrap=bool(entry.get("snapshot_on_bootstrap")),
        kafka=_kafka(entry))


def _kafka(entry: dict[str, Any]) -> KafkaEndpoint | None:
    where = entry.get("kafka")
    if where is None:
        return None
    return KafkaEndpoint(bootstrap_servers=where["bootstrap_servers"],
                         topics=tuple(where.get("topics", ())),
                         topic_pattern=where.get("topic_pattern"),
                         env_options=tuple(sorted(entry.get("env_options", {}).items())))
