"""After a commit, a pipeline's `publish:` setting made true in the session's catalog.

The operations call `publish_committed` right after each manifest commit that changed
relations (a deployment, a bootstrap, a step) and before retention runs, so the catalog's
views (`engine/publish.py`) follow the committed manifest and never a version it does not
hold. The setting is read from pipeline.yaml (`publish:`, not part of the committed
program, like `bootstrap_policy`); a step reads only that file, so a pipeline whose SQL is
being edited still runs and publishes its committed program. The views are the
manifest's lineage's (`engine/publish.py`): a destroy drops them with `unpublish_committed`.

Each commit records the database it publishes to (`Manifest.published`, `published_in`):
when `publish:` is removed or names another database, the next commit (an apply with no
other change makes one for it) drops the views from the database the last one recorded. A
relation whose name another object holds is left unpublished, with one line on stderr;
the others are published.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from reconciler.desired.settings.project import Project, PublishSpec, load_pipeline_spec
from reconciler.state.manifest import Manifest
from reconciler.support.errors import ReconcileError

IN_MEMORY_NOTICE = ("reconcile: {pipeline}: not published to '{database}': this Spark "
                    "session's catalog is in memory and ends with the command (give it a "
                    "metastore: spark.sql.catalogImplementation=hive in spark-defaults.conf, "
                    "docs/platforms.md)")


def publish_setting(project: Project, pipeline: str) -> PublishSpec | None:
    """`publish:` of the pipeline's pipeline.yaml as it is now, for a step."""
    folder = project.pipeline_dirs.get(pipeline)
    if folder is None:
        return None
    spec, _, _ = load_pipeline_spec(folder)
    return spec.publish


def published_in(setting: PublishSpec | None) -> str | None:
    """The database a commit made under `setting` records (`Manifest.published`)."""
    return None if setting is None else setting.database


def publish_committed(engine: Any, manifest: Manifest, program: Mapping[str, Any],
                      setting: PublishSpec | None, previous: str | None = None) -> None:
    """Publish the committed manifest's materialized tables and views (less `exclude`), after
    dropping the pipeline's views from `previous` (the database the last commit recorded)
    when this one publishes elsewhere or not at all."""
    if setting is None and previous is None:
        return
    from reconciler.engine.publish import catalog_is_kept, publish

    if not catalog_is_kept(engine.spark):
        if setting is not None:
            print(IN_MEMORY_NOTICE.format(pipeline=manifest.pipeline,
                                          database=setting.database), file=sys.stderr)
        return
    if previous is not None and previous != published_in(setting):
        unpublish_committed(engine, manifest.pipeline, manifest.lineage, previous)
    if setting is None:
        return
    relations = {name: (record.path, record.version)
                 for name, record in manifest.relations.items()
                 if name not in setting.exclude and _materialized(program, name)}
    try:
        _, skipped = publish(engine.spark, setting.database, manifest.pipeline,
                             manifest.lineage, relations)
    except ReconcileError as error:
        raise ReconcileError(f"{manifest.pipeline}: committed (serial {manifest.serial}), "
                             f"but not published: {error}") from None
    for line in skipped:
        print(f"reconcile: {manifest.pipeline}: {line}", file=sys.stderr)


def materialized_relations(program: Mapping[str, Any]) -> set[str]:
    """The program's materialized tables and views, views' parts left out (`_materialized`)."""
    return {name for kind in ("tables", "views") for name in program[kind]
            if _materialized(program, name)}


def _materialized(program: Mapping[str, Any], name: str) -> bool:
    """Whether `name` is a materialized table or view of the committed program, and not a
    view's part (`desired.analysis.view_parts`: an implementation detail of that view)."""
    for kind in ("tables", "views"):
        if name in program[kind]:
            entry = program[kind][name]
            return bool(entry.get("materialized")) and not entry.get("part_of")
    return False


def unpublish_committed(engine: Any, pipeline: str, lineage: str, database: str) -> list[str]:
    """Drop the views the pipeline of `lineage` published in `database` (a destroy), none
    of another lineage's; returns their names. An in-memory catalog holds none of them."""
    from reconciler.engine.publish import catalog_is_kept, unpublish

    if not catalog_is_kept(engine.spark):
        return []
    try:
        return unpublish(engine.spark, database, lineage)
    except ReconcileError as error:
        raise ReconcileError(f"{pipeline}: cannot drop its views in '{database}': {error}"
                             ) from None
