"""Pull-request environments: a change's views, computed from production's state, by name.

`reconcile env create|update -p P --name NAME` (and the Action, for a pull request) builds
an environment of pipeline P for the program in the checkout:

* **What it computes.** The plan of the program against production's committed manifest
  (the environment's *base serial*) decides which relations the change adds or modifies.
  Only those are computed, by the same bootstrap an apply runs
  (`engine.bootstrap.recompute.bootstrap`: a maintained view starts its per-group state
  too), over every other relation read in place at the version the base serial pins. No
  input is read, no connector starts, nothing is sent to an output.
* **Where.** The environment's own tables go under its folder,
  `<environments.storage>/<name>/<pipeline>/...`, never under production's storage root
  (the settings refuse one inside the other), and nothing of production is written: not
  its manifest, not a Delta version of its tables. Its record (`state.environments`) goes
  to the state backend under the pipeline's lock, which retention holds too: while it
  exists, retention keeps every file the base serial pins.
* **How it is read.** Every materialized relation of the program is a view of the catalog
  database `<database_prefix>_<name>`, at a pinned version: the environment's tables at
  theirs, the others at the base serial's, so every query sees one snapshot (an in-memory
  catalog, which ends with the command, publishes nothing and says so).
* **Updates.** An update stays on the base serial and diffs the program with the one the
  environment was last built from: only what changed since is computed again.
* **Bounds.** The SQL is a pull request's, unreviewed: the build runs under the preview's
  time limit and job budget (`preview:` in `reconcile.yaml`); past either, the build
  stops, its record is not changed, and the catalog keeps pointing at the last build.

A change that modifies or renames a production table is refused (its evolution is the
apply's to decide, and would write the table); new tables are created empty in the
environment.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from reconciler.desired.analysis.lineage import view_lineage
from reconciler.desired.model.program import Program
from reconciler.desired.settings.environments import EnvironmentSettings, check_environment_name
from reconciler.desired.settings.project import Project
from reconciler.operations.engine import Engine
from reconciler.operations.publication import IN_MEMORY_NOTICE, materialized_relations
from reconciler.plan.diff import ProgramDiff, diff_programs
from reconciler.plan.document import PipelinePlan, plan_pipeline
from reconciler.state.environments import Environment, environments_document, environments_of
from reconciler.state.layout import Layout
from reconciler.state.manifest import Manifest, utc_now
from reconciler.state.program import CommittedProgram
from reconciler.state.reader import pipeline_layout, read_manifest
from reconciler.support.errors import ReconcileError
from reconciler.support.locations import is_url
from state_backends import StateBackend


@dataclass(frozen=True)
class Built:
    """What a build did: the environment as recorded, and what it computed this time."""

    environment: Environment
    computed: tuple[str, ...]
    published: bool

    def summary(self) -> str:
        held = ", ".join(sorted(self.environment.relations)) or "no change of its own"
        done = ", ".join(self.computed) or "nothing (no definition changed)"
        where = (self.environment.database if self.published
                 else f"{self.environment.database} (not published: in-memory catalog)")
        return (f"environment {self.environment.name}: {where}, production serial "
                f"{self.environment.base_serial}; holds {held}; computed {done}")


def environment_settings(project: Project) -> EnvironmentSettings:
    """`environments:` of reconcile.yaml, or the one-line error saying how to enable them."""
    settings = project.settings.environments
    if settings is None:
        raise ReconcileError("pull-request environments are not enabled: reconcile.yaml has no "
                             "`environments: {database_prefix: ..., storage: ...}`")
    storage, production = (project.resolve(settings.storage).rstrip("/"),
                           project.resolve(project.settings.storage).rstrip("/"))
    if _nested(storage, production) or _nested(production, storage):
        raise ReconcileError(f"environments.storage '{settings.storage}' must be a folder of "
                             f"its own, not production's storage '{project.settings.storage}' "
                             "nor inside or around it")
    return settings


def environment_folder(project: Project, settings: EnvironmentSettings, name: str) -> str:
    """`<environments.storage>/<name>`: the root of the environment's `Layout`."""
    return f"{project.resolve(settings.storage).rstrip('/')}/{check_environment_name(name)}"


