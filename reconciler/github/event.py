"""The event that started the run and the inputs the workflow gave, validated once.

Everything here comes from outside: the ``GITHUB_*`` variables, the event
payload, the action's ``INPUT_*`` variables and the comment's text. It is
checked against fixed patterns before any other module sees it, so later code
can trust a pipeline name, a repository name or an apply request.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.desired.settings.project import NAME_PATTERN
from reconciler.desired.settings.setting_values import POLICIES
from reconciler.github.client import DEFAULT_API_URL, GitHubClient
from reconciler.support.errors import ReconcileError

COMMANDS = ("auto", "plan", "apply")
PREVIEWS = ("counts", "rows", "off")

_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_BRANCH_RE = re.compile(r"^(?!.*\.\.)(?!/)[A-Za-z0-9_./-]{1,200}(?<!/)$")
PIPELINE_RE = re.compile(NAME_PATTERN)


class Refused(Exception):
    """A request the Action will not carry out; the message is safe to show on the PR."""




def _input(env: Mapping[str, str], name: str) -> str:
    """An action input: composite actions export none, so action.yml maps them to INPUT_*.

    Both spellings are read (`INPUT_PROJECT_DIR` and GitHub's own `INPUT_PROJECT-DIR`).
    """
    key = "INPUT_" + name.upper()
    return (env.get(key.replace("-", "_")) or env.get(key) or "").strip()


CREDENTIAL_INPUTS = {"aws-access-key-id": "AWS_ACCESS_KEY_ID",
                     "aws-secret-access-key": "AWS_SECRET_ACCESS_KEY",
                     "aws-session-token": "AWS_SESSION_TOKEN", "aws-region": "AWS_REGION"}
"""Action inputs that become the usual AWS variables of this process (and of nothing
the workflow ran before): only the `reconcile github` step receives them."""


def credentials_from_inputs(env: Mapping[str, str]) -> dict[str, str]:
    """The AWS variables the inputs set; unset inputs leave the job's own (e.g. OIDC) alone."""
    return {variable: value for name, variable in CREDENTIAL_INPUTS.items()
            if (value := _input(env, name))}


@dataclass(frozen=True)
class Inputs:
    """The action's inputs, validated once, so later code can trust them."""

    command: str = "auto"
    pipeline: str | None = None
    backend: str | None = None
    spark_master: str | None = None
    spark_remote: str | None = None
    bootstrap_policy: str | None = None
    approvers: frozenset[str] = frozenset()
    allow_fork_prs: bool = False
    apply_command: str = "/reconcile apply"
    storage: str | None = None
    require_review: bool = False
    allow_pull_request_target: bool = False
    trusted_branch: str | None = None  # default: the repository's default branch
    preview: str = "off"  # counts: a data preview in the plan comment (same-repo PRs only)
    tests: bool = True  # the plan runs the changed pipelines' view tests

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Inputs:
        command = _input(env, "command") or "auto"
        if command not in COMMANDS:
            raise ReconcileError(f"input 'command' must be one of {', '.join(COMMANDS)}, "
                                 f"not '{command}'")
        policy = _input(env, "bootstrap-policy") or None
        if policy is not None and policy not in POLICIES:
            raise ReconcileError(f"input 'bootstrap-policy' must be one of {', '.join(POLICIES)}")
        pipeline = _input(env, "pipeline") or None
        if pipeline is not None and not PIPELINE_RE.fullmatch(pipeline):
            raise ReconcileError(f"input 'pipeline' is not a pipeline name: '{pipeline}'")
        apply_command = " ".join(_input(env, "apply-command").split()) or cls.apply_command
        preview = _input(env, "preview") or "off"
        if preview not in PREVIEWS:
            raise ReconcileError(f"input 'preview' must be one of {', '.join(PREVIEWS)}, "
                                 f"not '{preview}'")
        tests = _input(env, "tests") or "on"
        if tests not in ("on", "off"):
            raise ReconcileError(f"input 'tests' must be on or off, not '{tests}'")
        trusted_branch = _input(env, "trusted-branch") or None
        if trusted_branch is not None and not _BRANCH_RE.fullmatch(trusted_branch):
            raise ReconcileError(f"input 'trusted-branch' is not a branch name: "
                                 f"'{trusted_branch}'")
        return cls(
            command=command, pipeline=pipeline, backend=_input(env, "backend") or None,
            spark_master=_input(env, "spark-master") or None,
            spark_remote=_input(env, "spark-remote") or None, bootstrap_policy=policy,
            approvers=frozenset(login.casefold() for login in
                                re.split(r"[\s,]+", _input(env, "approvers")) if login),
            allow_fork_prs=_truthy(_input(env, "allow-fork-prs")),
            apply_command=apply_command, storage=_input(env, "storage") or None,
            require_review=_truthy(_input(env, "require-review")),
            allow_pull_request_target=_truthy(_input(env, "allow-pull-request-target")),
            trusted_branch=trusted_branch, preview=preview, tests=tests == "on")


def _truthy(value: str) -> bool:
    return value.casefold() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Context:
    """What the runner tells us about the run, from the standard GITHUB_* variables."""

    event_name: str
    event: dict[str, Any]
    repository: str
    api_url: str
    token: str
    step_summary: Path | None
    output: Path | None
    workspace: Path
    temp_dir: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Context:
        event_path = env.get("GITHUB_EVENT_PATH")
        if not event_path:
            raise ReconcileError("GITHUB_EVENT_PATH is not set: `reconcile github` runs inside "
                                 "GitHub Actions (use `reconcile plan` / `apply` elsewhere)")
        try:
            event = json.loads(Path(event_path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ReconcileError(f"cannot read the event payload: {error}",
                                 file=event_path) from None
        repository = env.get("GITHUB_REPOSITORY", "")
        if not _REPO_RE.fullmatch(repository):
            raise ReconcileError(f"GITHUB_REPOSITORY must be owner/name, not '{repository}'")
        return cls(
            event_name=env.get("GITHUB_EVENT_NAME", ""),
            event=event if isinstance(event, dict) else {},
            repository=repository,
            api_url=env.get("GITHUB_API_URL") or DEFAULT_API_URL,
            token=env.get("GITHUB_TOKEN") or _input(env, "github-token"),
            step_summary=_optional_path(env.get("GITHUB_STEP_SUMMARY")),
            output=_optional_path(env.get("GITHUB_OUTPUT")),
            workspace=Path(env.get("GITHUB_WORKSPACE") or Path.cwd()),
            temp_dir=Path(env.get("RUNNER_TEMP") or tempfile.gettempdir()),
        )

    def client(self) -> GitHubClient:
        """Made only when needed, so ignored events need no token and make no request."""
        return GitHubClient(self.token, self.api_url)


def _optional_path(value: str | None) -> Path | None:
    return Path(value) if value else None


PLAN_ID_RE = re.compile(r"[0-9a-f]{12,64}")
SHORT_PLAN_ID = 12
"""How many hex digits of a plan id a comment must name (48 bits: no collision by chance)."""


@dataclass(frozen=True)
class ApplyRequest:
    """`/reconcile apply <plan id> [pipeline]` from the comment's first line."""

    plan_id: str
    pipeline: str | None


def parse_command(body: str, apply_command: str) -> ApplyRequest | None:
    """None unless the first line is the apply command; Refused unless what follows is the
    plan id the approver saw and at most one pipeline name (no other text is ever used).

    Naming the plan binds the approval to it: whatever is pushed or re-planned after
    the comment, only that plan can be applied.
    """
    first_line = body.split("\n", 1)[0].strip()
    words, command = first_line.split(), apply_command.split()
    if [w.casefold() for w in words[:len(command)]] != [w.casefold() for w in command]:
        return None
    rest = words[len(command):]
    if not rest or not PLAN_ID_RE.fullmatch(rest[0].casefold()):
        raise Refused(f"name the plan you approve: comment `{apply_command} <plan id>` with "
                      "the plan id shown in the plan comment (optionally followed by one "
                      "pipeline name); nothing was applied")
    if len(rest) == 1:
        return ApplyRequest(rest[0].casefold(), None)
    if len(rest) == 2 and PIPELINE_RE.fullmatch(rest[1]):
        return ApplyRequest(rest[0].casefold(), rest[1])
    raise Refused(f"the text after `{apply_command} <plan id>` is not a pipeline name (one "
                  "word of letters, digits and underscores, not starting with a digit); "
                  "nothing was applied")


@dataclass(frozen=True)
class RollbackRequest:
    """`/reconcile rollback <serial> [<plan id>] [pipeline]` from the comment's first line:
    without a plan id, a request to see the rollback's plan; with one, its approval."""

    serial: int
    plan_id: str | None
    pipeline: str | None


def rollback_command(apply_command: str) -> str:
    """The rollback command beside the apply one: its last word `apply` made `rollback`
    (`/reconcile apply` -> `/reconcile rollback`), else `rollback` after it."""
    words = apply_command.split()
    return " ".join([*words[:-1], "rollback"] if words[-1].casefold() == "apply"
                    else [*words, "rollback"])


def parse_rollback(body: str, apply_command: str) -> RollbackRequest | None:
    """None unless the first line is the rollback command; Refused unless what follows is a
    serial, then at most a plan id and a pipeline name (no other text is ever used)."""
    command = rollback_command(apply_command)
    words, expected = body.split("\n", 1)[0].strip().split(), command.split()
    if [w.casefold() for w in words[:len(expected)]] != [w.casefold() for w in expected]:
        return None
    rest = words[len(expected):]
    if not rest or not re.fullmatch(r"[1-9][0-9]{0,9}", rest[0]):
        raise Refused(f"name the serial to go back to: comment `{command} <serial>` for its "
                      f"plan, then `{command} <serial> <plan id>` to apply it; nothing was "
                      "rolled back")
    serial, rest = int(rest[0]), rest[1:]
    plan_id = rest.pop(0).casefold() if rest and PLAN_ID_RE.fullmatch(rest[0].casefold()) \
        else None
    if len(rest) > 1 or (rest and not PIPELINE_RE.fullmatch(rest[0])):
        raise Refused(f"the text after `{command} <serial> [<plan id>]` is not a pipeline "
                      "name; nothing was rolled back")
    return RollbackRequest(serial, plan_id, rest[0] if rest else None)
