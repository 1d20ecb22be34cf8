"""A fake GitHub REST API on loopback, for driving `reconcile github` end to end.

It is a real HTTP server (``ThreadingHTTPServer`` on 127.0.0.1, port chosen by
the kernel), so the Action's urllib client, headers, JSON bodies, status codes
and pagination are exercised for real. It serves only the endpoints the Action
uses, under a path prefix like GitHub Enterprise Server's ``/api/v3`` (which
proves ``GITHUB_API_URL`` is honoured), checks the bearer token, enforces
GitHub's comment length limit, and records every request for assertions.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

COMMENT_LIMIT = 65_536
EPOCH = datetime(2026, 11, 1, tzinfo=UTC)


@dataclass
class Recorded:
    method: str
    path: str  # without the prefix and the query string
    query: dict[str, list[str]]
    body: Any
    authorization: str | None


@dataclass
class FakeState:
    repo: str
    token: str
    login: str
    user_forbidden: bool = False  # like GITHUB_TOKEN / app tokens: GET /user -> 403
    comments_forbidden: bool = False  # like a fork PR's read-only token
    page_size_cap: int = 100
    permissions: dict[str, dict[str, str]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)  # by comment id
    reactions: list[tuple[int, str]] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    reviews: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # by pull number
    next_id: int = 1000
    clock: int = 0  # seconds after EPOCH: every write is one second later than the last
    git_root: Path | None = None  # serves /contents at a ref from this real repository
    default_branch: str = "main"
    branches: dict[str, str] = field(default_factory=dict)  # branch name -> head commit

    def now(self) -> str:
        """GitHub's timestamps have whole seconds; each call is one second later."""
        self.clock += 1
        return (EPOCH + timedelta(seconds=self.clock)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def author(self) -> str:
        return "github-actions[bot]" if self.user_forbidden else self.login


class FakeGitHub:
    """The server and its state; use as a context manager (see ``fake_github``)."""

    def __init__(self, repo: str = "octo/pipelines", token: str = "test-token",
                 login: str = "reconcile-bot", prefix: str = "/api/v3"):
        self.state = FakeState(repo=repo, token=token, login=login)
        self.prefix = prefix
        self._lock = threading.Lock()
        handler = _handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.prefix}"

    def start(self) -> FakeGitHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- set-up helpers ------------------------------------------------------------------

    def set_permission(self, login: str, permission: str, role_name: str | None = None) -> None:
        self.state.permissions[login] = {"permission": permission,
                                         "role_name": role_name or permission}

    def add_pull(self, number: int, head_sha: str, *, head_repo: str | None = None,
                 state: str = "open", base_sha: str = "0" * 40,
                 author: str = "carol") -> dict[str, Any]:
        repo = self.state.repo
        pull = {
            "number": number, "state": state, "html_url": f"https://github.test/{repo}/pull/{number}",
            "user": {"login": author},
            "head": {"sha": head_sha, "ref": "feature",
                     "repo": {"full_name": head_repo or repo}},
            "base": {"sha": base_sha, "ref": "main", "repo": {"full_name": repo}},
        }
        self.state.pulls[number] = pull
        return pull

    def set_head(self, number: int, sha: str) -> None:
        self.state.pulls[number]["head"]["sha"] = sha

    def add_comment(self, number: int, login: str, body: str) -> dict[str, Any]:
        with self._lock:
            return self._create_comment(number, login, body)

    def add_review(self, number: int, login: str, state: str, commit_id: str) -> None:
        with self._lock:
            self.state.reviews.setdefault(number, []).append({
                "id": len(self.state.reviews.get(number, [])) + 1, "user": {"login": login},
                "state": state, "commit_id": commit_id, "submitted_at": self.state.now()})

    # -- assertions helpers --------------------------------------------------------------

    def calls(self, method: str, pattern: str = "") -> list[Recorded]:
        """Recorded requests of `method` whose path matches the regular expression."""
        return [r for r in self.state.requests
                if r.method == method and re.search(pattern, r.path)]

    def writes(self) -> list[Recorded]:
        return [r for r in self.state.requests if r.method != "GET"]

    def comments_on(self, number: int) -> list[dict[str, Any]]:
        return [c for c in self.state.comments.values() if c["issue_number"] == number]

    def sticky(self, number: int, login: str | None = None) -> list[dict[str, Any]]:
        author = login or self.state.author()
        return [c for c in self.comments_on(number)
                if c["user"]["login"] == author and c["body"].startswith("<!-- reconcile-plan:")]

    def replies(self, number: int) -> list[dict[str, Any]]:
        author = self.state.author()
        return [c for c in self.comments_on(number)
                if c["user"]["login"] == author and not c["body"].startswith("<!-- ")]

    def reactions_on(self, comment_id: int) -> list[str]:
        return [content for cid, content in self.state.reactions if cid == comment_id]

    # -- internals -----------------------------------------------------------------------

    def _create_comment(self, number: int, login: str, body: str) -> dict[str, Any]:
        self.state.next_id += 1
        cid = self.state.next_id
        stamp = self.state.now()
        comment = {"id": cid, "issue_number": number, "body": body, "user": {"login": login},
                   "created_at": stamp, "updated_at": stamp,
                   "html_url": f"https://github.test/{self.state.repo}/pull/{number}"
                               f"#issuecomment-{cid}"}
        self.state.comments[cid] = comment
        return comment

    def handle(self, method: str, path: str, query: dict[str, list[str]],
               body: Any) -> tuple[int, Any, dict[str, str]]:
        """Route one request; returns status, JSON body and extra headers."""
        state = self.state
        repo = re.escape(state.repo)
        with self._lock:
            if method == "GET" and path == "/user":
                if state.user_forbidden:
                    return 403, {"message": "Resource not accessible by integration"}, {}
                return 200, {"login": state.login, "type": "User"}, {}
            if m := re.fullmatch(rf"/repos/{repo}/collaborators/([^/]+)/permission", path):
                if method != "GET":
                    return 405, {"message": "method"}, {}
                permission = state.permissions.get(m.group(1))
                if permission is None:
                    return 404, {"message": f"{m.group(1)} is not a user"}, {}
                return 200, {**permission, "user": {"login": m.group(1)}}, {}
            if m := re.fullmatch(rf"/repos/{repo}/pulls/(\d+)/reviews", path):
                return 200, state.reviews.get(int(m.group(1)), []), {}
            if path == f"/repos/{state.repo}":
                return 200, {"full_name": state.repo, "default_branch": state.default_branch}, {}
            if m := re.fullmatch(rf"/repos/{repo}/branches/([^/]+)", path):
                sha = state.branches.get(unquote(m.group(1)))
                if sha is None:
                    return 404, {"message": "Branch not found"}, {}
                return 200, {"name": unquote(m.group(1)), "commit": {"sha": sha}}, {}
            if m := re.fullmatch(rf"/repos/{repo}/contents/(.+)", path):
                return self._contents(m.group(1), query.get("ref", ["HEAD"])[0])
            if m := re.fullmatch(rf"/repos/{repo}/pulls/(\d+)", path):
                pull = state.pulls.get(int(m.group(1)))
                return (200, pull, {}) if pull else (404, {"message": "Not Found"}, {})
            if m := re.fullmatch(rf"/repos/{repo}/issues/(\d+)/comments", path):
                return self._issue_comments(method, int(m.group(1)), query, body)
            if m := re.fullmatch(rf"/repos/{repo}/issues/comments/(\d+)", path):
                return self._comment(method, int(m.group(1)), body)
            if m := re.fullmatch(rf"/repos/{repo}/issues/comments/(\d+)/reactions", path):
                if int(m.group(1)) not in state.comments:
                    return 404, {"message": "Not Found"}, {}
                state.reactions.append((int(m.group(1)), body["content"]))
                return 201, {"id": len(state.reactions), "content": body["content"]}, {}
        return 404, {"message": "Not Found"}, {}

    def _contents(self, path: str, ref: str) -> tuple[int, Any, dict[str, str]]:
        """A file at a commit, read from the real repository with `git show`."""
        if self.state.git_root is None:
            return 404, {"message": "Not Found"}, {}
        # GitHub's servers do not share the runner's environment: neither does this git
        # (the server thread runs inside the Action's process, whose variables hold secrets).
        shown = subprocess.run(["git", "-C", str(self.state.git_root), "show", f"{ref}:{path}"],
                               capture_output=True, check=False,
                               env={"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent"})
        if shown.returncode != 0:
            return 404, {"message": "Not Found"}, {}
        return 200, {"type": "file", "path": path, "encoding": "base64",
                     "content": base64.b64encode(shown.stdout).decode()}, {}

    def _issue_comments(self, method: str, number: int, query: dict[str, list[str]],
                        body: Any) -> tuple[int, Any, dict[str, str]]:
        state = self.state
        if method == "GET":
            per_page = min(int(query.get("per_page", ["30"])[0]), state.page_size_cap)
            page = int(query.get("page", ["1"])[0])
            everything = self.comments_on(number)
            chunk = everything[(page - 1) * per_page: page * per_page]
            headers = {}
            if page * per_page < len(everything):
                path = f"{self.prefix}/repos/{state.repo}/issues/{number}/comments"
                headers["Link"] = (f'<{self.url.removesuffix(self.prefix)}{path}?per_page='
                                   f'{per_page}&page={page + 1}>; rel="next"')
            return 200, [_public(c) for c in chunk], headers
        if method == "POST":
            if state.comments_forbidden:
                return 403, {"message": "Resource not accessible by integration"}, {}
            problem = _check_body(body)
            if problem:
                return 422, {"message": problem}, {}
            return 201, _public(self._create_comment(number, state.author(), body["body"])), {}
        return 405, {"message": "method"}, {}

    def _comment(self, method: str, cid: int, body: Any) -> tuple[int, Any, dict[str, str]]:
        comment = self.state.comments.get(cid)
        if comment is None:
            return 404, {"message": "Not Found"}, {}
        if method == "GET":
            return 200, _public(comment), {}
        if method == "PATCH":
            if comment["user"]["login"] != self.state.author():
                return 403, {"message": "you can only edit your own comments"}, {}
            problem = _check_body(body)
            if problem:
                return 422, {"message": problem}, {}
            comment["body"] = body["body"]
            comment["updated_at"] = self.state.now()
            return 200, _public(comment), {}
        return 405, {"message": "method"}, {}