def build_environment(project: Project, backend: StateBackend, program: Program, name: str,
                      engine: Engine, *, existing: bool | None = None) -> Built:
    """Create or update environment `name` of `program`'s pipeline. `existing`: True for an
    update (refused when there is none), False for a create (refused when there is one),
    None for either (the Action's, on every push)."""
    settings = environment_settings(project)
    pipeline = program.pipeline
    layout = pipeline_layout(project, pipeline)
    manifest, _ = read_manifest(backend, pipeline, layout)
    if manifest is None:
        raise ReconcileError(f"pipeline '{pipeline}' is not deployed: an environment reads "
                             "production's state (apply it first)")
    before = recorded_environments(backend, pipeline).get(name)
    if existing is True and before is None:
        raise ReconcileError(f"pipeline '{pipeline}' has no environment '{name}' "
                             "(reconcile env create)")
    if existing is False and before is not None:
        raise ReconcileError(f"pipeline '{pipeline}' has an environment '{name}' already "
                             "(reconcile env update, or destroy it first)")
    base = manifest if before is None else _history(backend, pipeline, layout,
                                                    before.base_serial)
    plan = plan_pipeline(program, base, None)
    _check_change(pipeline, plan.diff, plan.refusals)
    root = environment_folder(project, settings, name)
    # An update diffs against the environment's last build; a create's diff is the plan's.
    diff = plan.diff if before is None else diff_programs(
        before.program, plan.diff.new,
        program.analysis.lookup if program.analysis else view_lineage)
    _check_change(pipeline, diff, ())
    relations = {**base.relations, **(before.relations if before else {})}
    runtime = engine.runtime(pipeline, CommittedProgram.of(_without_connectors(plan.diff.new)),
                             relations, layout=Layout(root, pipeline))
    computed = _bounded_bootstrap(project, engine, runtime, diff, base.serial)
    owned = {relation: record for relation, record in runtime.relations.items()
             if record.path.startswith(f"{root}/")}
    now = utc_now()
    environment = Environment(
        name=name, pipeline=pipeline, database=settings.database(name), root=root,
        lineage=f"{base.lineage}.{name}", base_serial=base.serial,
        desired_fingerprint=plan.desired_fingerprint, program=plan.diff.new, relations=owned,
        created=before.created if before else now, updated=now)
    published = _publish(engine, environment, {
        relation: (record.path, record.version) for relation, record in runtime.relations.items()
        if relation in materialized_relations(plan.diff.new)})
    with backend.locked(pipeline, "env"):
        recorded = recorded_environments(backend, pipeline)
        recorded[name] = environment
        backend.write_environments(pipeline, environments_document(recorded))
    if before is not None:
        _discard(engine, before, environment)
    return Built(environment, tuple(computed), published)


def destroy_environment(project: Project, backend: StateBackend, pipeline: str, name: str,
                        engine: Engine) -> Environment | None:
    """Drop environment `name`'s catalog views and database, delete its folder, then its
    record (so a retention pass keeps its pins until its files are gone); None when there
    is none (a pull request closed without one)."""
    check_environment_name(name)
    environment = recorded_environments(backend, pipeline).get(name)
    if environment is None:
        return None
    _check_record(project, environment)
    from reconciler.engine.delta.files import Collected, FileStore  # pyarrow: env only
    from reconciler.engine.publish import catalog_is_kept, unpublish

    if catalog_is_kept(engine.spark):
        unpublish(engine.spark, environment.database, environment.lineage)
        _drop_if_empty(engine.spark, environment.database)
    FileStore.for_root(environment.root).remove_tree(environment.root, False, Collected())
    with backend.locked(pipeline, "env"):
        recorded = recorded_environments(backend, pipeline)
        recorded.pop(name, None)
        backend.write_environments(pipeline, environments_document(recorded))
    return environment


def promotable(project: Project, backend: StateBackend, plan: PipelinePlan,
               manifest: Manifest) -> tuple[Environment, Manifest] | None:
    """An environment an apply of `plan` may promote, with production's manifest at its base
    serial: one built from the same program (`desired_fingerprint`) over a production
    program that has not changed since (steps only), holding every view the plan computes.
    None when there is none: the apply computes its views."""
    computed = {name for name, change in plan.diff.views.items()
                if change in ("added", "modified")}
    if not computed:
        return None
    for environment in recorded_environments(backend, manifest.pipeline).values():
        if not _is_current_record(project, environment) \
                or environment.desired_fingerprint != plan.desired_fingerprint \
                or not computed <= set(environment.relations) \
                or environment.base_serial > manifest.serial:
            continue
        base = _history(backend, manifest.pipeline, pipeline_layout(project, manifest.pipeline),
                        environment.base_serial)
        if base.program == manifest.program and base.lineage == manifest.lineage:
            return environment, base
    return None


def recorded_environments(backend: StateBackend, pipeline: str) -> dict[str, Environment]:
    """The pipeline's environment records, checked (`state.environments`)."""
    return environments_of(backend.read_environments(pipeline),
                           f"{backend.url}/{pipeline}/environments.json")


