"""A pipeline's connectors as its program holds them: each checked against the program's
tables and views, and split into what it reads or writes (its identity: a change resets
it) and how (its handling), by `ConnectorSpec`'s field roles."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from reconciler.desired.parsing.pipeline_sql import PipelineSource
from reconciler.desired.parsing.sql import Location
from reconciler.desired.settings.connector_kinds import connector_kind
from reconciler.desired.settings.connector_options import location_option
from reconciler.desired.settings.connector_roles import (
    HANDLING_OPTIONS_KEY,
    document_keys,
    document_part,
    keys_of,
    split_options,
)
from reconciler.desired.settings.project import ConnectorSpec
from reconciler.support.errors import did_you_mean

CONNECTOR_KEYS = document_keys(ConnectorSpec)
"""Every key of a connector's document entry, with its role, from `ConnectorSpec`'s fields
(`desired.settings.connector_roles`): the one list of what resets a connector and what does not."""
HANDLING_KEYS = keys_of(CONNECTOR_KEYS, "handling")
"""Keys that say how a connector reads or writes, not what: changing one resets nothing."""


@dataclass(frozen=True)
class Connector:
    name: str
    direction: Literal["input", "output"]
    relation: str
    type: str
    format: str | None
    path: str
    options: dict[str, Any]
    on_error: str
    location: Location
    on_bad_input: str = "fail"
    on_reset: str = "refuse"
    snapshot_on_bootstrap: bool = False
    changes: bool = False
    option_lines: dict[str, int] = field(default_factory=dict)  # line per option, and `path`
    kafka: dict[str, Any] | None = None  # a kafka connector's servers and topics
    env_options: dict[str, str] = field(default_factory=dict)  # kafka: option -> variable

    def option_location(self, key: str) -> Location:
        """Where an option is set, for errors that concern it rather than the connector."""
        return Location(self.location.file, self.option_lines.get(key, self.location.line))

    def definition(self) -> dict[str, Any]:
        """What the connector reads or writes: a change resets it. The keys are those of
        `ConnectorSpec`'s identity fields (`CONNECTOR_KEYS`); flags only when set, so
        documents written before they existed compare equal."""
        return document_part(CONNECTOR_KEYS, "identity", self._document_value)

    def handling(self) -> dict[str, Any]:
        """How the connector reads or writes, not what: its handling fields and options
        (`HANDLING_KEYS`). A change of these resets no offsets (`plan.diff`)."""
        return document_part(CONNECTOR_KEYS, "handling", self._document_value)

    def _document_value(self, key: str) -> Any:
        if key in ("options", HANDLING_OPTIONS_KEY):
            identity_part, handling_part = split_options(self.type, self.options)
            return identity_part if key == "options" else handling_part
        return getattr(self, key)



def build_connectors(source: PipelineSource, tables: Mapping[str, object],
                     views: Mapping[str, object]) -> dict[str, Connector]:
    """Every connector of pipeline.yaml, in order, checked against the program's relations
    (each error at its line)."""
    connectors: dict[str, Connector] = {}
    for index, spec in enumerate(source.spec.connectors):
        location = Location(source.spec_path, source.connector_line(index))
        option_lines = {key: source.spec_lines.line_of(("connectors", index, "options", key))
                        for key in spec.options}  # no option is `path` (location_option)
        option_lines["path"] = source.spec_lines.line_of(("connectors", index, "path"))
        names = Location(source.spec_path, source.spec_lines.line_of(
            ("connectors", index, "table" if spec.direction == "input" else "view")))
        connectors[spec.name] = _connector(spec, location, option_lines, tables, views, names)
    return connectors


def _connector(spec: ConnectorSpec, location: Location, option_lines: dict[str, int],
               tables: Mapping[str, object], views: Mapping[str, object],
               names: Location) -> Connector:
    """A connector of pipeline.yaml checked against the program (`names`: the line of its
    `table:` or `view:`, where an unknown relation is reported)."""
    relation = spec.relation.lower()
    if (key := location_option(spec.options)) is not None:
        raise Location(location.file, option_lines[key]).error(
            f"connector '{spec.name}': option '{key}' is not allowed: the connector's own "
            "'path' says where it reads, and its offsets are kept where the layout puts them")
    if spec.direction == "input" and relation not in tables:
        what = "a view, not a table" if relation in views else "an unknown table"
        raise names.error(f"input connector '{spec.name}' names {what} '{relation}'"
                          + ("" if relation in views else did_you_mean(relation, tables)))
    if spec.direction == "output" and relation not in views and relation not in tables:
        raise names.error(f"output connector '{spec.name}' names an unknown view '{relation}'"
                          + did_you_mean(relation, [*views, *tables]))
    kind = connector_kind(spec.type)
    endpoint = kind.endpoint(spec)
    return Connector(name=spec.name, direction=spec.direction, relation=relation, type=spec.type,
                     format=spec.format or kind.default_format, path=kind.path(spec, endpoint),
                     options=dict(spec.options), kafka=endpoint, env_options=dict(spec.env_options),
                     on_error=spec.on_error, on_bad_input=spec.on_bad_input,
                     on_reset=spec.on_reset, location=location,
                     snapshot_on_bootstrap=spec.snapshot_on_bootstrap, changes=spec.changes,
                     option_lines=option_lines)
