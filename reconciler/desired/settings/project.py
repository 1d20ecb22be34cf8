"""The user's project files: `reconcile.yaml` and `pipelines/<name>/pipeline.yaml`.

Pydantic does the validation; this module turns its errors into one line that
names the file and line. A pipeline's SQL files are found and rendered as templates
by `desired.parsing.pipeline_sql`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from reconciler.desired.settings.client_options import OptionRefused
from reconciler.desired.settings.connector_kinds import KINDS, kind_names
from reconciler.desired.settings.connector_roles import NAME, OPTIONS, handling, identity
from reconciler.desired.settings.connector_shape import check_connector_shape
from reconciler.desired.settings.documents import (
    YamlDocument,
    load_yaml,
    outside_reason,
    refuse_outside,
)
from reconciler.desired.settings.environments import EnvironmentSettings
from reconciler.desired.settings.kafka_settings import ENV_OPTION_PATTERN
from reconciler.desired.settings.setting_values import BootstrapPolicy, duration_seconds
from reconciler.support.errors import ReconcileError, did_you_mean
from reconciler.support.locations import resolve_path
from reconciler.support.redaction import shown_value

PROJECT_FILE = "reconcile.yaml"
PIPELINE_FILE = "pipeline.yaml"
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


CONF_PREFIXES = (
    "spark.sql.", "spark.executor.", "spark.driver.", "spark.memory.", "spark.default.",
    "spark.dynamicAllocation.", "spark.shuffle.", "spark.network.", "spark.task.",
    "spark.cores.", "spark.locality.", "spark.scheduler.", "spark.speculation",
    "spark.kryoserializer.", "spark.io.", "spark.rdd.", "spark.broadcast.", "spark.storage.",
    "spark.files.maxPartitionBytes", "spark.files.openCostInBytes", "spark.hadoop.fs.s3a.",
    "spark.databricks.delta.", "spark.delta.", "spark.log.level", "spark.app.name",
)
"""`spark.conf` keys a project may set: tuning, memory, storage clients. Anything that
names code to load or an environment to pass is refused (see `_REFUSED_CONF`)."""

_REFUSED_CONF = re.compile(
    r"(?i).*(extraJavaOptions|defaultJavaOptions|extraClassPath|extraLibraryPath|"
    r"\.impl$|provider|factory|class|plugins|extensions|listeners|signer|signing|delegation|"
    r"handler|interceptor|reporter|shuffle\.manager$|"
    r"^spark\.sql\.catalog\.|^spark\.sql\.variable\.|^spark\.sql\.warehouse\.|"
    r"^spark\.sql\.(hive\.)?metastore|^spark\.driver\.resource|^spark\.executor\.resource|"
    r"^spark\.sql\.streaming\.stateStore\.providerClass|python|^spark\.sql\.sources\.).*")
"""Keys that load a class, a jar, an agent or a Python module, pass JVM flags or
environment, or point Spark at another catalog: each can run code with the
pipeline's credentials (`spark.driver.extraJavaOptions=-javaagent:...`). S3A's own
(`spark.hadoop.fs.s3a.*`) include credential providers, custom signers and signing
algorithms, delegation token bindings, audit handlers and the AWS SDK's interceptors:
classes too."""

_CLASS_NAME = re.compile(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)+\.[A-Z][\w$]*")
"""A value that names a Java class (`org.example.Codec`): what a key outside the list above
loads when it takes a class as well as a short name (`spark.io.compression.codec`)."""


class SparkSettings(_Strict):
    """Where Spark runs: embedded `local[*]` unless `master` or `remote` says otherwise."""

    master: str | None = None
    remote: str | None = None
    conf: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_target(self) -> SparkSettings:
        if self.master and self.remote:
            raise ValueError("set either spark.master or spark.remote, not both")
        return self


def check_project_conf(settings: ProjectSettings, document: YamlDocument, shown: str) -> None:
    """`spark.conf` in a project file is limited to `CONF_PREFIXES` minus `_REFUSED_CONF`,
    with no value holding `${` (Spark expands `${env:NAME}` in its settings, Hadoop
    `${env.NAME}`) or naming a Java class.

    The file is in git, so a pull request can change it; what only an operator may
    set (JVM options, jars, the Delta extension) belongs in the cluster's own
    `spark-defaults.conf` or `SPARK_SUBMIT_OPTS`, which no pull request reaches.
    """
    for key, value in settings.spark.conf.items():
        line = document.line_of(("spark", "conf", key))
        if _REFUSED_CONF.fullmatch(key) or not key.startswith(CONF_PREFIXES):
            raise ReconcileError(
                f"spark.conf key '{key}' is not allowed in {PROJECT_FILE}: only tuning "
                "settings; what loads code, passes JVM options or environment, or changes "
                "the catalog belongs in the cluster's spark-defaults.conf",
                file=shown, line=line)
        if "${" in f"{key}{value}":
            raise ReconcileError(
                f"spark.conf key '{key}': a value holding '${{' is not allowed in "
                f"{PROJECT_FILE}: Spark and Hadoop read environment variables and system "
                "properties through it", file=shown, line=line)
        if _CLASS_NAME.fullmatch(str(value)):
            raise ReconcileError(
                f"spark.conf key '{key}': a value naming a Java class is not allowed in "
                f"{PROJECT_FILE}: what loads code belongs in the cluster's spark-defaults.conf",
                file=shown, line=line)


class RetentionSettings(_Strict):
    """What old state to keep (see `engine/delta/retention.py`): the files the last `serials`
    manifests can read, and anything younger than `min_age` (`90s`, `30m`, `1h`, `2d`);
    a step runs the pass when its serial is a multiple of `every` (an apply and `state gc`
    always do)."""

    serials: int = Field(default=10, ge=1)
    min_age: str = "1h"
    every: int = Field(default=10, ge=1)
    """Steps between passes. A pass opens every retained version's Delta log (58 to 76 opens,
    0.45 to 0.71 s for the step bench's seven tables in three profiled steps), a fixed cost a
    1,000-row step paid each
    time although, with `min_age` an hour, it seldom had anything to delete; storage holds
    at most `every` more steps' replaced files in exchange."""

    @model_validator(mode="after")
    def _check_age(self) -> RetentionSettings:
        if duration_seconds(self.min_age) is None:
            raise ValueError(f"retention.min_age '{self.min_age}' is not a duration "
                             "(e.g. 90s, 30m, 1h, 2d)")
        return self

    @property
    def min_age_seconds(self) -> float:
        seconds = duration_seconds(self.min_age)
        assert seconds is not None
        return seconds


