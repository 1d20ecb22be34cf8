"""Which fields a connector of pipeline.yaml needs together, by direction and type.

Pydantic checks each field's own type; a connector's fields also depend on each other: an
input's flags here, and by its type (`desired.settings.connector_kinds`) a `files`
connector's format, a `kafka` connector's servers and topic, and the options it may hand
a client library (`desired.settings.client_options`). Raised as ValueError, the way
pydantic's validators report, so the error is one line naming the file and the
connector's line, or the option's (`desired.settings.project`).
"""

from __future__ import annotations

from typing import Any

from reconciler.desired.settings.connector_kinds import connector_kind


def check_connector_shape(spec: Any) -> None:
    """ValueError naming the connector and the first thing wrong with its fields: those
    every connector has here, then its type's own (`connector_kinds`)."""
    name = spec.name
    if spec.snapshot_on_bootstrap and spec.table is not None:
        raise ValueError(f"connector '{name}': snapshot_on_bootstrap is for output "
                         "connectors (view:)")
    if spec.on_bad_input != "fail" and spec.table is None:
        raise ValueError(f"connector '{name}': on_bad_input is for input connectors (table:)")
    if spec.on_reset != "refuse" and spec.table is None:
        raise ValueError(f"connector '{name}': on_reset is for input connectors (table:)")
    if spec.changes and spec.table is None:
        raise ValueError(f"connector '{name}': changes is for input connectors (table:)")
    if (spec.table is None) == (spec.view is None):
        raise ValueError(f"connector '{name}' needs exactly one of 'table' or 'view'")
    connector_kind(spec.type).check(spec)
