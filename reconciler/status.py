"""`reconcile status`: each pipeline's committed state, read from the backend alone.

Status, serial, when it was committed, the last step, row counts, connectors and
who holds the lock, as JSON for scripts or as a few lines for people. Nothing here
starts Spark.
"""

from __future__ import annotations

from typing import Any

import click

from reconciler.state import read_manifest
from state_backends import StateBackend


def status_reports(backend: StateBackend, names: list[str]) -> list[dict[str, Any]]:
    """One report per pipeline (`NotDeployed` for one without a manifest)."""
    reports = []
    for name in names:
        manifest, _ = read_manifest(backend, name)
        lock = backend.read_lock(name)
        reports.append({
            "pipeline": name,
            "status": manifest.status if manifest else "NotDeployed",
            "status_details": manifest.status_details if manifest else None,
            "serial": manifest.serial if manifest else None,
            "updated_at": manifest.updated_at if manifest else None,
            "last_step": manifest.last_step if manifest else None,
            "rows": {n: s.get("rows") for n, s in manifest.relations.items()} if manifest
            else {},
            "connectors": manifest.connectors if manifest else {},
            "spark": manifest.engine.get("spark_target") if manifest else None,
            "lock": lock.to_dict() if lock else None,
        })
    return reports


def print_status(reports: list[dict[str, Any]]) -> None:
    """The reports as a few lines per pipeline."""
    for report in reports:
        click.echo(f"{report['pipeline']}: {report['status']} (serial {report['serial']}, "
                   f"updated {report['updated_at']})")
        if report["spark"]:
            click.echo(f"  last run on Spark: {report['spark']}")
        details = report["status_details"] or {}
        for key, names in (details.get("program_diff") or {}).items():
            if names:
                click.echo(f"  {key.replace('_', ' ')}: {', '.join(names)}")
        for relation, rows in sorted(report["rows"].items()):
            click.echo(f"  {relation}: {rows} rows")
        if report["lock"]:
            lock = report["lock"]
            click.echo(f"  locked by {lock['who']} ({lock['operation']}, id {lock['id']})")
