"""`reconcile status`: each pipeline's committed state, read from the backend alone.

Status, serial, when it was committed, the last step and how long it took, the
input waiting (files or source versions no step has taken yet), row counts,
connectors (with the files a `skip` connector set aside), who holds the lock (a
runner's step, an apply it waits for), and what the continuous runner last said of
itself (its state, the connectors a bad file holds), its pull-request environments
(`reconcile env`), and the last failed step
(`step_failures`: nothing commits a failure), as JSON for scripts or as a few lines for
people. Nothing here starts Spark.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

import click

from reconciler.desired.settings.project import Project
from reconciler.operations.drift import manifest_drift
from reconciler.operations.environments import recorded_environments
from reconciler.runner.loop import HEARTBEAT
from reconciler.state.connectors import connector_definitions
from reconciler.state.manifest import Manifest
from reconciler.state.reader import orphaned_pipelines, pipeline_layout, read_manifest
from reconciler.support.errors import ReconcileError
from state_backends import StateBackend
from state_backends.base import format_age


def pipeline_input_lags(project: Project, backend: StateBackend,
                        name: str) -> dict[str, dict[str, int] | None]:
    """`input_lags` of a pipeline's committed state (a runner's metrics, after each step)."""
    manifest, _ = read_manifest(backend, name, pipeline_layout(project, name))
    return input_lags(project, manifest) if manifest else {}


def status_reports(project: Project, backend: StateBackend,
                   names: list[str]) -> list[dict[str, Any]]:
    """One report per pipeline (`NotDeployed` for one without a manifest). When `names` are
    all of the project's pipelines, those the backend holds without a folder in the project
    follow (`in_project` false; `plan.planner.orphaned_pipelines`): their input is not
    counted, as no step will read it again."""
    whole = sorted(names) == sorted(project.pipeline_dirs)
    orphans = [orphan["name"] for orphan in orphaned_pipelines(project, backend)
               if orphan["serial"] is not None] if whole else []
    reports = []
    for name in [*names, *orphans]:
        in_project = name not in orphans
        # An orphan's paths are not read (nor checked): only its counts are shown.
        manifest, _ = read_manifest(backend, name,
                                    pipeline_layout(project, name) if in_project else None)
        problem = unapproved(project, manifest) if manifest and in_project else None
        lags = input_lags(project, manifest, problem is None) if manifest and in_project \
            else {}
        lock = backend.read_lock(name)
        reports.append({
            "pipeline": name,
            "in_project": in_project,
            "status": manifest.status if manifest else "NotDeployed",
            "status_details": manifest.status_details if manifest else None,
            "serial": manifest.serial if manifest else None,
            "updated_at": manifest.updated_at if manifest else None,
            "last_step": manifest.last_step if manifest else None,
            "waiting_input": waiting_input(project, manifest, lags) if manifest and in_project
            else {},
            "kafka_lag": lags,
            "unapproved": problem,
            "rows": {n: record.rows for n, record in manifest.relations.items()} if manifest
            else {},
            "versions": relation_versions(manifest) if manifest and in_project else {},
            "drift": [drift.document() for drift in manifest_drift(manifest, files=True)]
            if manifest and in_project else [],
            "expectations": {n: record.expectations for n, record in manifest.relations.items()
                             if record.expectations} if manifest else {},
            "connectors": {name: state.to_json() for name, state in manifest.connectors.items()}
            if manifest else {},
            "spark": manifest.engine.get("spark_target") if manifest else None,
            "delta_writer": manifest.engine.get("delta_writer") if manifest else None,
            "lock": lock.to_dict() if lock else None,
            "runner": backend.read_runner_report(name),
            "last_failure": backend.read_step_failure(name),
            "environments": environment_summaries(backend, name),
        })
    return reports


def environment_summaries(backend: StateBackend, pipeline: str) -> list[dict[str, Any]] | str:
    """Each pull-request environment of the pipeline (`reconcile env`): its name, database,
    the production serial it reads and the relations it holds; or why its record cannot be
    read (status still shows the rest: `env list` and `env destroy` name the problem)."""
    try:
        environments = recorded_environments(backend, pipeline)
    except ReconcileError as problem:
        return str(problem)
    return [{"name": environment.name, "database": environment.database,
             "base_serial": environment.base_serial,
             "holds": sorted(environment.relations), "updated": environment.updated}
            for environment in sorted(environments.values(), key=lambda e: e.name)]


def input_lags(project: Project, manifest: Manifest, approved: bool | None = None
               ) -> dict[str, dict[str, int] | None]:
    """Per input connector whose type reads parts (a Kafka topic's partitions),
    `{"topic/partition": records not ingested}`; None when its source cannot be asked. A
    source is asked (with the `KAFKA_*` credentials the connector names) only when the
    manifest's program is the approved one (`engine.approval`; `approved` when the caller
    checked it already): a writer of the state prefix must not have them sent elsewhere."""
    from reconciler.engine.io.connector_types import connector_type  # no Spark: `lag`

    @cache
    def may_ask() -> bool:  # the approval record is read only for a type that asks
        return approved if approved is not None else unapproved(project, manifest) is None

    lags = {name: connector_type(connector).lag(connector, manifest.connectors[name], may_ask)
            for name, connector in connector_definitions(manifest.program, project.root).items()
            if connector.is_input}
    return {name: lag for name, lag in lags.items() if lag != {}}


def unapproved(project: Project, manifest: Manifest) -> str | None:
    """Why no step runs the manifest's program (it is not the one the last approved command
    recorded, `engine.approval`), or None; nothing is recorded."""
    from reconciler.engine.approval import check_approval

    try:
        check_approval(pipeline_layout(project, manifest.pipeline), manifest.lineage,
                       manifest.serial, manifest.program, record_missing=False)
    except ReconcileError as error:
        return error.message
    return None


def relation_versions(manifest: Manifest) -> dict[str, dict[str, int | None]]:
    """Per relation, the Delta version the manifest pins and the table's latest, read from
    its log by delta-rs (no JVM; None where it cannot be read from here): a latest past the
    pinned one is a write no commit adopted (a stopped run's, or someone else's)."""
    from reconciler.engine.delta.log import probe_latest_version

    versions: dict[str, dict[str, int | None]] = {}
    for name, record in sorted(manifest.relations.items()):
        try:
            latest = probe_latest_version(record.path)
        except Exception:  # storage out of reach from here: not known
            latest = None
        versions[name] = {"pinned": record.version, "latest": latest}
    return versions


def waiting_input(project: Project, manifest: Manifest,
                  lags: dict[str, dict[str, int] | None]) -> dict[str, int | None]:
    """Per input connector, the files (or source versions, for `delta`; records, for
    `kafka`, summed from its `lags`) not ingested yet; None where they cannot be counted
    from here (a source on object storage, a broker out of reach)."""
    from reconciler.engine.io.connector_types import connector_type  # no Spark: `waiting`

    waiting: dict[str, int | None] = {}
    for name, connector in connector_definitions(manifest.program, project.root).items():
        if not connector.is_input:
            continue
        waiting[name] = connector_type(connector).waiting(connector, manifest.connectors[name],
                                                          lags.get(name, {}))
    return waiting


def print_status(reports: list[dict[str, Any]]) -> None:
    """The reports as a few lines per pipeline."""
    for report in reports:
        click.echo(f"{report['pipeline']}: {report['status']} (serial {report['serial']}, "
                   f"updated {report['updated_at']})")
        if not report["in_project"]:
            click.echo(f"  not in the project: its state stays in the backend until "
                       f"`reconcile destroy -p {report['pipeline']}`")
        if report["unapproved"]:
            click.echo(f"  not approved: {report['unapproved']}")
        if report["spark"]:
            writer = f", Delta tables written by {report['delta_writer']}" \
                if report["delta_writer"] else ""
            click.echo(f"  last run on Spark: {report['spark']}{writer}")
        step = report["last_step"] or {}
        if "seconds" in step:
            click.echo(f"  last step: {step['seconds']:.1f}s, refreshed "
                       f"{', '.join(step.get('refreshed') or []) or 'no views'}")
        for view, described in sorted((step.get("choices") or {}).items()):
            click.echo(f"  refresh auto: {view} {described}")
        waiting = [f"{name} {'?' if count is None else count}"
                   for name, count in report["waiting_input"].items()]
        if waiting:
            click.echo(f"  input waiting: {', '.join(waiting)}")
        for connector, lag in sorted(report["kafka_lag"].items()):
            if lag and any(lag.values()):
                click.echo(f"  kafka lag: {connector}: " + ", ".join(
                    f"{partition} {count}" for partition, count in sorted(lag.items())))
        details = report["status_details"] or {}
        for key, names in (details.get("program_diff") or {}).items():
            if names:
                click.echo(f"  {key.replace('_', ' ')}: {', '.join(names)}")
        for action in details.get("actions") or []:  # a parked change: each object, and why
            reasons = "; ".join(action.get("reasons") or [])
            click.echo(f"  {action['kind'].replace('_', ' ')} {action['name']}: "
                       f"{action['action']}" + (f" ({reasons})" if reasons else ""))
        for drift in report["drift"]:
            click.echo(f"  drift: {drift['relation']}: {drift['reason']}")
        for relation, rows in sorted(report["rows"].items()):
            click.echo(f"  {relation}: {rows} rows")
        for line in expectation_lines(step.get("expectations") or {}, report["expectations"]):
            click.echo(f"  {line}")
        failure = report["last_failure"]
        if failure:
            click.echo(f"  last step failed at {failure['at']}: {failure['reason']}")
            if failure.get("stuck_until"):
                click.echo(f"  stuck: every step fails the same way until {failure['stuck_until']}")
        runner = report["runner"]
        if runner:
            click.echo(f"  runner: {runner_line(runner)}")
            for connector, error in sorted(runner.get("bad_input", {}).items()):
                click.echo(f"  input held: {connector}: {error}")
        for connector, state in sorted(report["connectors"].items()):
            skipped = state.get("skipped_files") or []
            if skipped:
                click.echo(f"  skipped files: {connector}: {len(skipped)}, last "
                           f"{skipped[-1]['file']} ({skipped[-1]['reason']})")
        environments = report["environments"]
        if isinstance(environments, str):
            click.echo(f"  environments: unreadable: {environments}")
        for environment in environments if isinstance(environments, list) else []:
            click.echo(f"  environment {environment['name']}: database "
                       f"{environment['database']}, reads serial {environment['base_serial']}, "
                       f"holds {', '.join(environment['holds']) or 'nothing'}")
        if report["lock"]:
            lock = report["lock"]
            click.echo(f"  locked by {lock['who']} ({lock['operation']}, id {lock['id']})")


def expectation_lines(step: dict[str, Any], totals: dict[str, Any]) -> list[str]:
    """Each expectation's count in the last step, and since its relation was created (or
    last recomputed): `expectation orders.positive (DROP ROW): 2 of 5 rows dropped in the
    last step, 3 of 12 since`."""
    lines = []
    for relation in sorted({*step, *totals}):
        for name in sorted({*step.get(relation, {}), *totals.get(relation, {})}):
            last = step.get(relation, {}).get(name)
            total = totals.get(relation, {}).get(name)
            action = (last or total or {}).get("action", "keep")
            verb = {"drop": "dropped", "fail": "failing"}.get(action, "violating")
            words = {"drop": " (DROP ROW)", "fail": " (FAIL UPDATE)"}.get(action, "")
            parts = [f"{c['violations']} of {c['rows']} rows {verb} {when}"
                     for c, when in ((last, "in the last step"), (total, "in all"))
                     if c is not None]
            lines.append(f"expectation {relation}.{name}{words}: {', '.join(parts)}")
    return lines


def history_expectations(document: dict[str, Any]) -> str:
    """One history entry's step counts, for `reconcile state history`: violations per
    expectation (`  expectations: orders.positive 2/5`), or nothing."""
    counts = (document.get("last_step") or {}).get("expectations") or {}
    shown = [f"{relation}.{name} {count['violations']}/{count['rows']}"
             for relation, by_name in sorted(counts.items())
             for name, count in sorted(by_name.items())]
    return f"  expectations: {', '.join(shown)}" if shown else ""


def runner_line(runner: dict[str, Any], now: datetime | None = None) -> str:
    """`running since ..., pid 12 of who@host, last heard 4s ago`, and `silent` when a
    runner that has not stopped missed its heartbeats (it may have died)."""
    now = now or datetime.now(UTC)
    age = (now - datetime.fromisoformat(runner["updated_at"])).total_seconds()
    text = (f"{runner['state'].replace('_', ' ')} since {runner['since']}"
            + (f" ({runner['detail']})" if runner.get("detail") else "")
            + f", pid {runner['pid']} of {runner['who']}, last heard {format_age(age)} ago")
    quiet_limit = 2 * HEARTBEAT + 3 * float(runner.get("interval") or 0)
    if runner["state"] != "stopped" and age > quiet_limit:
        text += " (silent since: it may have stopped without saying so)"
    return text
