"""Keeping secrets out of what we show: plans, manifests, comments, logs.

A URL can carry a secret in its user info (`s3://key:secret@bucket`), its query
(`?sig=...`) or Spark Connect's parameters (`sc://host:15002/;token=...`); a
setting's value can be a secret when its key says so. What is shown keeps the
scheme, host, port and path, and a hash stands in for a secret value so a change
is still visible.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import urlsplit, urlunsplit

_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"`<>]+")
_SECRET_KEY = re.compile(r"(?i)(secret|passw|token|credential|access\.?key|session|"
                         r"private|signature|sas\b|auth)")


def redact_url(url: str) -> str:
    """`sc://user:pw@host:15002/;token=x?y=z` -> `sc://host:15002/`."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # not a URL after all (a bad port, say): show nothing of it
        return "<url>"
    path = parts.path.split(";", 1)[0]
    return urlunsplit((parts.scheme, host + port, path, "", ""))


def redact_text(text: str) -> str:
    """Every URL in `text` redacted (error messages quote them)."""
    return _URL.sub(lambda match: redact_url(match.group(0)), text)


def fingerprint(value: object) -> str:
    return "sha256:" + hashlib.sha256(repr(value).encode("utf-8")).hexdigest()[:16]


def shown_value(key: str, value: object) -> str:
    """A setting as a plan may show it: a hash for secret-looking keys, URLs redacted
    (with a hash when redacting hid something, so a changed token still shows)."""
    if _SECRET_KEY.search(key):
        return fingerprint(value)
    text = str(value)
    redacted = redact_text(text)
    return redacted if redacted == text else f"{redacted} ({fingerprint(value)})"
