"""Settings a pull request cannot choose: where state lives, where Spark runs, the policy.

In `reconcile github` every file of the checkout comes from the pull request's
head. A writer can also choose a pull request's base (a branch they pushed), so
neither may decide where state lives, where Spark runs or whether a pipeline
may be bootstrapped. Every setting of `reconcile.yaml` except `pipelines`, and
each pipeline's `bootstrap_policy`, is read from the **trusted tree**: the
repository's default branch (or the branch the `trusted-branch` input names),
at the commit it points at when the run starts, at that tree's own paths, through
GitHub's contents API. The action's inputs override it. The same validation and
`spark.conf` allow-list apply as to the checkout's own file.

The pull request supplies only its pipelines (and may move their folder, which
the plan shows). A pipeline the trusted tree does not have at its own
`pipelines` folder gets the strictest policy, `reject`: a new pipeline can still
be created (creating bootstraps nothing), but state that exists cannot be
rebuilt through a pipeline the default branch does not know. When the head asks
for other settings, the plan says so in a note: they take effect once merged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from reconciler.desired.model.program import Program, build_program
from reconciler.desired.settings.documents import parse_yaml
from reconciler.desired.settings.project import (
    PIPELINE_FILE,
    PROJECT_FILE,
    Project,
    ProjectSettings,
    SparkSettings,
    load_project,
    project_settings,
    settings_summary,
)
from reconciler.desired.settings.setting_values import POLICIES
from reconciler.desired.workspace import load_source, select_pipelines
from reconciler.github.client import GitHubClient
from reconciler.github.event import Inputs
from reconciler.github.guard import SHA_RE
from reconciler.plan.artifact import Plan
from reconciler.plan.planner import committed_memos, plan_project
from reconciler.state.reader import open_backend, orphaned_pipelines
from reconciler.support.errors import ReconcileError
from reconciler.support.git import repository_prefix

STRICTEST_POLICY = "reject"


@dataclass(frozen=True)
class TrustedTree:
    """The project's files on the trusted branch, at one commit."""

    client: GitHubClient
    repo: str
    branch: str
    sha: str
    prefix: str  # the project's folder in the repository, "" or ending in "/"

    @classmethod
    def resolve(cls, client: GitHubClient, repo: str, branch: str,
                project_dir: Path) -> TrustedTree:
        """The branch's current commit, and the project's folder within the repository (git,
        hardened: a pull request's files cannot move it; see `reconciler.support.git`)."""
        sha = client.branch_head(repo, branch)
        if not SHA_RE.fullmatch(sha):
            raise ReconcileError(f"the head commit of the trusted branch '{branch}' could not "
                                 "be read")
        prefix = repository_prefix(project_dir)
        if prefix is None:
            raise ReconcileError("the project is not in a git checkout: the Action reads its "
                                 "trusted settings from the default branch",
                                 file=str(project_dir))
        return cls(client, repo, branch, sha, prefix)

    def read(self, relative: str) -> str | None:
        return self.client.file_at(self.repo, self.prefix + relative, self.sha)

    def shown(self, relative: str) -> str:
        """How an error names a file of the tree: `main:pipelines/grades/pipeline.yaml`."""
        return f"{self.branch}:{self.prefix}{relative}"

    @property
    def source(self) -> str:
        return f"the {self.branch} branch"


def trusted_branch(inputs: Inputs, event: dict[str, Any], client: GitHubClient,
                   repo: str) -> str:
    """The `trusted-branch` input, else the repository's default branch (from the event,
    which GitHub writes, or the API)."""
    if inputs.trusted_branch:
        return inputs.trusted_branch
    repository = event.get("repository") or {}
    branch = repository.get("default_branch") if isinstance(repository, dict) else None
    return str(branch) if branch else client.default_branch(repo)


@dataclass(frozen=True)
class Trusted:
    """The project as the Action runs it: the head's pipelines under trusted settings."""

    project: Project
    programs: list[Program]
    notes: dict[str, tuple[str, ...]]

    def plan(self) -> Plan:
        """The plan under the trusted settings, with notes on what was replaced."""
        return plan_project(self.project, self.programs, None, self.notes, orphans=(
            orphaned_pipelines(self.project, open_backend(self.project))))


