"""`reconcile github`: the GitHub Action's logic (see DESIGN.md, "GitHub Action").

On a pull request it plans and keeps ONE sticky comment per project up to
date; on a `/reconcile apply [pipeline]` comment it checks who asked, that the
pull request is not from a fork, that the commit and the plan are still the
ones the sticky comment shows, then applies with approval given and replies.

Threat model, and why the code is shaped the way it is:
* Comment text is attacker-controlled. It is only ever matched against the
  apply command and a pipeline-name pattern; it never reaches a shell, a
  subprocess, a log line or a reply.
* Anyone can write a comment that looks like the sticky one. The sticky
  comment is therefore found by its marker AND by the token's own login.
* Between the plan a reviewer read and the apply, someone may push. The apply
  re-plans at the pull request's current head and refuses when the head SHA
  or the plan_id differ from what the sticky comment shows; `apply_pipeline`
  then re-checks the plan against the backend under the pipeline's lock.
* Log lines always start with a fixed prefix, so text from the pull request
  can never be read by the runner as a `::workflow-command::`.
"""

from __future__ import annotations

import json
import re
import tempfile
import traceback
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import uuid4

import click

from reconciler.errors import ReconcileError
from reconciler.github_client import DEFAULT_API_URL, GitHubClient, GitHubError
from reconciler.manifest import utc_now
from reconciler.operations import Engine, Outcome, apply_pipeline
from reconciler.plan import git_info
from reconciler.planner import compute_plan
from reconciler.render_markdown import render_markdown
from reconciler.specs import NAME_PATTERN, POLICIES, load_project
from reconciler.state import open_backend
from reconciler.workspace import load_programs, load_source
from state_backends import StateBackendError

COMMENT_LIMIT = 65_536
"""GitHub rejects issue comments longer than this (characters)."""
COMMENT_BUDGET = 65_000
"""What we aim for: a margin under the limit for characters GitHub may count differently."""
SUMMARY_BUDGET = 1_000_000
"""Step summaries over 1 MiB are rejected by the runner; bytes, with a margin."""

PLAN_ACTIONS = frozenset({"opened", "synchronize", "reopened"})
APPROVING_ROLES = frozenset({"admin", "maintain", "write"})
APP_BOT_LOGIN = "github-actions[bot]"
COMMANDS = ("auto", "plan", "apply")

_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_LOGIN_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$")
_SHA_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_PIPELINE_RE = re.compile(NAME_PATTERN)
_PLAN_ID_MARK = re.compile(r"^<!-- reconcile-plan-id:([0-9a-f]{64}) -->$", re.MULTILINE)
_HEAD_SHA_MARK = re.compile(r"^<!-- reconcile-head-sha:([0-9a-f]{40,64}) -->$", re.MULTILINE)


class Refused(Exception):
    """A request the Action will not carry out; the message is safe to show on the PR."""


class ApplyFailed(Exception):
    """Applying a pipeline failed after others may have succeeded."""

    def __init__(self, pipeline: str, reason: str, done: list[Outcome], pending: list[str]):
        self.pipeline = pipeline
        self.reason = reason
        self.done = done
        self.pending = pending
        super().__init__(f"pipeline '{pipeline}': {reason}")


# -- configuration --------------------------------------------------------------------------


def _input(env: Mapping[str, str], name: str) -> str:
    """An action input: composite actions export none, so action.yml maps them to INPUT_*.

    Both spellings are read (`INPUT_PROJECT_DIR` and GitHub's own `INPUT_PROJECT-DIR`).
    """
    key = "INPUT_" + name.upper()
    return (env.get(key.replace("-", "_")) or env.get(key) or "").strip()


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
        if pipeline is not None and not _PIPELINE_RE.fullmatch(pipeline):
            raise ReconcileError(f"input 'pipeline' is not a pipeline name: '{pipeline}'")
        apply_command = " ".join(_input(env, "apply-command").split()) or cls.apply_command
        return cls(
            command=command, pipeline=pipeline, backend=_input(env, "backend") or None,
            spark_master=_input(env, "spark-master") or None,
            spark_remote=_input(env, "spark-remote") or None, bootstrap_policy=policy,
            approvers=frozenset(login.casefold() for login in
                                re.split(r"[\s,]+", _input(env, "approvers")) if login),
            allow_fork_prs=_truthy(_input(env, "allow-fork-prs")),
            apply_command=apply_command)


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