def _check_record(project: Project, environment: Environment) -> None:
    """Refuse a record whose folder or database is not the one the settings give its name:
    the state backend's writers are not trusted with where files are deleted or promoted
    from, nor with which database is dropped."""
    if not _is_current_record(project, environment):
        raise ReconcileError(f"environment '{environment.name}': its record names a folder or "
                             "database the settings do not give it (environments: in "
                             "reconcile.yaml); not touching them")


def _is_current_record(project: Project, environment: Environment) -> bool:
    """Whether the record's folder and database are the ones the settings give its name."""
    settings = environment_settings(project)
    return (environment.root == environment_folder(project, settings, environment.name)
            and environment.database == settings.database(environment.name))


def _history(backend: StateBackend, pipeline: str, layout: Layout, serial: int) -> Manifest:
    """The manifest production committed at `serial`, its paths checked against the layout."""
    where = f"{backend.url}/{pipeline}/history/{serial}.json"
    return Manifest.from_document(backend.read_history(pipeline, serial), where).resolved(
        layout, where)


def _check_change(pipeline: str, diff: ProgramDiff, refusals: tuple[str, ...]) -> None:
    """Refuse what an environment cannot hold without writing production: a refused plan, a
    modified or renamed table (the apply decides its evolution)."""
    if refusals:
        raise ReconcileError(f"pipeline '{pipeline}': the plan is refused, so is its "
                             f"environment: {refusals[0]}")
    if diff.renamed:
        old, new = next((old, new) for new, old in sorted(diff.renamed.items()))
        raise ReconcileError(f"pipeline '{pipeline}': the change renames {old} to {new}; an "
                             "environment holds new and modified views and new tables only")
    modified = diff.names("tables", "modified")
    if modified:
        raise ReconcileError(f"pipeline '{pipeline}': the change modifies table "
                             f"'{modified[0]}'; an environment holds new and modified views "
                             "and new tables only (the apply decides how a table evolves)")


def _without_connectors(document: dict[str, Any]) -> dict[str, Any]:
    """The program with no connector: an environment reads no input and sends no output."""
    return {**document, "connectors": {}}


def _bounded_bootstrap(project: Project, engine: Engine, runtime: Any, diff: ProgramDiff,
                       serial: int) -> list[str]:
    """The bootstrap of `diff` into the environment, under the preview's bound: the views it
    computed."""
    from reconciler.engine.bootstrap.recompute import bootstrap
    from reconciler.engine.preview.bound import OutOfBound, PreviewBound

    bound_settings = project.settings.preview
    with PreviewBound(engine.spark, bound_settings.timeout_seconds,
                      bound_settings.max_jobs) as bound:
        try:
            result = bound.run(lambda: bootstrap(runtime, diff, {}, serial=serial + 1,
                                                 silent=True))
        except OutOfBound as stopped:
            raise ReconcileError(f"the environment's build stopped: {stopped} (preview: "
                                 "timeout_seconds, max_jobs in reconcile.yaml); its last "
                                 "build stands") from None
    return list(result.recomputed)


def _publish(engine: Engine, environment: Environment,
             relations: dict[str, tuple[str, int]]) -> bool:
    """Every relation as a view of the environment's database; whether the catalog kept it."""
    from reconciler.engine.publish import catalog_is_kept, publish

    if not catalog_is_kept(engine.spark):
        print(IN_MEMORY_NOTICE.format(pipeline=environment.pipeline,
                                      database=environment.database), file=sys.stderr)
        return False
    _, skipped = publish(engine.spark, environment.database, environment.pipeline,
                         environment.lineage, relations)
    for line in skipped:
        print(f"reconcile: {environment.pipeline}: environment {environment.name}: {line}",
              file=sys.stderr)
    return True


def _discard(engine: Engine, before: Environment, after: Environment) -> None:
    """Delete the environment's tables an update no longer holds (a relation the push
    removed)."""
    for name, record in before.relations.items():
        kept = after.relations.get(name)
        for stored in (record, record.state):
            if stored is not None and (kept is None or stored.path not in (
                    kept.path, kept.state.path if kept.state else None)):
                engine.storage.delete(stored.path)


def _drop_if_empty(spark: Any, database: str) -> None:
    """Drop the environment's database once nothing is left in it (another object someone
    made there keeps it)."""
    if spark.catalog.databaseExists(database) and not [  # the session's temporary views
            table for table in spark.catalog.listTables(database) if not table.isTemporary]:
        from reconciler.engine.spark.schema import quoted

        spark.sql(f"DROP DATABASE IF EXISTS {quoted(database)}")


def _nested(inner: str, outer: str) -> bool:
    """Whether location `inner` is `outer` or inside it (both resolved, no trailing `/`)."""
    if is_url(inner) != is_url(outer):
        return False
    return inner == outer or inner.startswith(f"{outer}/")

