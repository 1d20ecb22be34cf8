"""One declaration per connector type, registered once by the name pipeline.yaml's `type:`
gives: what a type means before anything runs (the engine's side of it is
`engine.io.connector_types`).

- `check`: the fields and options a connector of the type needs or refuses, after the
  checks every connector has (`connector_shape`); ValueError, as pydantic's validators
  report;
- `endpoint` and `path`: where it reads or writes, as the program document keeps it (a
  Kafka connector's servers and topics under `endpoint_key`, its path a summary of them);
  `declared_fields`: that endpoint as pipeline.yaml's fields again (a committed program is
  checked by declaring it anew);
- `reset_reads`, `reset_start`, `reset_advice` and `same_source`: what a reset connector
  reads again, for the plan's words and its refusal to append rows twice (`plan.rereads`).

A new connector type is one such declaration in `KINDS` (`declare`), its engine module
registered in `engine.io.connector_types.TYPES`, and the fields it reads in
`project.ConnectorSpec` when it has fields of its own.
"""

from __future__ import annotations

import glob
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from reconciler.desired.settings.client_options import (
    check_client_options,
    file_option_key,
    kafka_env_key,
    kafka_option_key,
    no_option_key,
)
from reconciler.desired.settings.connector_roles import HANDLING_OPTIONS_KEY
from reconciler.desired.settings.kafka_settings import (
    KAFKA_FIELDS,
    check_kafka_shape,
    kafka_document,
    kafka_path,
    spec_fields,
)

Document = Mapping[str, Any]
"""A connector's entry in a program document."""


class ConnectorKind:
    """A type that reads or writes at a `path` (a folder, a table): the defaults."""

    name = ""
    reset_reads = "{where}"
    """What a reset input reads again, `{where}` its path, for the plan's words."""
    endpoint_key: str | None = None
    """The document's key holding where the connector reads, when its path only sums it up."""
    default_format: str | None = None

    def check(self, spec: Any) -> None:
        if spec.path is None:
            raise ValueError(f"connector '{spec.name}' of type '{spec.type}' needs a 'path'")
        fields = [key for key in KAFKA_FIELDS if getattr(spec, key)]
        if fields:
            raise ValueError(f"connector '{spec.name}': '{fields[0]}' is for kafka connectors")
        self.check_format(spec)
        check_client_options(spec, self.option_key)

    def option_key(self, spec: Any, key: str) -> None:
        """An `options` key the type's client is handed, refused (`OptionRefused`) unless
        allowed: by default none but what reaches no client."""
        no_option_key(spec, key)

    def check_format(self, spec: Any) -> None:
        if spec.format is not None:
            raise ValueError(f"connector '{spec.name}' of type '{spec.type}' takes no "
                             "'format'")

    def endpoint(self, spec: Any) -> dict[str, Any] | None:
        return None

    def path(self, spec: Any, endpoint: dict[str, Any] | None) -> str:
        assert spec.path is not None  # `check`: a path type's connector names one
        return str(spec.path)

    def declared_fields(self, endpoint: dict[str, Any], direction: str) -> dict[str, Any]:
        return {}

    def reset_start(self, document: Document) -> str | None:
        """Where a new generation of the input starts, when the type lets it choose."""
        return None

    def reset_advice(self) -> str:
        """The type's own way out of reading again what its table keeps, or ''."""
        return ""

    def same_source(self, old: Document, new: Document) -> bool:
        """Whether two inputs of this type may read the same rows: the same folder, or one
        inside the other (a glob from where its magic starts)."""
        a, b = _root(str(old.get("path"))), _root(str(new.get("path")))
        return a == b or a.startswith(b + "/") or b.startswith(a + "/")


class FilesKind(ConnectorKind):
    """A folder of JSON, CSV or Parquet files."""

    name = "files"
    reset_reads = "every file of {where}"

    def option_key(self, spec: Any, key: str) -> None:
        file_option_key(spec, key)

    def check_format(self, spec: Any) -> None:
        if spec.format not in ("json", "csv", "parquet"):
            raise ValueError(f"connector '{spec.name}' of type 'files' needs a 'format' "
                             "(json, csv or parquet)")


