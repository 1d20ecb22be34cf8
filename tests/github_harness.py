"""The harness for `reconcile github` tests: a git checkout, a fake GitHub, moto for state.

`Workspace.run` invokes the real CLI the way action.yml does (environment
variables in, $GITHUB_OUTPUT and the step summary out); `github` and `workspace`
are fixtures (registered through conftest's `pytest_plugins`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any
from uuid import uuid4

import boto3
import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli.main import cli
from state_backends import backend_from_url
from tests.fake_github import FakeGitHub, fake_github
from tests.projects import copy_example

REPO_ROOT = Path(__file__).resolve().parents[1]
REPO = "octo/pipelines"
TOKEN = "ghs_test-token"
PR = 7
INPUT_NAMES = ("command", "project-dir", "pipeline", "backend", "spark-master", "spark-remote",
               "bootstrap-policy", "approvers", "allow-fork-prs", "apply-command",
               "github-token", "storage", "require-review", "allow-pull-request-target",
               "aws-access-key-id", "aws-secret-access-key", "aws-session-token", "aws-region",
               "trusted-branch", "preview", "tests")
# The default branch's commit: what GITHUB_SHA is on issue_comment events, never the PR head.
DEFAULT_BRANCH_SHA = "f" * 40


# -- harness --------------------------------------------------------------------------------


@dataclass
class Run:
    exit_code: int
    log: str
    outputs: dict[str, str]
    summary: str


def parse_outputs(text: str) -> dict[str, str]:
    """$GITHUB_OUTPUT in the `name<<DELIMITER` form the runner reads."""
    outputs, lines = {}, iter(text.splitlines())
    for line in lines:
        name, delimiter = line.split("<<", 1)
        value = []
        for inner in lines:
            if inner == delimiter:
                break
            value.append(inner)
        outputs[name] = "\n".join(value)
    return outputs


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=Test",
                           "-c", "user.email=test@example.com", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@dataclass
class Workspace:
    """A checked-out repository (GITHUB_WORKSPACE) holding one project, and the runner."""

    root: Path
    project: Path
    backend_url: str
    github: FakeGitHub
    runs: Path
    _ids: Iterator[int] = field(default_factory=count)
    # Set: each run is a child process with this environment (a JVM of its own, as a Derby
    # metastore needs), not an invocation in the test's process.
    child_env: dict[str, str] | None = None

    @property
    def base_sha(self) -> str:
        """The default branch's commit (the fake's `main`): where trusted settings are read."""
        return self.github.state.branches.get("main", "")

    @base_sha.setter
    def base_sha(self, sha: str) -> None:
        self.github.state.branches["main"] = sha

    def commit(self, message: str) -> str:
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", message)
        return git(self.root, "rev-parse", "HEAD")

    @property
    def head(self) -> str:
        return git(self.root, "rev-parse", "HEAD")

    def manifest(self, pipeline: str = "grades") -> dict[str, Any] | None:
        stored = backend_from_url(self.backend_url, self.project).read_manifest(pipeline)
        return stored.document if stored else None

    def run(self, event_name: str, payload: dict[str, Any], *, token: str = TOKEN,
            **inputs: str) -> Run:
        """`reconcile -C <project> github` as action.yml runs it, with a fresh run folder."""
        folder, env = self.action_env(event_name, payload, token=token, **inputs)
        if self.child_env is not None:
            merged = {name: value for name, value in {**self.child_env, **env}.items()
                      if value is not None}
            child = subprocess.run([sys.executable, "-m", "reconciler", "-C", str(self.project),
                                    "github"], env=merged, capture_output=True, text=True,
                                   timeout=600, check=False)
            return self.finished(folder, child.returncode, child.stdout + child.stderr)
        saved = dict(os.environ)  # the Action exports its credential inputs to itself
        try:
            result = CliRunner().invoke(cli, ["-C", str(self.project), "github"], env=env,
                                        catch_exceptions=False)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        return self.finished(folder, result.exit_code, result.output)

    def finished(self, folder: Path, exit_code: int, log: str) -> Run:
        """The run whose files are in `folder`: its outputs and summary read back."""
        output_file, summary_file = folder / "output", folder / "summary.md"
        return Run(exit_code, log,
                   parse_outputs(output_file.read_text()) if output_file.exists() else {},
                   summary_file.read_text() if summary_file.exists() else "")

    def action_env(self, event_name: str, payload: dict[str, Any], *, token: str = TOKEN,
                   **inputs: str) -> tuple[Path, dict[str, str | None]]:
        """A fresh run folder with the event in it, and the variables action.yml sets
        (None: unset), for a run in this process or another."""
        folder = self.runs / f"run{next(self._ids)}"
        folder.mkdir(parents=True)
        (folder / "event.json").write_text(json.dumps(payload))
        env: dict[str, str | None] = {
            "GITHUB_EVENT_NAME": event_name, "GITHUB_EVENT_PATH": str(folder / "event.json"),
            "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": self.github.url,
            "GITHUB_TOKEN": token, "GITHUB_STEP_SUMMARY": str(folder / "summary.md"),
            "GITHUB_OUTPUT": str(folder / "output"), "GITHUB_WORKSPACE": str(self.root),
            "GITHUB_SHA": DEFAULT_BRANCH_SHA, "RUNNER_TEMP": str(folder / "temp"),
        }
        inputs.setdefault("tests", "off")  # a child JVM per plan: on in the tests of tests
        for name in INPUT_NAMES:  # nothing leaks in from a CI runner's own environment
            env[f"INPUT_{name.upper()}"] = None
            env[f"INPUT_{name.upper().replace('-', '_')}"] = inputs.get(name.replace("-", "_"))
        return folder, env

    def pull_request(self, action: str, sha: str | None = None, number: int = PR,
                     **inputs: str) -> Run:
        sha = sha or self.head
        pull = (self.github.state.pulls.get(number)
                or self.github.add_pull(number, sha, base_sha=self.base_sha))
        pull["head"]["sha"] = sha
        return self.run("pull_request", {
            "action": action, "number": number,
            "pull_request": {"number": number, "head": pull["head"], "base": pull["base"]},
            "repository": {"full_name": REPO, "default_branch": "main"}}, **inputs)

    def comment(self, login: str, body: str, number: int = PR, *, on_pull: bool = True,
                action: str = "created", **inputs: str) -> tuple[Run, dict[str, Any]]:
        """A user comments (the fake stores it, so reactions have a target), then the run."""
        comment = self.github.add_comment(number, login, body)
        return self.run_comment(comment, number, on_pull=on_pull, action=action,
                                **inputs), comment

    def run_comment(self, comment: dict[str, Any], number: int = PR, *, on_pull: bool = True,
                    action: str = "created", **inputs: str) -> Run:
        """The workflow run a comment started (it may run after later pushes and plans)."""
        issue: dict[str, Any] = {"number": number, "title": "Change grades"}
        if on_pull:
            issue["pull_request"] = {"url": f"{self.github.url}/repos/{REPO}/pulls/{number}"}
        payload = {"action": action, "issue": issue,
                   "comment": {"id": comment["id"], "body": comment["body"],
                               "user": comment["user"], "created_at": comment["created_at"],
                               "author_association": "COLLABORATOR"},
                   "repository": {"full_name": REPO}}
        return self.run("issue_comment", payload, **inputs)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with fake_github(repo=REPO, token=TOKEN) as server:
        server.set_permission("alice", "write")
        server.set_permission("bob", "write", role_name="maintain")
        server.set_permission("rita", "read")
        yield server


@pytest.fixture
def workspace(tmp_path: Path, s3_endpoint: str, github: FakeGitHub,
              monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """examples/grades in a fresh git repository, its state in a fresh moto bucket."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    bucket = f"reconcile-gh-{uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=bucket)
    root = tmp_path / "checkout"
    root.mkdir()
    project = copy_example("grades", root)
    backend_url = f"s3://{bucket}/state"
    settings = yaml.safe_load((project / "reconcile.yaml").read_text())
    settings["backend"] = backend_url
    settings["tests"] = {"required": False}  # on in test_view_tests's Action test only
    (project / "reconcile.yaml").write_text(yaml.safe_dump(settings))
    (root / ".gitignore").write_text(".reconcile/\n")
    git(root, "init", "-q", "-b", "main")
    workspace = Workspace(root, project, backend_url, github, tmp_path / "runs")
    workspace.base_sha = workspace.commit("grades pipeline")
    github.state.git_root = root
    return workspace