MASK_ENTRY = r"^([A-Za-z_][A-Za-z0-9_]*\.)?[A-Za-z_][A-Za-z0-9_]*$"
"""A `preview.mask` entry: `column` (that column of every relation) or `relation.column`."""


class PreviewSettings(_Strict):
    """The data preview (`plan --preview`, the Action's `preview` input). In the GitHub Action
    these come from the trusted branch's reconcile.yaml, like every setting.

    `samples`: sample rows of each kind (`--preview rows`). `mask`: source columns whose
    values a sample never shows, nor any output column computed from them, by column
    lineage (`desired.model.masking`). `timeout_seconds` and `max_jobs`: the bound of one
    preview (`engine.preview.bound`), since it runs a pull request's unreviewed SQL on
    the trusted Spark target; once either runs out, the running jobs are cancelled and
    the rest of the views say so, and the plan stands."""

    samples: int = Field(default=5, ge=0, le=50)
    mask: list[Annotated[str, Field(pattern=MASK_ENTRY)]] = Field(default_factory=list)
    timeout_seconds: float = Field(default=300, gt=0, le=86400)
    max_jobs: int = Field(default=200, ge=1)


class TestSettings(_Strict):
    """View tests in the GitHub Action: with `required`, `/reconcile apply` refuses while a
    test of a pipeline it would apply fails (or cannot run). Read from the trusted branch's
    reconcile.yaml there, so a pull request cannot turn it off for itself.
    `timeout_seconds` bounds the view tests' run in the Action, as the preview's is bounded
    (they run a pull request's SQL too): past it, they are stopped and reported as not run."""

    required: bool = True
    timeout_seconds: float = Field(default=300, gt=0, le=86400)


