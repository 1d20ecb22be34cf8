"""What a `kafka` connector in pipeline.yaml may say, and how its program document keeps it.

A pull request writes pipeline.yaml, so a Kafka connector's settings are checked as
strictly as a path is:

- where it reads is its own fields (`bootstrap_servers`, `topic` or `topic_pattern`),
  never Spark's `subscribe`, `assign` or `kafka.bootstrap.servers` options beside them
  (one place to say it; `kafka.bootstrap.servers` alone is accepted as the servers);
- which offsets a step reads is the engine's (`endingOffsets` and offsets by timestamp
  are refused); `startingOffsets` is `earliest` or `latest`, for a new connector;
- a secret or a file of the machine is never in the file, and every option is one a
  connector may hand Kafka's client: `desired.settings.client_options` (the same check for a
  committed manifest's connectors). `env_options` names the environment variable that
  holds a secret; those names must start with `KAFKA_`, so a pull request cannot have
  `GITHUB_TOKEN` or `AWS_SECRET_ACCESS_KEY` sent to a broker it names.

A connector's document keeps the servers and topics under `kafka` (a change of them is
a modification, which resets the connector), `env_options` with the handling keys
(a rotated secret is not a modification), and `path` as `kafka://<servers>/<topics>`,
what plans and messages show.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

ENV_OPTION_PATTERN = r"^KAFKA_[A-Z0-9_]+$"
KAFKA_FIELDS = ("bootstrap_servers", "topic", "topic_pattern", "env_options")
SERVERS_OPTION = "kafka.bootstrap.servers"
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


class _KafkaSpec(Protocol):
    """What these checks read of a connector (`project.ConnectorSpec`, which imports this
    module). Read-only, as the frozen model's fields are: a field narrower than its type
    here (`format`, a Literal) still matches."""

    @property
    def name(self) -> str: ...

    @property
    def table(self) -> str | None: ...

    @property
    def format(self) -> str | None: ...

    @property
    def path(self) -> str | None: ...

    @property
    def options(self) -> dict[str, Any]: ...

    @property
    def changes(self) -> bool: ...

    @property
    def bootstrap_servers(self) -> str | None: ...

    @property
    def topic(self) -> str | list[str] | None: ...

    @property
    def topic_pattern(self) -> str | None: ...

    @property
    def env_options(self) -> dict[str, str]: ...


def check_kafka_shape(spec: _KafkaSpec) -> None:
    """ValueError (pydantic's way) naming the connector and what is wrong with it."""
    name, inputs = spec.name, spec.table is not None
    if spec.path is not None:
        raise ValueError(f"connector '{name}' of type 'kafka' takes no 'path': it names "
                         "bootstrap_servers and a topic")
    folded = {key.casefold(): key for key in spec.options}
    if bool(spec.bootstrap_servers) == (SERVERS_OPTION in folded):
        raise ValueError(f"connector '{name}' of type 'kafka' needs 'bootstrap_servers' "
                         f"(or the option '{SERVERS_OPTION}'), once")
    starting = folded.get("startingoffsets")
    if starting is not None and str(spec.options[starting]) not in ("earliest", "latest"):
        raise ValueError(f"connector '{name}': startingOffsets is 'earliest' or 'latest'")
    topics = topic_list(spec.topic)
    if any(not _TOPIC.fullmatch(topic) for topic in topics):
        raise ValueError(f"connector '{name}': a Kafka topic is 1 to 249 letters, digits, "
                         "'.', '_' or '-'")
    if inputs:
        _check_input(spec, topics)
    else:
        _check_output(spec, topics)


def _check_input(spec: _KafkaSpec, topics: list[str]) -> None:
    name = spec.name
    if bool(topics) == bool(spec.topic_pattern):
        raise ValueError(f"input connector '{name}' of type 'kafka' needs exactly one of "
                         "'topic' or 'topic_pattern'")
    if spec.topic_pattern is not None:
        try:
            re.compile(spec.topic_pattern)
        except re.error as error:
            raise ValueError(f"connector '{name}': topic_pattern is not a regular "
                             f"expression ({error})") from None
    if spec.format not in ("json", "raw"):
        raise ValueError(f"input connector '{name}' of type 'kafka' needs a 'format': json "
                         "(each value parsed against the table's columns) or raw")
    if spec.changes and spec.format != "json":
        raise ValueError(f"connector '{name}': changes needs format json (an _op field)")


def _check_output(spec: _KafkaSpec, topics: list[str]) -> None:
    name = spec.name
    if len(topics) != 1 or not isinstance(spec.topic, str) or spec.topic_pattern:
        raise ValueError(f"output connector '{name}' of type 'kafka' needs one 'topic'")
    if spec.format not in (None, "json"):
        raise ValueError(f"output connector '{name}' of type 'kafka' writes json messages; "
                         "leave out 'format' or say json")


def topic_list(topic: str | list[str] | None) -> list[str]:
    if topic is None:
        return []
    return [topic] if isinstance(topic, str) else list(topic)


def servers_of(spec: _KafkaSpec) -> str:
    """The connector's bootstrap servers, from its field or its option."""
    if spec.bootstrap_servers:
        return spec.bootstrap_servers
    return str(next(value for key, value in spec.options.items()
                    if key.casefold() == SERVERS_OPTION))


def kafka_document(spec: _KafkaSpec) -> dict[str, Any]:
    """What a Kafka connector reads or writes, as its program document keeps it."""
    where: dict[str, Any] = {"bootstrap_servers": servers_of(spec)}
    if spec.topic_pattern:
        where["topic_pattern"] = spec.topic_pattern
    else:
        where["topics"] = sorted(topic_list(spec.topic))
    return where


def kafka_path(where: dict[str, Any]) -> str:
    """`kafka://<servers>/<topics>` (`~<pattern>` for a pattern): what plans show."""
    topics = where.get("topics") or [f"~{where.get('topic_pattern')}"]
    return f"kafka://{where['bootstrap_servers']}/{','.join(topics)}"


def spec_fields(where: dict[str, Any], direction: str) -> dict[str, Any]:
    """A document's `kafka` entry as pipeline.yaml's fields (the committed program is
    checked by declaring it again)."""
    topics = where.get("topics")
    topic: str | list[str] | None = topics
    if direction == "output" and topics:
        topic = topics[0]
    return {"bootstrap_servers": where.get("bootstrap_servers"), "topic": topic,
            "topic_pattern": where.get("topic_pattern")}