# -- runner I/O -----------------------------------------------------------------------------


def log(message: str) -> None:
    """One log line; the fixed prefix keeps any text in it from being a workflow command."""
    click.echo("reconcile: " + " ".join(str(message).split()))


def annotate(level: str, message: str) -> None:
    """An error/warning annotation on the run, escaped as the Actions toolkit does."""
    escaped = str(message).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    click.echo(f"::{level} title=reconcile::{escaped}")


def log_traceback() -> None:
    """A traceback for the run log, every line prefixed (it may quote pull-request SQL)."""
    for line in traceback.format_exc().splitlines():
        click.echo(f"reconcile:   | {line}", err=True)


class Outputs:
    """Step outputs, appended to $GITHUB_OUTPUT at once so a crash still leaves them."""

    def __init__(self, path: Path | None):
        self.path = path
        self.values: dict[str, str] = {}

    def set(self, name: str, value: str | bool | None) -> None:
        text = ("true" if value else "false") if isinstance(value, bool) else str(value or "")
        self.values[name] = text
        if self.path is None:
            return
        delimiter = f"ghadelimiter_{uuid4().hex}"  # multi-line safe, and unguessable
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(f"{name}<<{delimiter}\n{text}\n{delimiter}\n")


def write_summary(path: Path | None, markdown: str) -> None:
    """Append to the step summary, cut to what the runner accepts."""
    if path is None:
        return
    room = SUMMARY_BUDGET
    while len(markdown.encode()) > SUMMARY_BUDGET:  # bytes: a character may take four
        room = room * 3 // 4
        markdown = truncate_markdown(markdown, room) + (
            "\n\n> **Truncated**: the full plan is in the `plan.json` / `plan.md` artifact.\n")
    with path.open("a", encoding="utf-8") as handle:
        handle.write(markdown.rstrip("\n") + "\n\n")


# -- routing --------------------------------------------------------------------------------


def run_action(project_dir: Path, env: Mapping[str, str]) -> int:
    """Entry point of `reconcile github`: route the event, return the exit code."""
    context = Context.from_env(env)
    inputs = Inputs.from_env(env)
    outputs = Outputs(context.output)
    route, why = choose_route(context, inputs)
    log(why)
    if route == "plan":
        return plan_on_pull_request(project_dir, context, inputs, outputs)
    if route == "apply":
        return apply_on_comment(project_dir, context, inputs, outputs)
    outputs.set("result", "ignored")
    return 0


def choose_route(context: Context, inputs: Inputs) -> tuple[str | None, str]:
    """Which flow this event asks for, with a log line saying why."""
    name, event = context.event_name, context.event
    action = str(event.get("action", ""))
    if name == "pull_request_target" and inputs.command == "auto":
        return None, ("pull_request_target is ignored: it runs with secrets on code from forks; "
                      "trigger the workflow on pull_request")
    if inputs.command == "plan":
        return "plan", f"event {name}: planning (command: plan)"
    if name == "pull_request" and inputs.command == "auto":
        if action in PLAN_ACTIONS:
            return "plan", f"pull_request {action}: planning"
        return None, f"pull_request {action}: nothing to do"
    if name == "issue_comment" and inputs.command in ("auto", "apply"):
        return "apply", f"issue_comment {action}: checking for the apply command"
    return None, f"event {name or '(none)'} with command {inputs.command}: nothing to do"