class ProjectSettings(_Strict):
    """`reconcile.yaml`; every key is optional."""

    backend: str = ".reconcile/state"
    # Seconds a run's lock lasts unless renewed (`state_backends.leases`): a killed run's
    # lock is taken over after at most this long.
    lock_lease_seconds: float = Field(default=60, ge=5, le=86400)
    storage: str = ".reconcile/data"
    spark: SparkSettings = Field(default_factory=SparkSettings)
    pipelines: str = "pipelines"
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    # Connector options that make Spark delete or move the files it has read
    # (`cleanSource`, `sourceArchiveDir`) are refused unless this is true (spec.options).
    allow_file_cleanup: bool = False
    preview: PreviewSettings = Field(default_factory=PreviewSettings)
    tests: TestSettings = Field(default_factory=TestSettings)
    environments: EnvironmentSettings | None = None  # pull-request environments, opt-in


def settings_summary(settings: ProjectSettings) -> dict[str, str]:
    """Each setting of `reconcile.yaml` as a plan may show it (`spark.conf.<key>`, `storage`).

    Plans and manifests carry these, so a change of where state lives or how Spark
    runs is part of what an approval covers and is shown old -> new; secret-looking
    values are hashed and URLs lose their credentials and parameters.
    """
    flat: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), item)
        elif value is not None:
            flat[prefix] = shown_value(prefix, value)

    # A preview's samples and masks, and whether tests gate the Action's apply, change what
    # a plan shows or who may apply, not what an apply does; a lock's lease, how long a
    # killed run blocks the next; environments, what reviewers see, not what production does.
    walk("", settings.model_dump(exclude={"pipelines", "preview", "tests",
                                          "lock_lease_seconds", "environments"}))
    return dict(sorted(flat.items()))


class ConnectorSpec(_Strict):
    """An input (`table`) or output (`view`, or a table) connector of a pipeline.

    `files` and `delta` connectors name a `path`; a `kafka` connector names its
    `bootstrap_servers` and a `topic` (a name, or a list of names as an input) or, as an
    input, a `topic_pattern`, and reads `format: json` (each message's value, parsed
    against the table's columns) or `raw` (the record's own columns). Its Kafka options
    are Spark's (`startingOffsets`, `maxOffsetsPerTrigger`, `failOnDataLoss`, `kafka.*`
    client settings); secrets come from the environment (`env_options`), never from
    this file (`desired.settings.kafka_settings`). Every connector's options are held to an
    allow-list of what its type may hand a client library (`desired.settings.client_options`)."""

    # Each field's role (`desired.settings.connector_roles`): what the connector reads or writes
    # (identity: a change resets it) or how (handling: an apply keeps its offsets).
    name: Annotated[str, NAME] = Field(pattern=NAME_PATTERN)
    table: Annotated[str | None, identity("direction", "relation",
                                          why="the table it appends to")] = None
    view: Annotated[str | None, identity("direction", "relation",
                                         why="the view it sends")] = None
    # One of `connector_kinds.KINDS` (files, delta, kafka), each declared once there.
    type: Annotated[str, identity("type")]
    format: Annotated[Literal["json", "csv", "parquet", "raw"] | None, identity(
        "format", why="how bytes become rows: the same input gives other rows")] = None
    path: Annotated[str | None, identity("path")] = None
    options: Annotated[dict[str, str | int | float | bool], OPTIONS] = Field(
        default_factory=dict)
    on_error: Annotated[Literal["fail", "quarantine"], handling(
        "on_error", why="what happens to a malformed row: the rows read stay the same")] = "fail"
    on_bad_input: Annotated[Literal["fail", "skip"], handling(
        "on_bad_input", omitted=True, why="whether malformed rows are dropped")] = "fail"
    on_reset: Annotated[Literal["refuse", "reread"], handling(
        "on_reset", omitted=True,
        why="whether a reset may append again what its table keeps")] = "refuse"
    snapshot_on_bootstrap: Annotated[bool, handling(
        "snapshot_on_bootstrap", omitted=True,
        why="what a later bootstrap sends an output; its steps send the same changes")] = False
    # inputs: rows carry `_op` (insert/delete), deletions applied
    changes: Annotated[bool, identity("changes", omitted=True,
                                      why="whether rows carry _op")] = False
    bootstrap_servers: Annotated[str | None, identity(
        "kafka", omitted=True, why="another cluster holds other messages")] = Field(
        default=None, min_length=1)
    topic: Annotated[str | list[str] | None, identity("kafka", omitted=True)] = None
    topic_pattern: Annotated[str | None, identity("kafka", omitted=True)] = Field(
        default=None, min_length=1)
    env_options: Annotated[dict[str, Annotated[str, Field(pattern=ENV_OPTION_PATTERN)]],
                           handling("env_options", omitted=True,
                                    why="where the client's secrets come from")] = Field(
        default_factory=dict)

    @field_validator("type")
    @classmethod
    def _declared_type(cls, value: str) -> str:
        if value not in KINDS:  # told as a literal's error is: "type: 'x' is not one of ..."
            raise PydanticCustomError("literal_error", "Input should be {expected}",
                                      {"expected": kind_names()})
        return value

    @model_validator(mode="after")
    def _check_shape(self) -> ConnectorSpec:
        check_connector_shape(self)
        return self

    @property
    def direction(self) -> Literal["input", "output"]:
        return "input" if self.table is not None else "output"

    @property
    def relation(self) -> str:
        return (self.table if self.table is not None else self.view) or ""