def _public(comment: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in comment.items() if k != "issue_number"}


def _check_body(body: Any) -> str | None:
    if not isinstance(body, dict) or not isinstance(body.get("body"), str):
        return "body is missing"
    if len(body["body"]) > COMMENT_LIMIT:
        return f"Body is too long (maximum is {COMMENT_LIMIT} characters)"
    return None


def _handler(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                self._reply(400, {"message": "Problems parsing JSON"}, {})
                return
            path = parts.path
            auth = self.headers.get("Authorization")
            if not path.startswith(fake.prefix + "/"):
                status, payload, headers = 404, {"message": "Not Found"}, {}
                path_recorded = path
            else:
                path_recorded = path.removeprefix(fake.prefix)
                if auth != f"Bearer {fake.state.token}":
                    status, payload, headers = 401, {"message": "Bad credentials"}, {}
                else:
                    status, payload, headers = fake.handle(
                        self.command, path_recorded, parse_qs(parts.query), body)
            fake.state.requests.append(Recorded(self.command, path_recorded,
                                                parse_qs(parts.query), body, auth))
            self._reply(status, payload, headers)

        def _reply(self, status: int, payload: Any, headers: dict[str, str]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    return Handler


@contextmanager
def fake_github(**kwargs: Any) -> Iterator[FakeGitHub]:
    server = FakeGitHub(**kwargs).start()
    try:
        yield server
    finally:
        server.stop()
