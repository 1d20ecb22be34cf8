"""Which fields a connector of pipeline.yaml needs together, by direction and type.

Pydantic checks each field's own type; a connector's fields also depend on each other
(an input's flags, a `files` connector's format, a `kafka` connector's servers and
topic), and its options are held to what its type may hand a client library
(`desired.settings.client_options`). Raised as ValueError, the way pydantic's validators report, so
the error is one line naming the file and the connector's line, or the option's
(`desired.settings.project`).
"""

from __future__ import annotations

from typing import Any

from reconciler.desired.settings.client_options import check_client_options
from reconciler.desired.settings.kafka_settings import KAFKA_FIELDS, check_kafka_shape

RESET_READS = {"files": "every file of {where}", "delta": "{where} from its first version",
               "kafka": "{where} from the earliest offsets"}
"""What an input of each type reads again when it is reset, for the plan's words."""


def check_connector_shape(spec: Any) -> None:
    """ValueError naming the connector and the first thing wrong with its fields."""
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
    if spec.type == "kafka":
        check_kafka_shape(spec)
        check_client_options(spec)
        return
    if spec.path is None:
        raise ValueError(f"connector '{name}' of type '{spec.type}' needs a 'path'")
    kafka_keys = [key for key in KAFKA_FIELDS if getattr(spec, key)]
    if kafka_keys:
        raise ValueError(f"connector '{name}': '{kafka_keys[0]}' is for kafka connectors")
    if spec.type == "files" and spec.format not in ("json", "csv", "parquet"):
        raise ValueError(f"connector '{name}' of type 'files' needs a 'format' "
                         "(json, csv or parquet)")
    if spec.type == "delta" and spec.format is not None:
        raise ValueError(f"connector '{name}' of type 'delta' takes no 'format'")
    check_client_options(spec)
