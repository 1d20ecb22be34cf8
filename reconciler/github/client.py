"""A tiny GitHub REST client on the standard library (urllib), for the Action.

Why not a GitHub SDK: the Action needs a dozen endpoints, and every dependency
added here is installed on every workflow run. Why the base URL is a
parameter: GitHub Enterprise Server serves the API under ``/api/v3`` on its
own host and sets ``GITHUB_API_URL`` accordingly; tests point it at a fake
server on loopback.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from reconciler import __version__
from reconciler.support.errors import ReconcileError

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
PAGE_SIZE = 100
MAX_PAGES = 50  # 5,000 comments: enough for any pull request, and a bound on a runaway loop
_NEXT_LINK = re.compile(r'<([^>]+)>\s*;\s*rel="next"')


class GitHubError(ReconcileError):
    """A failed API call: the HTTP status is kept so callers can tell 403 from 404."""

    def __init__(self, method: str, path: str, status: int, detail: str):
        self.status = status
        super().__init__(f"GitHub API {method} {path} failed: HTTP {status}: {detail}")


@dataclass(frozen=True)
class Response:
    status: int
    data: Any
    next_url: str | None


class GitHubClient:
    """Authenticated JSON requests against one API root (``GITHUB_API_URL``)."""

    def __init__(self, token: str, api_url: str = DEFAULT_API_URL, *, timeout: float = 30.0):
        if not token:
            raise ReconcileError("no GitHub token: set the github-token input (GITHUB_TOKEN)")
        self.api_url = api_url.rstrip("/")
        self._token = token
        self._timeout = timeout

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One call; returns the decoded JSON (None for an empty body)."""
        return self._send(method, self._url(path), body, path).data

    def request_object(self, method: str, path: str,
                       body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One call whose answer is a JSON object (an endpoint that answers otherwise, as a
        server that is not GitHub's might, is a failed call)."""
        found = self.request(method, path, body)
        if not isinstance(found, dict):
            raise GitHubError(method, path, 200, f"expected a JSON object, got "
                                                 f"{type(found).__name__}")
        return found

    def paginate(self, path: str) -> Iterator[Any]:
        """Every item of a list endpoint, following ``Link: rel="next"`` within the API root."""
        separator = "&" if "?" in path else "?"
        url: str | None = self._url(f"{path}{separator}per_page={PAGE_SIZE}")
        for _ in range(MAX_PAGES):
            if url is None:
                return
            response = self._send("GET", url, None, path)
            yield from response.data or []
            url = response.next_url
            # A token must never be sent to a host the API root does not name.
            if url is not None and not url.startswith(self.api_url + "/"):
                raise GitHubError("GET", path, response.status,
                                  f"pagination link leaves the API root: {url}")

    def _url(self, path: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"API paths start with '/': {path}")
        return self.api_url + path

    def _send(self, method: str, url: str, body: dict[str, Any] | None,
              label: str) -> Response:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers={
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {self._token}",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": f"pipeline-reconciler/{__version__}",
            **({"Content-Type": "application/json"} if data is not None else {}),
        })
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as reply:
                raw = reply.read()
                status = reply.status
                link = reply.headers.get("Link", "")
        except urllib.error.HTTPError as error:
            raise GitHubError(method, label, error.code, _error_detail(error)) from None
        except (urllib.error.URLError, TimeoutError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ReconcileError(f"GitHub API {method} {label}: cannot reach {self.api_url}: "
                                 f"{reason}") from None
        match = _NEXT_LINK.search(link)
        return Response(status, json.loads(raw) if raw.strip() else None,
                        match.group(1) if match else None)

    # -- the endpoints the Action uses ---------------------------------------------------------

    def own_login(self) -> str:
        return str(self.request("GET", "/user")["login"])

    def permission(self, repo: str, user: str) -> dict[str, Any]:
        return self.request_object("GET", f"/repos/{repo}/collaborators/{_quote(user)}/permission")

    def pull_request(self, repo: str, number: int) -> dict[str, Any]:
        return self.request_object("GET", f"/repos/{repo}/pulls/{number}")

    def reviews(self, repo: str, number: int) -> Iterator[dict[str, Any]]:
        return self.paginate(f"/repos/{repo}/pulls/{number}/reviews")

    def default_branch(self, repo: str) -> str:
        return str(self.request("GET", f"/repos/{repo}")["default_branch"])

    def branch_head(self, repo: str, branch: str) -> str:
        """The commit a branch points at now (the branches API)."""
        return str(self.request("GET", f"/repos/{repo}/branches/{_quote(branch)}")
                   ["commit"]["sha"])

    def file_at(self, repo: str, path: str, ref: str) -> str | None:
        """A file's text at a commit (the contents API), or None when it does not exist."""
        try:
            found = self.request("GET", f"/repos/{repo}/contents/"
                                        f"{'/'.join(_quote(part) for part in path.split('/'))}"
                                        f"?ref={_quote(ref)}")
        except GitHubError as error:
            if error.status == 404:
                return None
            raise
        if not isinstance(found, dict) or found.get("type") != "file":
            return None
        try:
            return base64.b64decode(found.get("content") or "").decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise ReconcileError(f"{path} at {ref[:12]} is not UTF-8 text") from None

    def issue_comments(self, repo: str, number: int) -> Iterator[dict[str, Any]]:
        return self.paginate(f"/repos/{repo}/issues/{number}/comments")

    def create_comment(self, repo: str, number: int, body: str) -> dict[str, Any]:
        return self.request_object("POST", f"/repos/{repo}/issues/{number}/comments",
                                   {"body": body})

    def update_comment(self, repo: str, comment_id: int, body: str) -> dict[str, Any]:
        return self.request_object("PATCH", f"/repos/{repo}/issues/comments/{comment_id}",
                                   {"body": body})

    def react(self, repo: str, comment_id: int, content: str) -> None:
        self.request("POST", f"/repos/{repo}/issues/comments/{comment_id}/reactions",
                     {"content": content})


def _quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def _error_detail(error: urllib.error.HTTPError) -> str:
    """GitHub's JSON ``message``, or the start of whatever else came back."""
    try:
        raw = error.read()
    except OSError:
        raw = b""
    try:
        message = json.loads(raw).get("message")
    except (ValueError, AttributeError):
        message = None
    text = message or raw.decode("utf-8", "replace")[:200] or error.reason
    return " ".join(str(text).split())
