"""One error type for everything a user can get wrong.

Every message is a single line that names where the problem is (a file and
line, or an object such as a pipeline or a view), so the CLI can print it as is
and exit 1 without a traceback.
"""

from __future__ import annotations

from pathlib import Path


class ReconcileError(Exception):
    """A user-facing error: one line, with the location in front when known."""

    def __init__(self, message: str, *, file: str | Path | None = None, line: int | None = None):
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        super().__init__(self.format())

    def format(self) -> str:
        where = ""
        if self.file is not None:
            where = f"{self.file}:{self.line}: " if self.line is not None else f"{self.file}: "
        return where + " ".join(self.message.split())