class PublishSpec(_Strict):
    """`publish:` in pipeline.yaml: after each commit, each materialized view and table is a
    view in the session's catalog, `<database>.<name>`, pinned to its committed version
    (`engine/publish.py`); `exclude` names relations left out."""

    database: str = Field(pattern=NAME_PATTERN)
    exclude: list[Annotated[str, Field(pattern=NAME_PATTERN)]] = Field(default_factory=list)


class PipelineSpec(_Strict):
    """`pipeline.yaml`: the pipeline's name, SQL files, template vars and connectors."""

    name: str = Field(pattern=NAME_PATTERN)
    sql: list[str] | None = None
    vars: dict[str, Any] = Field(default_factory=dict)
    bootstrap_policy: BootstrapPolicy = "await_approval"
    refresh: Literal["incremental", "incremental_strict", "auto", "full"] = "auto"
    # What a step does with a table changed outside the reconciler (`operations.drift`).
    on_drift: Literal["refuse", "adopt", "repair"] = "refuse"
    connectors: list[ConnectorSpec] = Field(default_factory=list)
    publish: PublishSpec | None = None
    # {old name: new name}: a rename that comes with an edit keeps the relation's state.
    renamed: dict[Annotated[str, Field(pattern=NAME_PATTERN)],
                  Annotated[str, Field(pattern=NAME_PATTERN)]] = Field(default_factory=dict)


@dataclass(frozen=True)
class Project:
    """A user's project: settings plus the folders of its pipelines."""

    root: Path
    settings: ProjectSettings
    pipeline_dirs: dict[str, Path]

    def resolve(self, location: str) -> str:
        """A folder or URL from `reconcile.yaml`, as `layout.resolve_path` reads it."""
        return resolve_path(location, self.root)