def trusted_project(project_dir: Path, pipeline: str | None, inputs: Inputs,
                    tree: TrustedTree, base_ref: str) -> Trusted:
    """Load the head's pipelines, then replace what only the trusted tree or inputs decide.

    `base_ref` is the branch the pull request targets: when it is not the trusted one,
    the plan says that it cannot be applied (the guard refuses it).
    """
    head = load_project(project_dir)
    from_tree = _tree_settings(tree)
    settings = _trusted_settings(from_tree, inputs, head.settings)
    # The memo is read from the trusted settings' backend, which no pull request writes
    # (in the checkout, `trusted_memo` ignores it): only the views that changed are analysed.
    names = select_pipelines(head, pipeline)
    _, memos = committed_memos(replace(head, settings=settings), names)
    programs = [build_program(load_source(head, name), memos.get(name)) for name in names]
    shared_notes = [*_settings_notes(head.settings, settings, inputs, tree),
                    *_folder_notes(head.settings, from_tree, tree, base_ref)]
    trusted_programs: list[Program] = []
    notes: dict[str, tuple[str, ...]] = {}
    for program in programs:
        policy, source = _trusted_policy(tree, from_tree, program.pipeline, inputs)
        policy_notes = [] if program.bootstrap_policy == policy else [
            f"this pull request sets bootstrap_policy to {program.bootstrap_policy}; the "
            f"Action uses {policy} ({source}) until the change is merged"]
        trusted_programs.append(replace(program, bootstrap_policy=policy))
        notes[program.pipeline] = (*shared_notes, *policy_notes)
    return Trusted(replace(head, settings=settings), trusted_programs, notes)


def trusted_settings_project(project_dir: Path, inputs: Inputs, tree: TrustedTree) -> Project:
    """The project with the trusted settings alone and no pipeline: what a closed pull
    request's clean-up needs, whatever its files say (they are not read)."""
    from_tree = _tree_settings(tree)
    return Project(project_dir, _trusted_settings(from_tree, inputs, from_tree), {})


def _tree_settings(tree: TrustedTree) -> ProjectSettings:
    """The trusted tree's reconcile.yaml, through the same checks as a checkout's own."""
    text = tree.read(PROJECT_FILE)
    if text is None:
        return ProjectSettings()
    return project_settings(parse_yaml(text, tree.shown(PROJECT_FILE)),
                            tree.shown(PROJECT_FILE))


def _trusted_settings(from_tree: ProjectSettings, inputs: Inputs,
                      head: ProjectSettings) -> ProjectSettings:
    """Every setting from the tree (inputs first), but the pipelines' folder from the head."""
    spark = from_tree.spark
    if inputs.spark_master or inputs.spark_remote:
        spark = SparkSettings(master=inputs.spark_master, remote=inputs.spark_remote,
                              conf=spark.conf)
    return from_tree.model_copy(update={
        "backend": inputs.backend or from_tree.backend,
        "storage": inputs.storage or from_tree.storage,
        "spark": spark, "pipelines": head.pipelines})


def _settings_notes(head: ProjectSettings, trusted: ProjectSettings, inputs: Inputs,
                    tree: TrustedTree) -> list[str]:
    wanted, used = settings_summary(head), settings_summary(trusted)
    overridden = {"backend": inputs.backend, "storage": inputs.storage,
                  "spark": inputs.spark_master or inputs.spark_remote}
    notes = []
    for key in sorted({*wanted, *used}):
        if wanted.get(key) == used.get(key):
            continue
        source = ("the action's input" if overridden.get(key.split(".")[0]) else tree.source)
        notes.append(f"this pull request's {PROJECT_FILE} sets {key} to "
                     f"{wanted.get(key, '(unset)')}; the Action uses "
                     f"{used.get(key, '(unset)')} ({source}) until the change is merged")
    return notes


def _folder_notes(head: ProjectSettings, from_tree: ProjectSettings, tree: TrustedTree,
                  base_ref: str) -> list[str]:
    """What a reviewer must know about where things are read from."""
    notes = []
    if head.pipelines != from_tree.pipelines:
        notes.append(f"this pull request moves the pipelines folder from "
                     f"{from_tree.pipelines} ({tree.source}) to {head.pipelines}; policies are "
                     f"read from {from_tree.pipelines}/ on {tree.branch}")
    if base_ref != tree.branch:
        notes.append(f"this pull request targets {base_ref or '(unknown)'}, not {tree.branch} "
                     "(where the Action reads its trusted settings): it is planned, but "
                     "applying it is refused")
    return notes


def _trusted_policy(tree: TrustedTree, from_tree: ProjectSettings, pipeline: str,
                    inputs: Inputs) -> tuple[str, str]:
    """The policy and where it came from: the input, the trusted tree, or the strictest."""
    if inputs.bootstrap_policy:
        return inputs.bootstrap_policy, "the action's input"
    relative = f"{from_tree.pipelines}/{pipeline}/{PIPELINE_FILE}"
    text = tree.read(relative)
    if text is None:
        return STRICTEST_POLICY, (f"the strictest: {tree.branch} has no {relative}, so the "
                                  "pipeline is new there")
    document = parse_yaml(text, tree.shown(relative)).data
    policy = document.get("bootstrap_policy", "await_approval") \
        if isinstance(document, dict) else None
    if policy in POLICIES:
        return str(policy), tree.source
    return STRICTEST_POLICY, f"the strictest: {tree.shown(relative)} has no valid policy"
