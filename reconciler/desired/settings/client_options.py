"""Connector options that reach a client library are code, not settings.

A connector's `options` go to Spark's reader or writer as they are, and through it to a
client library: Kafka's Java client (every `kafka.*` option), and for a `files`
connector Hadoop, since Spark copies a file source's options into the Hadoop
configuration of its read (`fs.s3a.endpoint`, `fs.s3a.aws.credentials.provider`,
`fs.<scheme>.impl`). Those libraries load classes, read files and environment variables
and expand `${...}` in values when their settings say so: Kafka's config providers make
the client send `${env:AWS_SECRET_ACCESS_KEY}` or any file to a broker the connector
names; Hadoop expands `${env.NAME}` in a value. pipeline.yaml comes from a pull request,
and a committed manifest's connectors from whoever can write the state prefix (they are
declared again through `project.ConnectorSpec`, `desired.model.committed`), so both go through
`check_client_options`, the one check of what a connector may hand a client:

- an allow-list of keys per connector type (and, for files, per format): Spark's own
  options for that source and, for Kafka, the client settings a connector may tune
  (security protocol, SASL mechanism, timeouts, fetch and batch sizes, compression,
  acks, a plain client id); any other key is refused, with a suggestion when it looks
  like a misspelt allowed one;
- whole families refused with their reason: Kafka config providers, any key naming
  classes (`*.class`, `*.classes`, providers), callbacks, interceptors, metric
  reporters, SASL login and OAuth settings, (de)serializers; for files, anything of the
  Hadoop or Spark configuration (`fs.*`, `hadoop.*`, `spark.*`, ...);
- no option value holding `${`;
- a Kafka secret (`kafka.sasl.jaas.config`, passwords, keys) or a file of the machine
  (`kafka.ssl.truststore.location`, key stores, CA file) never in the file: the
  operator's environment holds it, and `env_options` names the variable (`KAFKA_*`).
  `env_options` keys are held to the same families and to the allow-list plus those
  keys; `kafka.bootstrap.servers` is the connector's own field, never a variable.

A refusal is a ValueError (pydantic's way) naming the connector and the option; as
`OptionRefused` it also says which key it is, so the error names that key's line of
pipeline.yaml (`project._validation_error`). Keys are compared case-insensitively, as
Spark compares its own; Kafka's and Hadoop's are case-sensitive, so a key allowed here
in another case is one the client ignores.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from reconciler.desired.settings.connector_options import LOCATION_OPTIONS
from reconciler.support.errors import did_you_mean


class _Spec(Protocol):
    """What the check reads of a connector (`project.ConnectorSpec`)."""

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def format(self) -> str | None: ...

    @property
    def options(self) -> Mapping[str, Any]: ...

    @property
    def env_options(self) -> Mapping[str, str]: ...


class OptionRefused(ValueError):
    """A refused option: the message, and where it is in the connector (`options` or
    `env_options`, then the key), for the line an error names."""

    def __init__(self, message: str, field: str, key: str) -> None:
        super().__init__(message)
        self.location = (field, key)


def _folded(*keys: str) -> dict[str, str]:
    """Keys as Spark compares them (without case), each to its spelling (for suggestions)."""
    return {key.casefold(): key for key in keys}


# -- Kafka ----------------------------------------------------------------------------------

KAFKA_SPARK_OPTIONS = _folded(
    "startingOffsets", "failOnDataLoss", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
    "maxTriggerDelay", "minPartitions", "maxRecordsPerPartition", "groupIdPrefix",
    "includeHeaders", "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs", "kafka.bootstrap.servers")
"""Spark's own options of its Kafka source and sink a connector may set (the servers as
the connector's `bootstrap_servers` or this option, once: `kafka_settings`)."""

