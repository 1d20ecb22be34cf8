"""The engine an operation works with: Spark and Delta storage, started only when an
operation first needs them, with the jars (S3A, Kafka) the project reaches, on the warm
local server (`engine.spark.warm`) when one may be used, else where the flags or
reconcile.yaml say, else embedded. Kept apart from `operations`, which takes it as a
parameter, so the commands' Spark is decided in one place."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from reconciler.desired.settings.project import Project
from reconciler.engine.spark.jars import needs_s3a
from reconciler.engine.spark.project_jars import pipelines_mention
from reconciler.state.layout import Layout
from reconciler.state.program import CommittedProgram
from reconciler.state.reader import pipeline_layout
from reconciler.state.relations import RelationRecord
from reconciler.support.progress import Reporter, no_progress
from reconciler.support.redaction import redact_url


def reaches_s3(project: Project) -> bool:
    """Whether a session for `project` may read or write S3 through S3A: its storage is
    there, or a pipeline.yaml names an `s3a://` or `s3://` location (a connector's path),
    found in its text so that a template variable holding one counts too."""
    return needs_s3a(project.settings.storage) or _pipelines_mention(project,
                                                                     ("s3a://", "s3://"))


def reaches_kafka(project: Project) -> bool:
    """Whether a session for `project` needs Spark's Kafka connector: a pipeline.yaml
    says `kafka` (found in its text as `reaches_s3` finds S3)."""
    return _pipelines_mention(project, ("kafka",))


def _pipelines_mention(project: Project, words: tuple[str, ...]) -> bool:
    """Through the checkout's safe reader (`project_jars.pipelines_mention`): a pipeline.yaml it
    refuses or cannot read is skipped here, and loading the pipeline says what is wrong."""
    return pipelines_mention(project.root, project.pipeline_dirs.values(), words)


@dataclass
class Engine:
    """Spark and Delta storage, started only when an operation needs them."""

    project: Project
    master: str | None = None
    remote: str | None = None
    report: Reporter = no_progress
    debug: bool = False  # Spark logs warnings too (on stderr), not only errors

    @cached_property
    def spark(self) -> Any:
        from reconciler.engine.spark.session import get_spark
        from reconciler.engine.spark.warm import warm_server

        s3a, kafka = reaches_s3(self.project), reaches_kafka(self.project)
        warm = None if self.master or self.remote else warm_server(self.project, s3a, kafka)
        self.report(*(warm.progress if warm else ("start Spark", self.target)))  # a JVM
        return get_spark(self.project.settings.spark, master=self.master, s3a=s3a, kafka=kafka,
                         remote=warm.client_url if warm else self.remote,
                         log_level="WARN" if self.debug else "ERROR")

    @property
    def target(self) -> str:
        """Where Spark runs, as a person may see it: the flags, else reconcile.yaml, else
        embedded Spark; Connect URLs without credentials or parameters."""
        settings = self.project.settings.spark
        master, remote = ((self.master, self.remote) if self.master or self.remote
                          else (settings.master, settings.remote))
        if remote:
            return redact_url(remote)
        return master or "embedded (local)"

    @property
    def local(self) -> bool:
        """Whether Spark runs on this machine: embedded, or the warm server standing in for
        it (its settings are an embedded session's: 2 shuffle partitions)."""
        settings = self.project.settings.spark
        master, remote = ((self.master, self.remote) if self.master or self.remote
                          else (settings.master, settings.remote))
        return not remote and (master or "local").startswith("local")

    @cached_property
    def storage(self) -> Any:
        from reconciler.engine.delta.storage import DeltaStorage

        return DeltaStorage(self.spark)

    def runtime(self, pipeline: str, program: CommittedProgram,
                relations: dict[str, RelationRecord], layout: Layout | None = None) -> Any:
        """A runtime over `relations`; what it writes goes under `layout` (a pull-request
        environment's folder), by default the pipeline's own."""
        from reconciler.engine.runtime import PipelineRuntime

        self.report("prepare", pipeline)
        layout = layout or pipeline_layout(self.project, pipeline)
        return PipelineRuntime(self.spark, self.storage, layout, program, dict(relations),
                               project_dir=self.project.root,
                               report=self.report)