# -- the sticky comment ---------------------------------------------------------------------


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
    document: dict[str, Any]
    markdown: str
    head_sha: str
    apply_command: str
    notice: str = ""

    @property
    def changed(self) -> list[str]:
        return [p["name"] for p in self.document["pipelines"] if p["has_changes"]]

    def head(self) -> str:
        markers = "\n".join([
            sticky_marker(self.key),
            f"<!-- reconcile-plan-id:{self.document['plan_id']} -->",
            f"<!-- reconcile-head-sha:{self.head_sha} -->",
        ]) + "\n"
        return markers + (f"\n{self.notice}\n\n" if self.notice else "")

    def tail(self) -> str:
        plan_id, sha = self.document["plan_id"], self.head_sha
        if self.changed:
            names = ", ".join(f"`{name}`" for name in self.changed)
            how = (f"**To apply**, a collaborator with write access comments `{self.apply_command}`"
                   f" (or `{self.apply_command} <pipeline>` for one of {names}). The Action "
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


# -- truncation -----------------------------------------------------------------------------


def fit_comment(head: str, markdown: str, tail: str, budget: int = COMMENT_BUDGET) -> str:
    """The whole comment if it fits, else the plan cut with a note; head and tail always stay."""
    whole = head + markdown + tail
    if len(whole) <= budget:
        return whole
    note = ("\n\n> **This plan is truncated** ({shown:,} of {total:,} characters shown) to stay "
            "under GitHub's comment limit. The full plan is in this run's step summary and in "
            "the `plan.json` / `plan.md` artifact.\n")
    room = budget - len(head) - len(tail) - len(note) - 40
    kept = truncate_markdown(markdown, room)
    return head + kept + note.format(shown=len(kept), total=len(markdown)) + tail


def truncate_markdown(markdown: str, room: int) -> str:
    """Cut at a line break within `room` characters and close what the cut left open
    (a code fence, a <details>), so the rest of the comment still renders."""
    cut = markdown[:max(room - 32, 0)]
    if "\n" in cut:
        cut = cut[:cut.rfind("\n")]
    closers = ""
    fences = sum(1 for line in cut.splitlines() if line.lstrip().startswith("```"))
    if fences % 2:
        closers += "\n```"
    open_details = cut.count("<details") - cut.count("</details>")
    closers += "\n\n</details>" * max(open_details, 0)
    return cut + closers


# -- the plan flow (pull_request) -----------------------------------------------------------


def plan_on_pull_request(project_dir: Path, context: Context, inputs: Inputs,
                         outputs: Outputs) -> int:
    """Plan, save the artifact, write the summary and the outputs, update the sticky comment."""
    key = project_key(project_dir, context.workspace)
    pull = context.event.get("pull_request") or {}
    number = pull.get("number")
    git = git_info(project_dir)
    head_sha = str((pull.get("head") or {}).get("sha") or (git or {}).get("sha") or "")
    try:
        document = compute_plan(project_dir, inputs.pipeline, inputs.backend)
    except (ReconcileError, StateBackendError) as error:
        return _plan_failed(context, outputs, key, number, head_sha, str(error))
    view = PlanView(key, document, render_markdown(document), head_sha, inputs.apply_command,
                    notice=_checkout_notice(git, head_sha))
    save_plan(view, context.temp_dir, outputs)
    write_summary(context.step_summary, view.summary())
    outputs.set("plan-id", document["plan_id"])
    outputs.set("has-changes", bool(view.changed))
    log(f"plan {document['plan_id']}: {len(view.changed)} pipeline(s) with changes")
    if number is not None:
        _post_plan(context, outputs, key, int(number), view.comment())
    outputs.set("result", "planned")
    return 0


def _checkout_notice(git: dict[str, Any] | None, head_sha: str) -> str:
    """actions/checkout defaults to the merge commit on pull_request: say what was planned."""
    if git and head_sha and git["sha"] != head_sha:
        return (f"> **Note:** planned the checked-out commit `{git['sha'][:12]}`, not the pull "
                f"request's head `{head_sha[:12]}`; check out the head SHA in the workflow, or "
                "`/reconcile apply` will refuse a plan that differs at the head.")
    return ""


def _post_plan(context: Context, outputs: Outputs, key: str, number: int, body: str) -> None:
    """Fork pull requests get a read-only token: the plan then lives in the summary only."""
    try:
        comment = upsert_sticky(context.client(), context.repository, number, key, body)
    except GitHubError as error:
        if error.status != 403:
            raise
        annotate("warning", f"cannot comment on the pull request ({error}); the plan is in the "
                            "step summary")
        return
    outputs.set("comment-url", comment.get("html_url", ""))
    log(f"plan comment: {comment.get('html_url', comment.get('id'))}")


def _plan_failed(context: Context, outputs: Outputs, key: str, number: Any, head_sha: str,
                 reason: str) -> int:
    body = failed_plan_comment(key, head_sha, reason)
    write_summary(context.step_summary, body)
    annotate("error", f"plan failed: {reason}")
    outputs.set("result", "failed")
    outputs.set("failure-reason", reason)
    if number is not None:
        _post_plan(context, outputs, key, int(number), body)
    return 1


def save_plan(view: PlanView, temp_dir: Path, outputs: Outputs) -> Path:
    """plan.json (the artifact `reconcile apply PLAN` accepts) and plan.md, for upload."""
    folder = temp_dir / f"reconcile-plan-{re.sub(r'[^A-Za-z0-9_.-]', '_', view.key)}"
    folder.mkdir(parents=True, exist_ok=True)
    plan_file = folder / "plan.json"
    plan_file.write_text(json.dumps(view.document, indent=2, sort_keys=True) + "\n",
                         encoding="utf-8")
    (folder / "plan.md").write_text(view.summary(), encoding="utf-8")
    outputs.set("plan-file", str(plan_file))
    outputs.set("plan-markdown-file", str(folder / "plan.md"))
    return plan_file


# -- the apply flow (issue_comment) ---------------------------------------------------------


@dataclass(frozen=True)
class ApplyRequest:
    """`/reconcile apply [pipeline]` from the comment's first line."""

    pipeline: str | None


def parse_command(body: str, apply_command: str) -> ApplyRequest | None:
    """None unless the first line is the apply command; Refused for anything after it but
    one pipeline name (so no other text from the comment is ever used)."""
    first_line = body.split("\n", 1)[0].strip()
    words, command = first_line.split(), apply_command.split()
    if [w.casefold() for w in words[:len(command)]] != [w.casefold() for w in command]:
        return None
    rest = words[len(command):]
    if not rest:
        return ApplyRequest(None)
    if len(rest) == 1 and _PIPELINE_RE.fullmatch(rest[0]):
        return ApplyRequest(rest[0])
    raise Refused(f"the text after `{apply_command}` is not a pipeline name (one word of "
                  "letters, digits and underscores, not starting with a digit); nothing was "
                  "applied")


@dataclass
class CommentRun:
    """One apply request being handled: where to reply and what to report."""

    context: Context
    client: GitHubClient
    number: int
    comment_id: int
    login: str
    outputs: Outputs

    def react(self, content: str) -> None:
        """Reactions are feedback only: a failure to add one is logged, not fatal."""
        try:
            self.client.react(self.context.repository, self.comment_id, content)
        except (GitHubError, ReconcileError) as error:
            log(f"could not add the {content} reaction: {error}")

    def reply(self, body: str) -> None:
        write_summary(self.context.step_summary, body)
        comment = self.client.create_comment(self.context.repository, self.number,
                                             fit_comment("", body, ""))
        self.outputs.set("comment-url", comment.get("html_url", ""))


def apply_on_comment(project_dir: Path, context: Context, inputs: Inputs,
                     outputs: Outputs) -> int:
    """Handle a comment: ignore it unless it is the apply command on a pull request."""
    event = context.event
    issue, comment = event.get("issue") or {}, event.get("comment") or {}
    if event.get("action") != "created":
        log("comment edited or deleted: nothing to do (only new comments are commands)")
    elif not issue.get("pull_request"):
        log("comment on an issue, not a pull request: nothing to do")
    else:
        try:
            request = parse_command(str(comment.get("body") or ""), inputs.apply_command)
        except Refused as invalid:
            return _handle_apply(project_dir, inputs, _comment_run(context, issue, comment,
                                                                   outputs), None, invalid)
        if request is not None:
            return _handle_apply(project_dir, inputs, _comment_run(context, issue, comment,
                                                                   outputs), request, None)
        log("the comment's first line is not the apply command: nothing to do")
    outputs.set("result", "ignored")
    return 0


def _comment_run(context: Context, issue: dict[str, Any], comment: dict[str, Any],
                 outputs: Outputs) -> CommentRun:
    login = str((comment.get("user") or {}).get("login", ""))
    return CommentRun(context, context.client(), int(issue["number"]), int(comment["id"]),
                      login, outputs)


def _handle_apply(project_dir: Path, inputs: Inputs, run: CommentRun,
                  request: ApplyRequest | None, invalid: Refused | None) -> int:
    """Acknowledge, check, apply, reply; every way out reacts and sets `result`."""
    run.react("eyes")
    try:
        if invalid is not None:
            raise invalid
        assert request is not None
        outcomes, document = approve_and_apply(project_dir, inputs, run, request)
    except Refused as refusal:
        return _finish(run, "refused", str(refusal),
                       f"### Not applied\n\n{refusal}\n\n<sub>`{inputs.apply_command}` "
                       f"by @{_safe_login(run.login)}</sub>\n")
    except ApplyFailed as failure:
        return _finish(run, "failed", str(failure), failure_reply(run.login, failure))
    except (ReconcileError, StateBackendError) as error:
        return _finish(run, "failed", str(error),
                       f"### Apply failed\n\n{fenced(str(error))}\n")
    run.outputs.set("plan-id", document["plan_id"])
    run.outputs.set("has-changes", bool(outcomes))
    result = "applied" if outcomes else "no-changes"
    run.outputs.set("result", result)  # before replying: the apply is done whatever happens
    log(f"{result}: " + "; ".join(o.message for o in outcomes))
    run.reply(success_reply(run.login, document, outcomes))
    run.react("rocket")
    return 0


def _finish(run: CommentRun, result: str, reason: str, reply: str) -> int:
    annotate("error", f"{result}: {reason}")
    run.outputs.set("result", result)
    run.outputs.set("failure-reason", reason)
    try:
        run.reply(reply)
    finally:
        run.react("confused")
    return 1


def _safe_login(login: str) -> str:
    return login if _LOGIN_RE.fullmatch(login) else "someone"


def approve_and_apply(project_dir: Path, inputs: Inputs, run: CommentRun,
                      request: ApplyRequest) -> tuple[list[Outcome], dict[str, Any]]:
    """Every check in order of cost, then apply with approval given."""
    repo, key = run.context.repository, project_key(project_dir, run.context.workspace)
    how = check_approver(run.client, repo, run.login, inputs.approvers)
    pull = run.client.pull_request(repo, run.number)
    head_sha = check_pull_request(pull, inputs.allow_fork_prs)
    sticky = find_sticky(run.client, repo, run.number, key, own_login(run.client))
    shown = check_sticky(sticky, key, head_sha, inputs.apply_command)
    check_checkout(project_dir, head_sha)
    document = compute_plan(project_dir, inputs.pipeline, inputs.backend)
    if document["plan_id"] != shown.plan_id:
        _refresh_sticky(run, key, document, head_sha, inputs.apply_command,
                        notice="> **The plan changed** since it was last shown (the state or "
                               "the specs moved). Review this plan and comment again.")
        raise Refused(f"the plan changed since it was posted (plan_id `{shown.plan_id[:12]}` "
                      f"-> `{document['plan_id'][:12]}`); the plan comment now shows the "
                      "current plan: review it and comment again")
    selected = select_changed(document, request.pipeline)
    check_policies(project_dir, document, selected, inputs.bootstrap_policy)
    log(f"@{run.login} may apply ({how}); applying {', '.join(selected) or 'nothing'} "
        f"at {head_sha}")
    try:
        outcomes = apply_selected(project_dir, inputs, document, selected, head_sha)
    except ApplyFailed as failure:
        _refresh_after_apply(run, project_dir, inputs, key, head_sha, document, failure.done,
                             failed=failure.pipeline)
        raise
    _refresh_after_apply(run, project_dir, inputs, key, head_sha, document, outcomes)
    return outcomes, document


def check_approver(client: GitHubClient, repo: str, login: str,
                   approvers: frozenset[str]) -> str:
    """Write, maintain or admin on the repository, or listed in the `approvers` input."""
    if not _LOGIN_RE.fullmatch(login):
        raise Refused("the comment's author could not be identified")
    if login.casefold() in approvers:
        return "listed in approvers"
    try:
        permission = client.permission(repo, login)
    except GitHubError as error:
        if error.status == 404:
            raise Refused(f"@{login} is not a collaborator of this repository; applying needs "
                          "write, maintain or admin permission") from None
        raise
    levels = {str(permission.get("permission", "")), str(permission.get("role_name", ""))}
    if levels & APPROVING_ROLES:
        return f"permission {'/'.join(sorted(levels & APPROVING_ROLES))}"
    shown = permission.get("role_name") or permission.get("permission") or "none"
    raise Refused(f"@{login} has '{shown}' permission on this repository; applying needs "
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
    if not _SHA_RE.fullmatch(sha):
        raise Refused("the pull request's head commit could not be read")
    return sha


def check_sticky(sticky: dict[str, Any] | None, key: str, head_sha: str,
                 apply_command: str) -> StickyPlan:
    """The sticky comment must show a plan for exactly the pull request's current head."""
    if sticky is None:
        raise Refused(f"there is no plan comment for project `{key}` on this pull request yet; "
                      "wait for the plan (it is made on every push) and comment again")
    shown = read_sticky(str(sticky.get("body") or ""))
    if shown is None:
        raise Refused(f"the last plan for project `{key}` failed; fix it and push")
    if shown.head_sha != head_sha:
        raise Refused(f"the pull request's head moved from `{shown.head_sha[:12]}` (the commit "
                      f"of the plan shown) to `{head_sha[:12]}`; wait for the new plan, review "
                      f"it and comment `{apply_command}` again")
    return shown


def check_checkout(project_dir: Path, head_sha: str) -> None:
    """The files on disk must be the head commit's. GITHUB_SHA is not the PR head on
    issue_comment events (it is the default branch), so git itself is asked."""
    git = git_info(project_dir)
    if git is None:
        raise Refused("the project is not in a git checkout, so the commit cannot be verified")
    if git["sha"] != head_sha:
        raise Refused(f"the checked-out commit `{git['sha'][:12]}` is not the pull request's "
                      f"head `{head_sha[:12]}`; the workflow must check out the head SHA")


def select_changed(document: dict[str, Any], pipeline: str | None) -> list[str]:
    """The pipelines to apply: those with changes, or the one the comment names."""
    names = [p["name"] for p in document["pipelines"]]
    if pipeline is not None and pipeline not in names:
        raise Refused(f"unknown pipeline `{pipeline}` (this plan has: "
                      f"{', '.join(f'`{n}`' for n in names) or 'none'})")
    return [p["name"] for p in document["pipelines"]
            if p["has_changes"] and pipeline in (None, p["name"])]


def check_policies(project_dir: Path, document: dict[str, Any], selected: list[str],
                   override: str | None) -> None:
    """A comment is an approval, but `bootstrap_policy: reject` forbids bootstrapping at all."""
    if not selected:
        return
    project = load_project(project_dir)
    rejected = []
    for entry in document["pipelines"]:
        if entry["name"] not in selected or not entry["bootstrap_required"]:
            continue
        policy = override or load_source(project, entry["name"]).spec.bootstrap_policy
        if policy == "reject":
            rejected.append(entry["name"])
    if rejected:
        raise Refused(f"bootstrap_policy is 'reject' for {', '.join(rejected)}: these changes "
                      "need bootstrapping, which the policy forbids")


def apply_selected(project_dir: Path, inputs: Inputs, document: dict[str, Any],
                   selected: list[str], head_sha: str) -> list[Outcome]:
    """apply_pipeline with approval given, checking the plan again under each pipeline's lock."""
    if not selected:
        return []
    project, programs = load_programs(project_dir, inputs.pipeline)
    by_name = {program.pipeline: program for program in programs}
    backend = open_backend(project, inputs.backend)
    engine = Engine(project, master=inputs.spark_master, remote=inputs.spark_remote)
    outcomes: list[Outcome] = []
    with _workflow_commands_off():
        for position, name in enumerate(selected):
            try:
                outcomes.append(apply_pipeline(project, by_name[name], backend, engine,
                                               policy="allow", saved_plan=document,
                                               git_sha=head_sha))
            except Exception as error:  # Spark errors too: reported on the PR, not swallowed
                if not isinstance(error, (ReconcileError, StateBackendError)):
                    log_traceback()
                raise ApplyFailed(name, _one_line(error), outcomes, selected[position + 1:]) \
                    from error
    return outcomes


@contextmanager
def _workflow_commands_off() -> Iterator[None]:
    """Stop the runner from obeying `::command::` lines while Spark runs the PR's SQL.

    Spark, the JVM and py4j write to the job log directly, and what they print can
    quote SQL from the pull request; a quoted `::set-output` must stay just text.
    """
    token = uuid4().hex
    print(f"::stop-commands::{token}", flush=True)
    try:
        yield
    finally:
        print(f"::{token}::", flush=True)


def _one_line(error: BaseException) -> str:
    if isinstance(error, (ReconcileError, StateBackendError)):
        return str(error)
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


def _refresh_sticky(run: CommentRun, key: str, document: dict[str, Any], head_sha: str,
                    apply_command: str, notice: str) -> None:
    """Show the current plan so the next approval is of what would really happen."""
    view = PlanView(key, document, render_markdown(document), head_sha, apply_command, notice)
    try:
        upsert_sticky(run.client, run.context.repository, run.number, key, view.comment())
    except (GitHubError, ReconcileError) as error:
        log(f"could not update the plan comment: {error}")


def _refresh_after_apply(run: CommentRun, project_dir: Path, inputs: Inputs, key: str,
                         head_sha: str, applied: dict[str, Any], outcomes: list[Outcome],
                         failed: str | None = None) -> None:
    """After an apply (even a failed one) the state moved and the old plan_id is spent: the
    sticky comment shows what is left, so a retry approves what would really happen."""
    if not outcomes and failed is None:
        return
    try:
        document = compute_plan(project_dir, inputs.pipeline, inputs.backend)
    except (ReconcileError, StateBackendError) as error:
        log(f"could not plan again after applying: {error}")
        return
    user, plan_id = _safe_login(run.login), applied["plan_id"][:12]
    if failed is None:
        names = ", ".join(f"`{o.pipeline}`" for o in outcomes)
        notice = (f"> Plan `{plan_id}` was applied to {names} by @{user} at "
                  f"`{head_sha[:12]}`. What is left to apply:")
    else:
        notice = (f"> Applying plan `{plan_id}` failed at `{failed}` (see the reply below). "
                  "The current plan, to retry:")
    _refresh_sticky(run, key, document, head_sha, inputs.apply_command, notice)


# -- replies --------------------------------------------------------------------------------


def _outcome_line(outcome: Outcome) -> str:
    """`grades`: **bootstrapped** (serial 3): recomputed `a`, `b`; created tables `t`."""
    details = outcome.details or {}
    extra = [f"{label} {', '.join(f'`{v}`' for v in _names(details[name]))}"
             for label, name in (("created tables", "created_tables"),
                                 ("recomputed", "recomputed"), ("sent to outputs", "emitted"))
             if details.get(name)]
    message = outcome.message.removeprefix(f"{outcome.pipeline}: ")
    text = "; ".join(extra) if extra else message
    serial = f" (serial {outcome.serial})" if extra and outcome.serial is not None else ""
    return f"- `{outcome.pipeline}`: **{outcome.result}**{serial}: {text}"


def _names(values: Iterable[Any] | Mapping[str, Any]) -> list[str]:
    return [str(v) for v in (values.keys() if isinstance(values, Mapping) else values)]


def success_reply(login: str, document: dict[str, Any], outcomes: list[Outcome]) -> str:
    head = (f"### Applied\n\n@{_safe_login(login)} approved plan "
            f"`{document['plan_id'][:12]}`")
    if not outcomes:
        return head + ": it has no changes, so nothing was applied.\n"
    return head + ":\n\n" + "\n".join(_outcome_line(o) for o in outcomes) + "\n"


def failure_reply(login: str, failure: ApplyFailed) -> str:
    lines = [f"### Apply failed\n\n@{_safe_login(login)}: applying `{failure.pipeline}` failed:",
             "", fenced(failure.reason), ""]
    if failure.done:
        lines += ["Applied before the failure:", *(_outcome_line(o) for o in failure.done), ""]
    if failure.pending:
        lines += [f"Not attempted: {', '.join(f'`{n}`' for n in failure.pending)}.", ""]
    lines.append(f"`{failure.pipeline}` keeps its last committed state (a failed bootstrap is "
                 "recorded as `Failed`). Fix the cause, push, and apply again: applying again "
                 "converges.")
    return "\n".join(lines) + "\n"