def display(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def _validation_error(error: ValidationError, document: YamlDocument, shown: str,
                      model: type[BaseModel]) -> ReconcileError:
    first = error.errors()[0]
    location = tuple(first["loc"])
    dotted = ".".join(str(part) for part in location)
    kind = first["type"]
    if kind == "extra_forbidden":
        key = str(location[-1])
        message = f"unknown key '{key}'" + did_you_mean(key, _keys_at(model, location[:-1]))
    elif kind == "missing":
        message = f"missing required key '{dotted}'"
    elif kind == "value_error":
        message = str(first["msg"]).removeprefix("Value error, ")
        refused = (first.get("ctx") or {}).get("error")
        if isinstance(refused, OptionRefused):  # that option's line, not the connector's
            location = (*location, *refused.location)
    elif kind == "string_pattern_mismatch":
        rule = _PATTERN_RULES.get((first.get("ctx") or {}).get("pattern", ""),
                                  "is not a valid name (letters, digits, underscore)")
        message = f"{dotted}: '{first['input']}' {rule}"
    elif kind in ("literal_error", "enum"):  # name the bad value, not only the good ones
        expected = (first.get("ctx") or {}).get("expected", "")
        message = f"{dotted}: '{first['input']}' is not one of {expected}"
    else:
        message = f"{dotted}: {first['msg']}" if dotted else str(first["msg"])
    return ReconcileError(message, file=shown, line=document.line_of(location))


_PATTERN_RULES = {
    ENV_OPTION_PATTERN: "is not an environment variable a Kafka option may read: its name must "
                        "start with KAFKA_ (then upper-case letters, digits, underscores), so "
                        "that no other secret of the runner can be sent to a broker",
}
"""What a value of a pattern other than a name's must be, said in words."""


def _keys_at(model: type[BaseModel], location: tuple[Any, ...]) -> list[str]:
    """The keys the mapping at `location` (keys and list indexes from `model`) may have, for a
    suggestion when one is misspelt; none where the path leaves the models (`vars`)."""
    current: Any = model
    for part in [part for part in location if not isinstance(part, int)]:  # not list items
        field = current.model_fields.get(part)
        options = [field.annotation] if field is not None else []
        while options and not (isinstance(options[0], type) and issubclass(options[0], BaseModel)):
            options = [*options[1:], *get_args(options[0])]  # inside `list[X]`, `X | None`
        if not options:
            return []
        current = options[0]
    return list(current.model_fields)


def _validate(model: type[BaseModel], document: YamlDocument, shown: str) -> Any:
    if not isinstance(document.data, dict):
        raise ReconcileError("expected a mapping of keys at the top level", file=shown, line=1)
    try:
        return model.model_validate(document.data)
    except ValidationError as error:
        raise _validation_error(error, document, shown, model) from None


def project_settings(document: YamlDocument, shown: str) -> ProjectSettings:
    """`reconcile.yaml`'s settings, validated and held to the `spark.conf` allow-list: the
    same checks whether the file is the checkout's or the default branch's (the Action)."""
    settings: ProjectSettings = _validate(ProjectSettings, document, shown)
    check_project_conf(settings, document, shown)
    return settings


def load_project(root: Path) -> Project:
    """Read `reconcile.yaml` (optional) and find every `pipelines/<name>/pipeline.yaml`."""
    root = root.resolve()
    if not root.is_dir():
        raise ReconcileError("project folder does not exist", file=display(root))
    settings_path = root / PROJECT_FILE
    settings = ProjectSettings()
    document = None
    refuse_outside(settings_path, root, display(settings_path))
    if settings_path.exists():
        document = load_yaml(settings_path, display(settings_path))
        settings = project_settings(document, display(settings_path))
    pipelines_root = root / settings.pipelines
    if (why := outside_reason(pipelines_root, root)) is not None:
        raise ReconcileError(f"pipelines folder '{settings.pipelines}' {why}",
                             file=display(settings_path),
                             line=document.line_of(("pipelines",)) if document else None)
    if not pipelines_root.is_dir():
        if document is not None and "pipelines" in document.data:
            raise ReconcileError(f"pipelines folder '{settings.pipelines}' does not exist",
                                 file=display(settings_path),
                                 line=document.line_of(("pipelines",)))
        raise ReconcileError("no pipelines folder (set 'pipelines' in reconcile.yaml)",
                             file=display(pipelines_root))
    pipeline_dirs = {}
    for spec_file in sorted(pipelines_root.glob(f"*/{PIPELINE_FILE}")):
        refuse_outside(spec_file, root, display(spec_file))
        pipeline_dirs[spec_file.parent.name] = spec_file.parent
    return Project(root=root, settings=settings, pipeline_dirs=pipeline_dirs)


def load_pipeline_spec(directory: Path) -> tuple[PipelineSpec, YamlDocument, str]:
    """`pipeline.yaml` validated, without its SQL: (the spec, its document, its shown path)."""
    spec_path = directory / PIPELINE_FILE
    shown = display(spec_path)
    document = load_yaml(spec_path, shown)
    return _validate(PipelineSpec, document, shown), document, shown


