"""Connector options that reach beyond reading the connector's own input.

A connector's `options` go to Spark's reader as they are (`engine.io.input_batch`), and
they come from pipeline.yaml, which a pull request controls. Spark's file source
deletes the files it has read with `cleanSource: delete`, and moves them to
`sourceArchiveDir` with `cleanSource: archive`: input that a replay, a full refresh or
another reader may still need. Such options are refused unless reconcile.yaml says
`allow_file_cleanup: true` (the GitHub Action reads it from the default branch). The
check runs where the settings in force meet the programs (planning, apply, run),
because the Action replaces the settings after the pipelines are loaded.

Options that name a location (`path`, `paths`, `checkpointLocation`) are refused always
(`desired.model.program`): the connector's `path` says where it reads and the layout where its
offsets live. Spark refuses a `path` option next to the path it loads, unless
`spark.sql.legacy.pathOptionBehavior.enabled` makes it read both; a reader ignores
`checkpointLocation`, which would only look as if it moved the offsets.

Spark matches option keys case-insensitively, and so do these checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.support.errors import ReconcileError
from reconciler.support.redaction import shown_value

LOCATION_OPTIONS = frozenset({"path", "paths", "checkpointlocation"})
ALLOW_SETTING = "allow_file_cleanup"


def location_option(options: Mapping[str, Any]) -> str | None:
    """The first option that names where the connector reads or keeps its offsets."""
    return next((key for key in options if key.casefold() in LOCATION_OPTIONS), None)


def cleanup_option(options: Mapping[str, Any]) -> str | None:
    """The first option that makes Spark's file source delete or move the files it read:
    `cleanSource` other than `off` (YAML reads a bare `off` as false), `sourceArchiveDir`."""
    for key, value in options.items():
        folded = key.casefold()
        if folded == "sourcearchivedir" or (
                folded == "cleansource" and value is not False
                and str(value).casefold() != "off"):
            return key
    return None


def cleanup_refusal(what: str, key: str, value: Any, *, file: str | None = None,
                    line: int | None = None) -> ReconcileError:
    """One line naming the connector (`what`), the option and the trusted setting that
    would allow it."""
    return ReconcileError(
        f"{what}: option '{key}: {shown_value(key, value)}' makes Spark delete or move the "
        f"input files it has read; allowed only when reconcile.yaml sets {ALLOW_SETTING}: "
        "true (in the GitHub Action: the default branch's reconcile.yaml)",
        file=file, line=line)


def check_committed_options(pipeline: str, program: Mapping[str, Any], allowed: bool) -> None:
    """A committed program (the manifest's, as `run` ingests it) under the settings in
    force now: an apply allowed its cleanup options, the operator may have withdrawn that."""
    if allowed:
        return
    for name, connector in program["connectors"].items():
        options = {**connector.get("options", {}), **connector.get("throughput_options", {})}
        key = cleanup_option(options)
        if key is not None:
            raise cleanup_refusal(f"pipeline '{pipeline}', connector '{name}'", key,
                                  options[key])
