"""What each setting of a connector says: *what* it reads or writes, or *how*.

Every field of `project.ConnectorSpec` carries one role, as `typing.Annotated` metadata:

- `identity(...)`: what the connector reads or writes (its relation, type, format, path,
  a Kafka connector's servers and topics, `changes`). A change is a modification: the
  connector is reset, and an input reads its source again from where a new connector
  starts (`plan.diff`, `engine.bootstrap`).
- `handling(...)`: how it reads or writes (`on_error`, `on_bad_input`, `on_reset`,
  `snapshot_on_bootstrap`, `env_options`). A change is committed by an apply with the
  connector's offsets kept and nothing sent again.
- `OPTIONS`: Spark's options, split key by key (`is_handling_option`): those that only
  bound or tune the reading (`maxOffsetsPerTrigger`, `kafka.*` client settings, ...) are
  handling, the rest (parsing: `header`, `multiLine`, ...) identity.

This is the one list: the program document's parts (`model.connectors.Connector.definition` and
`handling`), the keys the diff leaves out and compares on their own (`plan.diff`), the
reasons and notes of the plan (`plan.actions`, `plan.document`), the check of a committed
manifest's connectors (`desired.model.committed`) and the table in docs/kafka.md are derived
from it (`document_keys`).

A connector's entry in a program document is one flat mapping of document keys. Keys a
role says are `omitted` at their field's default are written only when set, so documents
written before such a key existed compare equal; `same_entry` compares two entries with
those defaults filled in and the options split as this code splits them, so a committed
manifest written by an earlier version (an option classified otherwise then, `on_error`
among the definition's keys) reads as what it says.

The option keys here are only classified, not allowed: which keys a connector may set at
all is `desired.settings.client_options`' allow-list. The two are kept apart for now; both are
per connector type, so one declaration of each key (allowed, and its role) could replace
them later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

Kind = Literal["identity", "handling", "options", "name"]


@dataclass(frozen=True)
class Role:
    """A connector field's role: which document keys it becomes, and whether they are left
    out of the document at the field's default."""

    kind: Kind
    keys: tuple[str, ...] = ()
    omitted: bool = False
    why: str = ""


def identity(*keys: str, omitted: bool = False, why: str = "") -> Role:
    """A field that says what the connector reads or writes: changing it resets it."""
    return Role("identity", keys, omitted, why)


def handling(key: str, *, omitted: bool = False, why: str = "") -> Role:
    """A field that says how the connector reads or writes: an apply keeps its offsets."""
    return Role("handling", (key,), omitted, why)


NAME = Role("name", (), why="connectors are keyed by name")
OPTIONS = Role("options", ("options", "throughput_options"),
               why="parsing options change the rows read; bounds and client settings do not")
HANDLING_OPTIONS_KEY = "throughput_options"
"""Where a connector's document keeps its handling options (the name predates `kafka.*`)."""

# -- options --------------------------------------------------------------------------------

_COMMON_HANDLING = {
    "maxFilesPerTrigger": "at most this many files per step",
    "maxBytesPerTrigger": "at most about this many bytes per step",
    "maxRecordsPerFile": "how the written files are cut",
    "maxCachedFiles": "how many listed files Spark caches",
}
_KAFKA_HANDLING = {
    "maxOffsetsPerTrigger": "at most this many records per step",
    "minOffsetsPerTrigger": "at least this many records per step",
    "maxTriggerDelay": "how long a step waits for minOffsetsPerTrigger",
    "maxRecordsPerPartition": "how Spark splits a step's records into tasks",
    "minPartitions": "how Spark splits a step's records into tasks",
    "fetchOffset.numRetries": "retries of the offset fetch",
    "fetchOffset.retryIntervalMs": "retries of the offset fetch",
    "kafkaConsumer.pollTimeoutMs": "how long a task waits for a poll",
    "groupIdPrefix": "the consumer group's name",
    "startingOffsets": "where a new or reset connector starts (the engine keeps the offsets "
                       "of a running one)",
    "failOnDataLoss": "whether offsets lost to retention stop the connector",
}
_KAFKA_CLIENT_PREFIX = "kafka."
"""A Kafka connector's client settings (security, timeouts, fetch and batch sizes): how it
talks to the brokers. Its servers and topics are its own fields (`kafka` in the document);
`kafka.bootstrap.servers` given as an option is also its servers, so a change of it
changes that entry and resets it."""

