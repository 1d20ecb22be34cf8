"""`environments:` in `reconcile.yaml`: pull-request environments, opt-in.

An environment holds a pull request's new and modified views, computed from production's
committed state (`operations.environments`), in its own storage folder, and publishes every
relation of the pipeline as a catalog database, `<database_prefix>_<name>`. Only the
trusted branch's `reconcile.yaml` can enable them (the Action reads settings from there),
so a pull request cannot turn them on for itself or point them at another folder.

`storage` must be a folder of its own: neither production's storage root nor inside it, nor
holding it, so that retention of one never lists the other's files.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from reconciler.support.errors import ReconcileError

ENVIRONMENT_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")
"""An environment's name (`pr_42`): part of a catalog database's name and of a folder's."""


class EnvironmentSettings(BaseModel):
    """`environments: {database_prefix: review, storage: s3://bucket/environments}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    database_prefix: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    storage: str = Field(min_length=1)

    def database(self, name: str) -> str:
        """The catalog database of environment `name`."""
        return f"{self.database_prefix}_{check_environment_name(name)}"


def check_environment_name(name: str) -> str:
    """`name` if it is an environment's name, else a one-line error saying what one is."""
    if not ENVIRONMENT_NAME.fullmatch(name):
        raise ReconcileError(f"environment name {name[:80]!r} is not a name: lower-case "
                             "letters, digits and underscores, starting with a letter "
                             "(at most 63)")
    return name


def pull_request_environment(number: int) -> str:
    """The environment a pull request gets: `pr_<number>`."""
    return check_environment_name(f"pr_{int(number)}")
