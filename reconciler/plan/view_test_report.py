"""One pipeline's view tests as a plan carries them (`pipelines[].tests`), typed.

The Action runs a pull request's view tests in a child process (`github.view_test_gate`)
and attaches the outcome to the plan; the comment shows it and an apply refuses while a
test fails. Between those, it is this record: the JSON shape (`document`) exists only in
the plan artifact written out and read back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ViewTestResult:
    """One test: its name, its file relative to the project, and why it failed."""

    name: str
    file: str
    passed: bool
    failure: str | None

    def document(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "failure": self.failure,
                "file": self.file}

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> ViewTestResult:
        return cls(document["name"], document["file"], document["passed"],
                   document.get("failure"))


@dataclass(frozen=True)
class ViewTestReport:
    """A pipeline's tests: each one's result, or (`error`) why none could run."""

    results: tuple[ViewTestResult, ...] = ()
    error: str | None = None
    format: int | None = None  # of `reconcile test --json`'s report

    @classmethod
    def could_not_run(cls, why: str) -> ViewTestReport:
        return cls(error=why)

    @property
    def failed(self) -> int:
        return sum(not result.passed for result in self.results)

    @property
    def passed(self) -> int:
        return len(self.results) - self.failed

    def document(self) -> dict[str, Any]:
        if self.error is not None:
            return {"error": self.error}
        return {"format": self.format, "passed": self.passed, "failed": self.failed,
                "results": [result.document() for result in self.results]}

    @classmethod
    def from_document(cls, document: Mapping[str, Any] | None) -> ViewTestReport | None:
        """A saved plan's `tests` (None when the plan has none)."""
        if document is None:
            return None
        if document.get("error") is not None:
            return cls.could_not_run(str(document["error"]))
        return cls(tuple(ViewTestResult.from_document(result)
                         for result in document["results"]), format=document.get("format"))