HANDLING_OPTIONS: dict[str, frozenset[str]] = {
    "files": frozenset(key.casefold() for key in _COMMON_HANDLING),
    "delta": frozenset(key.casefold() for key in _COMMON_HANDLING),
    "kafka": frozenset(key.casefold() for key in _KAFKA_HANDLING),
}
"""Per connector type, the option keys (case-folded, as Spark compares them) that only
bound or tune how it reads or writes. Every other option is identity: a `files`
connector's parsing options (`header`, `multiLine`, `dateFormat`, ...) change the rows
read from the same files."""

HANDLING_OPTION_PREFIXES: dict[str, tuple[str, ...]] = {"kafka": (_KAFKA_CLIENT_PREFIX,)}

OPTION_DOCS: dict[str, dict[str, str]] = {
    "files": _COMMON_HANDLING, "delta": _COMMON_HANDLING,
    "kafka": {**_KAFKA_HANDLING,
              "kafka.*": "client settings: security, timeouts, fetch and batch sizes"},
}
"""The handling options as the docs list them (`tests/test_docs.py` checks the list)."""


def is_handling_option(connector_type: str, key: str) -> bool:
    """Whether an option only bounds or tunes how a connector of that type reads or writes."""
    folded = key.casefold()
    return folded in HANDLING_OPTIONS.get(connector_type, frozenset()) or folded.startswith(
        HANDLING_OPTION_PREFIXES.get(connector_type, ()))


