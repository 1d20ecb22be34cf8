"""The approval guard: who may apply, which pull request, and which plan.

Every check raises ``Refused`` with a message that is safe to show on the pull
request. Between the plan a reviewer read and the apply, someone may push: the
apply re-plans at the pull request's current head and these checks refuse when
the head SHA or the plan id differ from what the sticky comment shows.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from reconciler.desired.settings.project import Project
from reconciler.github.client import GitHubClient, GitHubError
from reconciler.github.comment import StickyPlan, read_sticky
from reconciler.github.event import Refused
from reconciler.plan.artifact import Plan
from reconciler.plan.document import git_info
from reconciler.support.errors import ReconcileError, public_message

APPROVING_ROLES = frozenset({"admin", "maintain", "write"})

_LOGIN_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$")
SHA_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


def check_approver(client: GitHubClient, repo: str, login: str,
                   approvers: frozenset[str]) -> str:
    """Write, maintain or admin on the repository, or listed in the `approvers` input."""
    if not _LOGIN_RE.fullmatch(login):
        raise Refused("the comment's author could not be identified")
    allowed, why = may_approve(client, repo, login, approvers)
    if not allowed:
        raise Refused(why)
    return why


def may_approve(client: GitHubClient, repo: str, login: str,
                approvers: frozenset[str]) -> tuple[bool, str]:
    """Whether `login` may approve (asked of the API), and why or why not."""
    if login.casefold() in approvers:
        return True, "listed in approvers"
    try:
        permission = client.permission(repo, login)
    except GitHubError as error:
        if error.status == 404:
            return False, (f"@{login} is not a collaborator of this repository; applying "
                           "needs write, maintain or admin permission")
        raise
    levels = {str(permission.get("permission", "")), str(permission.get("role_name", ""))}
    if levels & APPROVING_ROLES:
        return True, f"permission {'/'.join(sorted(levels & APPROVING_ROLES))}"
    shown = permission.get("role_name") or permission.get("permission") or "none"
    return False, (f"@{login} has '{shown}' permission on this repository; applying needs "
                   "write, maintain or admin (or being listed in the action's approvers)")


def check_pull_request(pull: dict[str, Any], allow_fork_prs: bool) -> str:
    """The pull request must be open and, unless allowed, not from a fork; returns head SHA."""
    if pull.get("state") != "open":
        raise Refused("the pull request is not open")
    head, base = pull.get("head") or {}, pull.get("base") or {}
    head_repo = (head.get("repo") or {}).get("full_name")
    base_repo = (base.get("repo") or {}).get("full_name")
    if (head_repo is None or head_repo != base_repo) and not allow_fork_prs:
        raise Refused("this pull request comes from a fork; applying it is refused (the "
                      "workflow owner can set the action's `allow-fork-prs: true`)")
    sha = str(head.get("sha") or "")
    if not SHA_RE.fullmatch(sha):
        raise Refused("the pull request's head commit could not be read")
    return sha


def check_sticky(sticky: dict[str, Any] | None, key: str, head_sha: str,
                 apply_command: str, commented_at: str) -> StickyPlan:
    """The sticky comment must show a plan for exactly the pull request's current head,
    and must not have changed after the approver commented (they approved what it showed
    before). GitHub's timestamps are ISO 8601 UTC with whole seconds, so they sort as text;
    the same second counts as after."""
    if sticky is None:
        raise Refused(f"there is no plan comment for project `{key}` on this pull request yet; "
                      "wait for the plan (it is made on every push) and comment again")
    shown = read_sticky(str(sticky.get("body") or ""))
    if shown is None:
        raise Refused(f"the last plan for project `{key}` failed; fix it and push")
    if shown.head_sha != head_sha:
        raise Refused(f"the pull request's head moved from `{shown.head_sha[:12]}` (the commit "
                      f"of the plan shown) to `{head_sha[:12]}`; wait for the new plan, review "
                      f"it and comment `{apply_command} <plan id>` again")
    updated = str(sticky.get("updated_at") or "")
    if not commented_at or not updated or updated >= commented_at:
        raise Refused("the plan comment changed after this command was written (or its time "
                      "is unknown); review the plan it shows now and comment again")
    return shown


def check_named_plan(named: str, shown: StickyPlan) -> None:
    """The command names the plan the approver saw; it must be the one shown now."""
    if not shown.plan_id.startswith(named):
        raise Refused(f"this comment approves plan `{named[:12]}`, but the plan comment shows "
                      f"plan `{shown.plan_id[:12]}`; review it and comment again")


def check_review(client: GitHubClient, repo: str, number: int, pull: dict[str, Any],
                 head_sha: str, approvers: frozenset[str]) -> str:
    """`require-review`: an approving review of the head commit, still standing (each
    reviewer's latest review counts), by someone other than the pull request's author who
    may approve (write permission, asked of the API, or listed in `approvers`): anyone
    can leave a review, a sock-puppet account included."""
    author = str((pull.get("user") or {}).get("login", "")).casefold()
    latest: dict[str, dict[str, Any]] = {}
    for review in client.reviews(repo, number):
        login = str((review.get("user") or {}).get("login", ""))
        if review.get("state") in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
            latest[login.casefold()] = review
    candidates = sorted(str(review["user"]["login"]) for login, review in latest.items()
                        if login != author and review.get("state") == "APPROVED"
                        and review.get("commit_id") == head_sha
                        and _LOGIN_RE.fullmatch(str(review["user"]["login"])))
    for login in candidates:
        if may_approve(client, repo, login, approvers)[0]:
            return f"approved by @{login}"
    raise Refused(f"this repository requires an approving review of the head commit "
                  f"`{head_sha[:12]}` by someone with write access other than the pull "
                  "request's author before applying")


def check_backend(project: Project, workspace: Path) -> None:
    """State kept in a folder of the checkout is the pull request's to write (a crafted
    manifest) and is gone after the run: applying needs a backend outside it."""
    url = project.settings.backend
    scheme, found, rest = url.partition("://")
    if found and scheme.casefold() != "file":
        return
    folder = Path(project.resolve(rest if found else url)).resolve()
    if folder.is_relative_to(workspace.resolve()):
        raise Refused("the state backend is a folder inside the checkout, which the pull "
                      "request controls and the runner discards; set the action's `backend` "
                      "input (e.g. s3://bucket/prefix)")


def check_base_branch(pull: dict[str, Any], trusted_branch: str) -> None:
    """Trusted settings come from `trusted_branch`; a pull request into another branch (one
    a writer pushed, with settings of their own) is planned there but never applied."""
    base_ref = str((pull.get("base") or {}).get("ref") or "")
    if base_ref != trusted_branch:
        raise Refused(f"this pull request targets `{base_ref or '(unknown)'}`, not "
                      f"`{trusted_branch}`, where the Action reads the settings it trusts; "
                      "only pull requests into that branch are applied")


def check_checkout(project_dir: Path, head_sha: str) -> None:
    """The files on disk must be the head commit's. GITHUB_SHA is not the PR head on
    issue_comment events (it is the default branch), so git itself is asked."""
    try:
        git = git_info(project_dir)
    except ReconcileError as error:  # a folder the pull request made look like a repository
        raise Refused(public_message(error)) from None
    if git is None:
        raise Refused("the project is not in a git checkout, so the commit cannot be verified")
    if git["sha"] != head_sha:
        raise Refused(f"the checked-out commit `{git['sha'][:12]}` is not the pull request's "
                      f"head `{head_sha[:12]}`; the workflow must check out the head SHA")


def select_changed(plan: Plan, pipeline: str | None) -> list[str]:
    """The pipelines to apply: those with changes, or the one the comment names."""
    names = [p.name for p in plan.pipelines]
    if pipeline is not None and pipeline not in names:
        raise Refused(f"unknown pipeline `{pipeline}` (this plan has: "
                      f"{', '.join(f'`{n}`' for n in names) or 'none'})")
    return [name for name in plan.changed if pipeline in (None, name)]


def check_policies(plan: Plan, selected: list[str]) -> None:
    """A comment is an approval, but `bootstrap_policy: reject` forbids bootstrapping at all.

    The policy is the plan's, which the Action took from the trusted tree or its input.
    """
    rejected = [entry.name for entry in plan.pipelines
                if entry.name in selected and entry.bootstrap_required
                and entry.bootstrap_policy == "reject"]
    if rejected:
        raise Refused(f"bootstrap_policy is 'reject' for {', '.join(rejected)}: these changes "
                      "need bootstrapping, which the policy forbids")


def safe_login(login: str) -> str:
    return login if _LOGIN_RE.fullmatch(login) else "someone"