def sticky_comments(github: FakeGitHub) -> list[dict[str, Any]]:
    return github.sticky(PR)


def only_sticky(github: FakeGitHub) -> dict[str, Any]:
    stickies = sticky_comments(github)
    assert len(stickies) == 1, stickies
    return stickies[0]


def approve(workspace: Workspace, login: str, pipeline: str = "",
            **inputs: str) -> tuple[Run, dict[str, Any]]:
    """`/reconcile apply <plan id> [pipeline]` naming the plan the sticky comment shows."""
    plan_id = marker(only_sticky(workspace.github)["body"], "plan-id")[:12]
    return workspace.comment(login, f"/reconcile apply {plan_id} {pipeline}".strip(), **inputs)


def marker(body: str, name: str) -> str:
    match = re.search(rf"^<!-- reconcile-{name}:(\S+) -->$", body, re.MULTILINE)
    assert match, f"no {name} marker in:\n{body[:500]}"
    return match.group(1)


def deploy(workspace: Workspace) -> None:
    """The pipeline is running already (deployed from the default branch by the CLI)."""
    result = CliRunner().invoke(cli, ["-C", str(workspace.project), "apply", "--auto-approve"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output


def assert_reject_refuses_the_apply(workspace: Workspace) -> None:
    """A writer approves the plan shown; `reject` refuses it and the deployment stays."""
    run, _ = approve(workspace, "alice")
    assert run.exit_code == 1
    assert "bootstrap_policy is 'reject'" in run.outputs["failure-reason"]
    assert workspace.manifest()["serial"] == 1


def plant_python(folder: Path, canary: Path) -> None:
    """Everything Python might import from a working directory or a site folder: our own
    package (its `__main__` prints a forged, passing test result), pyspark, the site hooks
    and a `.pth` file. Each, if ever run, writes `canary`."""
    write_canary = f"open({str(canary)!r}, 'a').write({str(folder)!r} + ' ' + __name__ + '\\n')\n"
    forged = json.dumps({"format": 1, "tests": [
        {"pipeline": "grades", "file": "forged.yaml", "name": "forged", "passed": True,
         "failure": None}]})
    (folder / "reconciler").mkdir(exist_ok=True)
    (folder / "reconciler/__init__.py").write_text(write_canary)
    (folder / "reconciler/__main__.py").write_text(write_canary + f"print({forged!r})\n")
    (folder / "pyspark").mkdir(exist_ok=True)
    (folder / "pyspark/__init__.py").write_text(write_canary)
    for hook in ("sitecustomize.py", "usercustomize.py"):
        (folder / hook).write_text(write_canary)
    (folder / "planted.pth").write_text("import os; " + write_canary)