KAFKA_CLIENT_OPTIONS = _folded(*(f"kafka.{key}" for key in (
    # security, by name (secrets and files come from the environment: KAFKA_TRUSTED_OPTIONS)
    "security.protocol", "sasl.mechanism", "sasl.kerberos.service.name", "ssl.protocol",
    "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.endpoint.identification.algorithm",
    "ssl.keystore.type", "ssl.truststore.type", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    # who the client says it is
    "client.id", "client.rack", "group.id", "client.dns.lookup",
    # timeouts and back-offs
    "request.timeout.ms", "session.timeout.ms", "default.api.timeout.ms",
    "heartbeat.interval.ms", "max.poll.interval.ms", "connections.max.idle.ms",
    "reconnect.backoff.ms", "reconnect.backoff.max.ms", "retry.backoff.ms",
    "retry.backoff.max.ms", "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms", "metadata.max.age.ms", "metadata.max.idle.ms",
    "delivery.timeout.ms", "max.block.ms",
    # what a consumer fetches
    "fetch.min.bytes", "fetch.max.bytes", "fetch.max.wait.ms", "max.partition.fetch.bytes",
    "max.poll.records", "receive.buffer.bytes", "send.buffer.bytes", "check.crcs",
    "isolation.level", "allow.auto.create.topics",
    # how a producer sends
    "batch.size", "linger.ms", "compression.type", "compression.gzip.level",
    "compression.lz4.level", "compression.zstd.level", "acks", "retries", "buffer.memory",
    "max.request.size", "max.in.flight.requests.per.connection", "enable.idempotence",
)))
"""Kafka client settings a connector may tune, as plain values in pipeline.yaml."""

KAFKA_TRUSTED_OPTIONS = _folded(*(f"kafka.{key}" for key in (
    "sasl.jaas.config", "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
    "ssl.keystore.location", "ssl.truststore.location", "ssl.ca.location", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
)))
"""Secrets and files of the machine that runs the step: only from the operator's
environment, through `env_options` (`kafka.ssl.ca.location` is librdkafka's, for the
offset client: `engine.io.kafka_offsets`)."""

KAFKA_RANGE_OPTIONS = {key.casefold(): why for key, why in (
    ("subscribe", "name the topics in 'topic'"),
    ("subscribePattern", "name the pattern in 'topic_pattern'"),
    ("assign", "name the topics in 'topic'"),
    ("topic", "name the topic in 'topic'"),
    ("endingOffsets", "each step reads to the end offsets it fixes when it starts"),
    ("startingOffsetsByTimestamp", "startingOffsets is earliest or latest"),
    ("startingTimestamp", "startingOffsets is earliest or latest"),
    ("endingOffsetsByTimestamp", "each step reads to the end offsets it fixes"),
    ("endingTimestamp", "each step reads to the end offsets it fixes"),
)}
"""Spark options that say what a connector reads: its own fields and the engine say it."""

_KAFKA_FAMILIES = tuple((re.compile(pattern), why) for pattern, why in (
    (r"config\.providers", "Kafka config providers read environment variables and files "
                           "into client settings"),
    (r"sasl\.login\.", "SASL login settings load classes and reach token endpoints"),
    (r"callback", "a callback handler is a Java class"),
    (r"interceptor", "interceptors are Java classes"),
    (r"reporter", "metric reporters are Java classes"),
    (r"\.class(es)?$|provider", "it names Java classes to load"),
    (r"sasl\.oauthbearer\.|kerberos\.(kinit|min\.time|ticket)",
     "it reaches URLs, files or commands of the machine that runs the step"),
    (r"serializer", "Spark's Kafka connector sets the (de)serializers itself"),
))
_SECRET = re.compile(r"(?i)(jaas|passw|secret|token|credential|\.key$|keystore\.key)")