def split_options(connector_type: str, options: Mapping[str, Any]
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(identity options, handling options)."""
    identity_part = {k: v for k, v in options.items() if not is_handling_option(connector_type, k)}
    handling_part = {k: v for k, v in options.items() if is_handling_option(connector_type, k)}
    return identity_part, handling_part


# -- the document ---------------------------------------------------------------------------

_REQUIRED = object()


@dataclass(frozen=True)
class DocumentKey:
    """One key of a connector's entry in a program document."""

    key: str
    kind: Literal["identity", "handling"]
    field: str  # the ConnectorSpec field it comes from
    omitted: bool  # left out at `default`
    default: Any  # the field's default; `_REQUIRED` when it has none

    def value_or_default(self, entry: Mapping[str, Any]) -> Any:
        return entry.get(self.key, None if self.default is _REQUIRED else self.default)


def roles_of(model: type[BaseModel]) -> dict[str, Role]:
    """Each field of `model` with its role; a field without one is a programming error."""
    roles = {}
    for name, info in model.model_fields.items():
        found = [item for item in info.metadata if isinstance(item, Role)]
        if len(found) != 1:
            raise TypeError(f"{model.__name__}.{name} needs exactly one connector role")
        roles[name] = found[0]
    return roles


def document_keys(model: type[BaseModel]) -> dict[str, DocumentKey]:
    """Every key a connector's document entry may hold, from the roles of `model`'s fields."""
    keys: dict[str, DocumentKey] = {}
    for name, role in roles_of(model).items():
        info = model.model_fields[name]
        default = (info.get_default(call_default_factory=True) if not info.is_required()
                   else _REQUIRED)
        if role.kind == "options":
            keys["options"] = DocumentKey("options", "identity", name, False, {})
            keys[HANDLING_OPTIONS_KEY] = DocumentKey(HANDLING_OPTIONS_KEY, "handling", name,
                                                     False, {})
            continue
        for key in role.keys:
            if key in keys:  # `table` and `view` both give the direction and relation
                continue
            kind: Literal["identity", "handling"] = (
                "handling" if role.kind == "handling" else "identity")
            keys[key] = DocumentKey(key, kind, name, role.omitted,
                                    default if len(role.keys) == 1 else _REQUIRED)
    return keys


def keys_of(keys: Mapping[str, DocumentKey], kind: str) -> tuple[str, ...]:
    return tuple(key for key, found in keys.items() if found.kind == kind)


def document_part(keys: Mapping[str, DocumentKey], kind: str,
                  value_of: Any) -> dict[str, Any]:
    """The keys of one kind with their values (`value_of(key)`), those at a default that
    the role omits left out."""
    part = {}
    for key, found in keys.items():
        if found.kind != kind:
            continue
        value = value_of(key)
        if found.omitted and (value == found.default or value is None):
            continue
        part[key] = value
    return part


def normal_entry(keys: Mapping[str, DocumentKey], entry: Mapping[str, Any]) -> dict[str, Any]:
    """A connector's entry as this code writes it: its options split by `is_handling_option`,
    every known key at its default present. Keys it does not know are kept as they are (so
    an entry with one compares unequal: `same_entry`)."""
    normal = dict(entry)
    options = {**entry.get("options", {}), **entry.get(HANDLING_OPTIONS_KEY, {})} if isinstance(
        entry.get("options", {}), Mapping) and isinstance(
        entry.get(HANDLING_OPTIONS_KEY, {}), Mapping) else None
    if options is not None:
        normal["options"], normal[HANDLING_OPTIONS_KEY] = split_options(
            str(entry.get("type")), options)
    for key, found in keys.items():
        if key not in normal and found.default is not _REQUIRED:
            normal[key] = found.default
    return normal


def same_entry(keys: Mapping[str, DocumentKey], a: Mapping[str, Any],
               b: Mapping[str, Any]) -> bool:
    """Whether two connector entries say the same (`normal_entry`)."""
    return normal_entry(keys, a) == normal_entry(keys, b)


def spec_values(keys: Mapping[str, DocumentKey], entry: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of the connector's spec that an entry holds one to one (the key is the
    field's name: `type`, `format`, `on_error`, `changes`, ...), as it holds them."""
    return {key: entry[key] for key, found in keys.items()
            if found.field == key and key in entry and key != "options"}


def handling_changes(keys: Mapping[str, DocumentKey], old: Mapping[str, Any],
                     new: Mapping[str, Any]) -> list[str]:
    """The handling keys whose values differ, each read with its default."""
    before, after = normal_entry(keys, old), normal_entry(keys, new)
    return [key for key in keys_of(keys, "handling") if before.get(key) != after.get(key)]


def describe_change(key: str, old: Any, new: Any) -> str:
    """One handling change as the plan says it: `on_error fail -> quarantine`,
    `options changed: maxOffsetsPerTrigger`, `env_options changed: kafka.sasl.jaas.config`."""
    if isinstance(old, Mapping) or isinstance(new, Mapping):
        before, after = dict(old or {}), dict(new or {})
        changed = sorted(k for k in {*before, *after} if before.get(k) != after.get(k))
        shown = "options" if key == HANDLING_OPTIONS_KEY else key
        return f"{shown} changed: {', '.join(changed)}"
    return f"{key} {_shown(old)} -> {_shown(new)}"


def _shown(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def handling_fields(keys: Mapping[str, DocumentKey]) -> Iterable[str]:
    """The spec fields whose whole value is handling, for the docs."""
    return [found.field for found in keys.values()
            if found.kind == "handling" and found.key != HANDLING_OPTIONS_KEY]


# -- the docs -------------------------------------------------------------------------------

TABLE_START = "<!-- connector-roles:start (desired.settings.connector_roles.roles_table) -->"
TABLE_END = "<!-- connector-roles:end -->"


def roles_table(model: type[BaseModel]) -> str:
    """The list as docs/modifications.md shows it, between `TABLE_START` and `TABLE_END`
    (`tests/plan/test_connector_resets.py` checks that the page holds what this renders)."""
    said = {"identity": "**resets** it: what it reads or writes",
            "handling": "keeps its offsets: how it reads or writes",
            "options": "depends on the key: the handling options below keep its offsets, "
                       "any other resets it",
            "name": "makes another connector"}
    lines = [TABLE_START, "", "| setting | a change | |", "|---|---|---|"]
    for name, role in roles_of(model).items():
        lines.append(f"| `{name}` | {said[role.kind]} | {role.why} |")
    lines += ["", "Handling options (case-insensitive, as Spark reads them):", ""]
    for connector_type, options in OPTION_DOCS.items():
        shown = ", ".join(f"`{key}`" for key in options)
        lines.append(f"- `{connector_type}`: {shown}")
    lines += ["", TABLE_END]
    return "\n".join(lines)
