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


class ObjectFailed(ReconcileError):
    """Work on one object (a view, a table, a connector) failed in the engine.

    The message keeps the first line of the cause, for the person at the terminal;
    `public` keeps only the error's class (and Spark's error condition) and the
    object, for what others may read: pull-request comments and manifests, which
    must never echo data values or anything the cause quoted.
    """

    def __init__(self, what: str, name: str, cause: BaseException):
        text = str(cause).strip()
        first = text.splitlines()[0] if text else ""
        self.public = f"{what} '{name}': {error_class(cause)}"
        super().__init__(f"{what} '{name}': {type(cause).__name__}: {first}".rstrip(": "))


class QuotesData(ReconcileError):
    """An error whose whole text quotes row values (an expectation's violating rows).

    `str()` and `public` are its public form: the relation, the rule and the counts, what a
    pull request, an output, a summary or a manifest may show. `detail` adds the values,
    for the terminal of the person who ran the command (and a runner's own log) only:
    whatever forgets to ask for the detail shows the public form, never the data.
    """

    def __init__(self, public: str, detail: str):
        super().__init__(public)
        self.public = self.format()
        self.detail = " ".join(detail.split())


class RepeatsEachStep(QuotesData):
    """A failure the next step meets again, since the rows that caused it stay in what it
    reads (a FAIL UPDATE expectation's violating rows): `until` says what lets the
    pipeline go on, for `reconcile status` to show beside the failure."""

    def __init__(self, public: str, detail: str, until: str):
        super().__init__(public, detail)
        self.until = until


def repeats_until(error: BaseException) -> str | None:
    """`RepeatsEachStep.until` of `error` or of what it was raised from; None otherwise."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, RepeatsEachStep):
            return seen.until
        seen = seen.__cause__ or seen.__context__
    return None


class PipelinePaused(ReconcileError):
    """A step found its pipeline not `Running` (awaiting approval, or a failed bootstrap): a
    continuous runner waits for an apply or approval instead of stopping."""


def error_class(error: BaseException) -> str:
    """`AnalysisException [UNRESOLVED_COLUMN...]`: the class and Spark's condition, no text."""
    condition = getattr(error, "getCondition", None) or getattr(error, "getErrorClass", None)
    try:
        code = condition() if callable(condition) else None
    except Exception:  # a Py4J error object that cannot answer any more
        code = None
    return type(error).__name__ + (f" [{code}]" if code else "")


def public_message(error: BaseException) -> str:
    """What may be shown to anyone: our own one-line messages (URLs redacted), or for any
    other error only its class and the object it concerned."""
    from reconciler.redact import redact_text

    if isinstance(error, (ObjectFailed, QuotesData)):
        return error.public
    ours = {cls.__name__ for cls in type(error).__mro__} & {"ReconcileError", "StateBackendError"}
    if ours:  # (state_backends is not imported here: it is a package of its own)
        return redact_text(str(error))
    return error_class(error)


def private_message(error: BaseException) -> str:
    """What the person who ran the command reads on their terminal: the detail of an error
    that quotes data, else the error's own one line. Never for what others may read."""
    return error.detail if isinstance(error, QuotesData) else str(error)


class Terminated(BaseException):
    """SIGTERM (a cancelled CI job, `kill`) turned into an exception in the main thread, as
    Python turns SIGINT into KeyboardInterrupt: the command unwinds, so every lock it holds
    is released on the way out, and nothing past the last manifest commit counts (the next
    command discards or adopts what an interrupted write left, as after a crash)."""