def kafka_option_key(spec: _Spec, key: str) -> None:
    """An `options` key of a Kafka connector."""
    folded = key.casefold()
    if folded in KAFKA_RANGE_OPTIONS:
        raise OptionRefused(f"connector '{spec.name}': option '{key}' is not allowed: "
                            f"{KAFKA_RANGE_OPTIONS[folded]}", "options", key)
    _refuse_family(spec, "options", key, _KAFKA_FAMILIES)
    if _SECRET.search(key):
        raise OptionRefused(f"connector '{spec.name}': option '{key}' looks like a secret; "
                            "give it through env_options (the name of an environment "
                            "variable starting with KAFKA_)", "options", key)
    if folded in KAFKA_TRUSTED_OPTIONS:
        raise OptionRefused(f"connector '{spec.name}': option '{key}' names a file of the "
                            "machine that runs the step, which only its operator chooses: "
                            "give it through env_options (the name of an environment "
                            "variable starting with KAFKA_)", "options", key)
    if folded not in KAFKA_SPARK_OPTIONS and folded not in KAFKA_CLIENT_OPTIONS:
        raise OptionRefused(
            f"connector '{spec.name}': option '{key}' is not one a kafka connector may set "
            "(Spark's Kafka options and the kafka.* client settings of docs/kafka.md)"
            + did_you_mean(key, sorted({**KAFKA_CLIENT_OPTIONS, **KAFKA_SPARK_OPTIONS}.values())),
            "options", key)


def kafka_env_key(spec: _Spec, key: str) -> None:
    """An `env_options` key: a Kafka client setting whose value the operator's environment
    holds."""
    folded = key.casefold()
    if not folded.startswith("kafka."):
        raise OptionRefused(f"connector '{spec.name}': env_options sets Kafka client options "
                            f"(kafka.<setting>), not '{key}'", "env_options", key)
    if folded == "kafka.bootstrap.servers":
        raise OptionRefused(f"connector '{spec.name}': env_options cannot set '{key}': the "
                            "servers are the connector's bootstrap_servers, shown in the plan",
                            "env_options", key)
    _refuse_family(spec, "env_options", key, _KAFKA_FAMILIES)
    if folded not in KAFKA_CLIENT_OPTIONS and folded not in KAFKA_TRUSTED_OPTIONS:
        raise OptionRefused(
            f"connector '{spec.name}': env_options '{key}' is not a Kafka client setting a "
            "connector may set (docs/kafka.md)"
            + did_you_mean(key, sorted({**KAFKA_CLIENT_OPTIONS, **KAFKA_TRUSTED_OPTIONS}.values())),
            "env_options", key)


# -- files and delta ------------------------------------------------------------------------

FILE_SOURCE_OPTIONS = _folded(
    "maxFilesPerTrigger", "maxBytesPerTrigger", "maxCachedFiles", "discardCachedInputRatio",
    "latestFirst", "fileNameOnly", "maxFileAge", "cleanSource", "sourceArchiveDir",
    "pathGlobFilter", "recursiveFileLookup", "ignoreCorruptFiles", "ignoreMissingFiles",
    "modifiedBefore", "modifiedAfter")
"""Spark's file source options of every format (`cleanSource` and `sourceArchiveDir` only
where the settings allow them: `connector_options`)."""

_TEXT_OPTIONS = ("encoding", "lineSep", "multiLine", "locale", "timeZone", "dateFormat",
                 "timestampFormat", "timestampNTZFormat", "enableDateTimeParsingFallback",
                 "samplingRatio")
FORMAT_OPTIONS = {
    "json": _folded(*_TEXT_OPTIONS, "primitivesAsString", "prefersDecimal", "allowComments",
                    "allowUnquotedFieldNames", "allowSingleQuotes", "allowNumericLeadingZeros",
                    "allowBackslashEscapingAnyCharacter", "allowUnquotedControlChars",
                    "allowNonNumericNumbers", "dropFieldIfAllNull"),
    "csv": _folded(*_TEXT_OPTIONS, "sep", "delimiter", "charset", "quote", "escape", "comment",
                   "header", "enforceSchema", "preferDate", "ignoreLeadingWhiteSpace",
                   "ignoreTrailingWhiteSpace", "nullValue", "nanValue", "positiveInf",
                   "negativeInf", "emptyValue", "maxColumns", "maxCharsPerColumn",
                   "charToEscapeQuoteEscaping", "unescapedQuoteHandling"),
    "parquet": _folded("mergeSchema", "datetimeRebaseMode", "int96RebaseMode"),
}
"""Spark's reader options of each format of a `files` connector."""

