"""Settings a pull request cannot choose: where state lives, where Spark runs, the policy.

In `reconcile github` every file of the checkout comes from the pull request's
head, and a pull request must not be able to point the Action at another state
backend or storage root (whose manifest it wrote itself), at another Spark, or
turn a pipeline's `bootstrap_policy: reject` into `allow`. So `backend`,
`storage` and `spark` of `reconcile.yaml`, and each pipeline's
`bootstrap_policy`, come from the base branch (read through GitHub's contents
API at the pull request's base commit) and are overridden by the action's
inputs; the pull request supplies only the pipelines themselves. When the head
asks for something else, the plan says so in a note: it takes effect once the
change is merged, after review.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from reconciler.errors import ReconcileError
from reconciler.github.client import GitHubClient
from reconciler.github.event import Inputs
from reconciler.github.guard import SHA_RE
from reconciler.plan.planner import plan_project
from reconciler.spec.program import Program
from reconciler.spec.project import (
    PIPELINE_FILE,
    POLICIES,
    PROJECT_FILE,
    Project,
    ProjectSettings,
    SparkSettings,
    settings_summary,
)
from reconciler.spec.workspace import load_programs

TRUSTED_KEYS = ("backend", "storage", "spark", "retention")
"""Top-level keys of `reconcile.yaml` that never come from the pull request's head."""


@dataclass(frozen=True)
class BaseBranch:
    """Files of the project as they are at the pull request's base commit."""

    client: GitHubClient
    repo: str
    sha: str
    prefix: str  # the project's folder in the repository, "" or ending in "/"

    @classmethod
    def of_pull(cls, client: GitHubClient, repo: str, pull: dict[str, Any],
                project_dir: Path) -> BaseBranch:
        """The base commit of a pull request (from the event or the API)."""
        sha = str((pull.get("base") or {}).get("sha") or "")
        if not SHA_RE.fullmatch(sha):
            raise ReconcileError("the pull request's base commit could not be read")
        return cls(client, repo, sha, repository_prefix(project_dir))

    def read(self, relative: str) -> str | None:
        return self.client.file_at(self.repo, self.prefix + relative, self.sha)


@dataclass(frozen=True)
class Trusted:
    """The project as the Action runs it: the head's pipelines under trusted settings."""

    project: Project
    programs: list[Program]
    notes: dict[str, tuple[str, ...]]

    def plan(self) -> dict[str, Any]:
        """The plan document under the trusted settings, with notes on what was replaced."""
        return plan_project(self.project, self.programs, None, self.notes)


def repository_prefix(project_dir: Path) -> str:
    """The project's folder relative to the repository root (`git rev-parse --show-prefix`)."""
    result = subprocess.run(["git", "-C", str(project_dir), "rev-parse", "--show-prefix"],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ReconcileError("the project is not in a git checkout: the Action reads its "
                             "trusted settings from the base branch", file=str(project_dir))
    return result.stdout.strip()


def trusted_project(project_dir: Path, pipeline: str | None, inputs: Inputs,
                    base: BaseBranch) -> Trusted:
    """Load the head's pipelines, then replace what only the base branch or inputs decide."""
    head, programs = load_programs(project_dir, pipeline)
    settings = _trusted_settings(base, inputs, head.settings)
    settings_notes = _settings_notes(head.settings, settings, inputs)
    trusted_programs: list[Program] = []
    notes: dict[str, tuple[str, ...]] = {}
    for program in programs:
        policy, source = _trusted_policy(base, settings, program.pipeline, inputs)
        policy_notes = [] if program.bootstrap_policy == policy else [
            f"this pull request sets bootstrap_policy to {program.bootstrap_policy}; the "
            f"Action uses {policy} ({source}) until the change is merged"]
        trusted_programs.append(replace(program, bootstrap_policy=policy))
        notes[program.pipeline] = (*settings_notes, *policy_notes)
    return Trusted(replace(head, settings=settings), trusted_programs, notes)


def _trusted_settings(base: BaseBranch, inputs: Inputs,
                      head: ProjectSettings) -> ProjectSettings:
    text = base.read(PROJECT_FILE)
    from_base = ProjectSettings()
    if text is not None:
        try:
            from_base = ProjectSettings.model_validate(yaml.safe_load(text) or {})
        except (yaml.YAMLError, ValidationError) as error:
            raise ReconcileError(f"the base branch's {PROJECT_FILE} is not valid, so the "
                                 f"Action has no trusted settings: {str(error).splitlines()[0]}",
                                 file=base.prefix + PROJECT_FILE) from None
    spark = from_base.spark
    if inputs.spark_master or inputs.spark_remote:
        spark = SparkSettings(master=inputs.spark_master, remote=inputs.spark_remote,
                              conf=spark.conf)
    return ProjectSettings(backend=inputs.backend or from_base.backend,
                           storage=inputs.storage or from_base.storage, spark=spark,
                           pipelines=head.pipelines, retention=from_base.retention)


def _settings_notes(head: ProjectSettings, trusted: ProjectSettings,
                    inputs: Inputs) -> list[str]:
    wanted, used = settings_summary(head), settings_summary(trusted)
    notes = []
    for key in sorted({*wanted, *used}):
        if key.split(".")[0] not in TRUSTED_KEYS or wanted.get(key) == used.get(key):
            continue
        overridden = {"backend": inputs.backend, "storage": inputs.storage,
                      "spark": inputs.spark_master or inputs.spark_remote}
        source = ("the action's input" if overridden.get(key.split(".")[0])
                  else "the base branch")
        notes.append(f"this pull request's {PROJECT_FILE} sets {key} to "
                     f"{wanted.get(key, '(unset)')}; the Action uses "
                     f"{used.get(key, '(unset)')} ({source}) until the change is merged")
    return notes


def _trusted_policy(base: BaseBranch, settings: ProjectSettings, pipeline: str,
                    inputs: Inputs) -> tuple[str, str]:
    """The policy and where it came from: the input, the base branch, or the default."""
    if inputs.bootstrap_policy:
        return inputs.bootstrap_policy, "the action's input"
    text = base.read(f"{settings.pipelines}/{pipeline}/{PIPELINE_FILE}")
    try:
        document = yaml.safe_load(text) if text is not None else None
    except yaml.YAMLError:
        document = None
    policy = document.get("bootstrap_policy") if isinstance(document, dict) else None
    if policy in POLICIES:
        return str(policy), "the base branch"
    return "await_approval", "the default: the pipeline is new or has no valid policy " \
                             "on the base branch"
