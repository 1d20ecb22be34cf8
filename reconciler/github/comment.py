"""The sticky plan comment: one per project on a pull request, updated in place.

Anyone can write a comment that looks like ours, so it is found by its marker
AND by the token's own login, and only its header lines are read for the plan
id and head SHA (the rest may quote text from the pull request).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.github.client import GitHubClient, GitHubError
from reconciler.github.truncation import fit_comment
from reconciler.plan.artifact import Plan
from reconciler.state.manifest import utc_now

APP_BOT_LOGIN = "github-actions[bot]"

_PLAN_ID_MARK = re.compile(r"^<!-- reconcile-plan-id:([0-9a-f]{64}) -->$", re.MULTILINE)
_HEAD_SHA_MARK = re.compile(r"^<!-- reconcile-head-sha:([0-9a-f]{40,64}) -->$", re.MULTILINE)


def project_key(project_dir: Path, workspace: Path) -> str:
    """How the sticky marker names a project: its folder relative to the workspace."""
    try:
        relative = project_dir.resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        relative = project_dir.as_posix()
    # Only characters that cannot end an HTML comment or break a regular expression.
    return re.sub(r"[^A-Za-z0-9_./-]", "_", relative) or "."


def sticky_marker(key: str) -> str:
    return f"<!-- reconcile-plan:{key} -->"


def own_login(client: GitHubClient) -> str:
    """The token's login. GITHUB_TOKEN and other app tokens get 403 on /user: they post as
    github-actions[bot]."""
    try:
        return client.own_login()
    except GitHubError as error:
        if error.status == 403:
            return APP_BOT_LOGIN
        raise


def find_sticky(client: GitHubClient, repo: str, number: int, key: str,
                login: str) -> dict[str, Any] | None:
    """Our sticky comment: it starts with the marker AND was written by this token's login,
    so nobody else's look-alike comment can be taken for the plan."""
    marker = sticky_marker(key)
    for comment in client.issue_comments(repo, number):
        author = str((comment.get("user") or {}).get("login", ""))
        body = str(comment.get("body") or "")
        if author.casefold() == login.casefold() and body.split("\n", 1)[0].strip() == marker:
            return comment
    return None


def upsert_sticky(client: GitHubClient, repo: str, number: int, key: str,
                  body: str) -> dict[str, Any]:
    """Update our sticky comment in place, or create it; returns the comment."""
    existing = find_sticky(client, repo, number, key, own_login(client))
    if existing is not None:
        try:
            return client.update_comment(repo, int(existing["id"]), body)
        except GitHubError as error:
            if error.status != 404:  # deleted since we listed it: create a new one
                raise
    return client.create_comment(repo, number, body)


@dataclass(frozen=True)
class StickyPlan:
    plan_id: str
    head_sha: str


def read_sticky(body: str) -> StickyPlan | None:
    """The plan_id and head SHA the sticky comment shows (None after a failed plan).

    Only the comment's header lines count: the rest may quote text from the pull
    request (an error message), which must not be able to supply markers.
    """
    header = "\n".join(body.splitlines()[:3])
    plan_id = _PLAN_ID_MARK.search(header)
    head_sha = _HEAD_SHA_MARK.search(header)
    if plan_id is None or head_sha is None:
        return None
    return StickyPlan(plan_id.group(1), head_sha.group(1))


@dataclass(frozen=True)
class PlanView:
    """The plan as shown: the pieces of the sticky comment and the step summary."""

    key: str
    plan: Plan
    markdown: str
    head_sha: str
    apply_command: str
    notice: str = ""

    @property
    def changed(self) -> list[str]:
        return self.plan.changed

    def head(self) -> str:
        markers = "\n".join([
            sticky_marker(self.key),
            f"<!-- reconcile-plan-id:{self.plan.plan_id} -->",
            f"<!-- reconcile-head-sha:{self.head_sha} -->",
        ]) + "\n"
        return markers + (f"\n{self.notice}\n\n" if self.notice else "")

    def tail(self) -> str:
        plan_id, sha = self.plan.plan_id, self.head_sha
        if self.changed:
            names = ", ".join(f"`{name}`" for name in self.changed)
            command = f"{self.apply_command} {plan_id[:12]}"
            how = (f"**To apply this plan**, a collaborator with write access comments "
                   f"`{command}` (or `{command} <pipeline>` for one of {names}). The Action "
                   "plans again at the pull request's head first and applies only if the commit "
                   "and the plan are still the ones shown here.")
        else:
            how = "Nothing to apply: every pipeline matches its specs."
        return (f"\n---\n{how}\n\n<sub>project `{self.key}` · plan_id `{plan_id}` · "
                f"head `{sha}` · updated {utc_now()}</sub>\n")

    def comment(self) -> str:
        return fit_comment(self.head(), self.markdown, self.tail())

    def summary(self) -> str:
        return self.head() + self.markdown + self.tail()


def failed_plan_comment(key: str, head_sha: str, reason: str) -> str:
    """The sticky comment after a failed plan: no plan_id marker, so nothing can be applied."""
    return "\n".join([
        sticky_marker(key), f"<!-- reconcile-head-sha:{head_sha} -->", "",
        f"### Reconcile plan failed for `{key}`", "",
        f"At commit `{head_sha}`:", "", fenced(reason), "",
        "Fix the specs and push: the plan is made again on every push.", ""])


def fenced(text: str) -> str:
    """Untrusted text (errors quoting SQL) as a code block it cannot break out of."""
    return "```text\n" + text.replace("```", "'''") + "\n```"