ENGINE_FILE_OPTIONS = _folded("mode", "columnNameOfCorruptRecord")
"""What the engine sets on every json and csv read (`engine.io.input_batch`): malformed
rows are kept in a column of its own and handled as `on_error` and `on_bad_input` say."""

_FILE_FAMILIES = (
    (re.compile(r"^(fs|hadoop|spark|mapreduce|mapred|dfs|yarn|io|ipc|net|parquet|avro|orc)\."),
     "Spark copies a file source's options into the Hadoop configuration, where keys like "
     "this one choose file systems, endpoints, credentials and classes: that is the "
     "operator's configuration"),
)
_LOCATION_REASON = ("the connector's own 'path' says where it reads, and its offsets are kept "
                    "where the layout puts them")


def _path_key(spec: _Spec, key: str) -> None:
    """What no connector that reads a path may set: where it reads, or a family of options
    that reaches the machine."""
    if key.casefold() in LOCATION_OPTIONS:
        raise OptionRefused(f"connector '{spec.name}': option '{key}' is not allowed: "
                            f"{_LOCATION_REASON}", "options", key)
    _refuse_family(spec, "options", key, _FILE_FAMILIES)


def no_option_key(spec: _Spec, key: str, why: str = "") -> None:
    """An `options` key of a connector whose type takes none (a delta connector's: `why`)."""
    _path_key(spec, key)
    raise OptionRefused(f"connector '{spec.name}': option '{key}' is not allowed: a "
                        f"{spec.type} connector takes no options{why}", "options", key)


def file_option_key(spec: _Spec, key: str) -> None:
    """An `options` key of a files connector."""
    _path_key(spec, key)
    folded = key.casefold()
    if folded in ENGINE_FILE_OPTIONS:
        raise OptionRefused(f"connector '{spec.name}': option '{key}' is the engine's: "
                            "on_error and on_bad_input say what happens to malformed rows",
                            "options", key)
    allowed = {**FILE_SOURCE_OPTIONS, **FORMAT_OPTIONS.get(spec.format or "", {})}
    if folded not in allowed:
        raise OptionRefused(
            f"connector '{spec.name}': option '{key}' is not a Spark reader option of "
            f"{spec.format} files a connector may set"
            + did_you_mean(key, sorted(allowed.values())), "options", key)


# -- the one check --------------------------------------------------------------------------


OptionKey = Callable[[Any, str], None]
"""A connector type's check of one option key (`kafka_option_key`, `file_option_key`, ...)."""


def check_client_options(spec: _Spec, option_key: OptionKey,
                         env_key: OptionKey | None = None) -> None:
    """Refuse (`OptionRefused`, naming the connector and the option) the first option or
    env_option of `spec` that is not a setting its connector type may hand its client: its
    type's declaration (`connector_kinds`) says how each key is checked; only a type with
    `env_key` takes env_options (the others refuse them before this check)."""
    for key, value in spec.options.items():
        option_key(spec, key)
        if "${" in str(value):
            raise OptionRefused(
                f"connector '{spec.name}': option '{key}': a value holding '${{' is not "
                "allowed (Kafka's config providers, Hadoop and Spark read environment "
                "variables and files through it)", "options", key)
    if env_key is not None:  # a type without one refuses env_options in its own check
        for key in spec.env_options:
            env_key(spec, key)


def _refuse_family(spec: _Spec, field: str, key: str,
                   families: tuple[tuple[re.Pattern[str], str], ...]) -> None:
    folded = key.casefold()
    for pattern, why in families:
        if pattern.search(folded):
            what = "option" if field == "options" else "env_options"
            raise OptionRefused(f"connector '{spec.name}': {what} '{key}' is not allowed: "
                                f"{why}", field, key)