class DeltaKind(ConnectorKind):
    """A Delta table, read by version."""

    name = "delta"
    reset_reads = "{where} from its first version"

    def option_key(self, spec: Any, key: str) -> None:
        no_option_key(spec, key, " (each step reads the source table's new versions from "
                                 "its log)")


class KafkaKind(ConnectorKind):
    """Topics of a Kafka cluster: servers and topics in the document, no path."""

    name = "kafka"
    reset_reads = "{where} from the earliest offsets"
    endpoint_key = "kafka"
    default_format = "json"

    def check(self, spec: Any) -> None:
        check_kafka_shape(spec)
        check_client_options(spec, kafka_option_key, kafka_env_key)

    def endpoint(self, spec: Any) -> dict[str, Any] | None:
        return kafka_document(spec)

    def path(self, spec: Any, endpoint: dict[str, Any] | None) -> str:
        assert endpoint is not None  # `endpoint` gives one for every Kafka connector
        return kafka_path(endpoint)

    def declared_fields(self, endpoint: dict[str, Any], direction: str) -> dict[str, Any]:
        return spec_fields(endpoint, direction)

    def reset_start(self, document: Document) -> str | None:
        """Its `startingOffsets`: `earliest` unless it says `latest`."""
        options = {key.lower(): value for key, value
                   in document.get(HANDLING_OPTIONS_KEY, {}).items()}
        return str(options.get("startingoffsets", "earliest"))

    def reset_advice(self) -> str:
        return "startingOffsets: latest (start after what the topic holds at the apply), "

    def same_source(self, old: Document, new: Document) -> bool:
        """A topic named by both; a pattern matching a topic the other names; two patterns
        (what they match is the broker's to say: taken as overlapping)."""
        before, after = old.get(self.endpoint_key) or {}, new.get(self.endpoint_key) or {}
        old_topics, new_topics = set(before.get("topics") or ()), set(after.get("topics") or ())
        old_pattern, new_pattern = before.get("topic_pattern"), after.get("topic_pattern")
        if old_pattern and new_pattern:
            return True
        if old_pattern:
            return any(re.fullmatch(old_pattern, topic) for topic in new_topics)
        if new_pattern:
            return any(re.fullmatch(new_pattern, topic) for topic in old_topics)
        return bool(old_topics & new_topics)


KINDS: dict[str, ConnectorKind] = {}
"""Every connector type pipeline.yaml may name, by that name."""


def declare(kind: ConnectorKind) -> ConnectorKind:
    """Register `kind` under its name (the built-in types below; a test's toy type)."""
    KINDS[kind.name] = kind
    return kind


for _kind in (FilesKind(), DeltaKind(), KafkaKind()):
    declare(_kind)


def connector_kind(name: str) -> ConnectorKind:
    """The declaration of type `name`; ValueError naming the types there are."""
    kind = KINDS.get(name)
    if kind is None:
        raise ValueError(f"type: '{name}' is not one of {kind_names()}")
    return kind


def kind_names() -> str:
    """`'files', 'delta' or 'kafka'`: the types there are, as an error lists them."""
    names = [f"'{known}'" for known in KINDS]
    return " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def may_read_the_same(old: Document, new: Document) -> bool:
    """Whether two input connectors' sources may hold the same rows: two types that read
    paths, by their paths; otherwise only two of one type, as that type says."""
    before, after = connector_kind(str(old.get("type"))), connector_kind(str(new.get("type")))
    if before.endpoint_key is None and after.endpoint_key is None:
        return before.same_source(old, new)
    return before is after and before.same_source(old, new)


def _root(path: str) -> str:
    parts = path.split("/")
    end = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))
    return posixpath.normpath("/".join(parts[:end]) or ".")
