"""One error type for everything a user can get wrong.

Every message is a single line that names where the problem is (a file and
line, with the column of the token at fault when there is one, or an object such
as a pipeline or a view), so the CLI can print it as is and exit 1 without a
traceback. It also says what the user probably meant where a known name is close
(`did_you_mean`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

EXCERPT_WIDTH = 160
"""Most characters of a source line shown under an error: a minified one-line SQL file
would otherwise print megabytes; the window is centred on the column."""


class ReconcileError(Exception):
    """A user-facing error: one line, with the location in front when known.

    An error that points at a token also keeps its `column` (1-based) and the text of its
    source line (`source`, `width` characters underlined), for the excerpt a terminal shows
    under the line (`excerpt`); `str()` stays the one line, for logs and pull requests.
    """

    def __init__(self, message: str, *, file: str | Path | None = None, line: int | None = None,
                 column: int | None = None, source: str | None = None, width: int = 1):
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.column = column if line is not None else None
        self.source = source if self.column is not None else None
        self.width = max(1, width)
        super().__init__(self.format())

    def format(self) -> str:
        where = ""
        if self.file is not None:
            where = f"{self.file}: "
            if self.line is not None:
                column = f":{self.column}" if self.column is not None else ""
                where = f"{self.file}:{self.line}{column}: "
        return _printable(where + " ".join(self.message.split()))

    def excerpt(self) -> list[str]:
        """The source line and a caret line under the token, or [] without a column.

        The line is the project's own text, but a pull request writes it: control and
        format characters (terminal escapes, bidirectional overrides) are shown as '?',
        one for one so the caret stays under its token, and a long line is cut to
        `EXCERPT_WIDTH` characters around the column.
        """
        if self.source is None or self.column is None:
            return []
        text = _printable(self.source.expandtabs(1))
        start = min(max(0, self.column - 1 - EXCERPT_WIDTH // 2),
                    max(0, len(text) - EXCERPT_WIDTH))
        shown = text[start:start + EXCERPT_WIDTH]
        left = "..." if start > 0 else ""
        right = "..." if start + EXCERPT_WIDTH < len(text) else ""
        offset = len(left) + self.column - 1 - start
        width = max(1, min(self.width, len(shown) - (self.column - 1 - start)))
        return ["  " + left + shown + right, "  " + " " * offset + "^" * width]


def error_at(message: str, file: str, text: str, start: int, end: int | None = None
             ) -> ReconcileError:
    """An error pointing at `text[start:end + 1]` (a token, by its offsets in the file's
    text as the tokenizer counts them): its line and column, and the line for the excerpt."""
    start = max(0, min(start, len(text)))
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end
    width = (min(end, line_end - 1) - start + 1) if end is not None else 1
    return ReconcileError(message, file=file, line=text.count("\n", 0, start) + 1,
                          column=start - line_start + 1, source=text[line_start:line_end],
                          width=width)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest of `choices` to a misspelt `word`, or ''."""
    found = closest(word, choices)
    return f" (did you mean '{found[0]}'?)" if found else ""


def closest(word: str, choices: Iterable[str], count: int = 1) -> list[str]:
    """The `choices` closest to `word`, best first, compared without case; none unless close
    (difflib's ratio 0.75 and up: a letter wrong, missing or two swapped in a short name)."""
    import difflib  # only when a name is wrong: the CLI's start imports this module

    by_case = {choice.lower(): choice for choice in choices}
    return [by_case[found] for found in
            difflib.get_close_matches(word.lower(), by_case, n=count, cutoff=0.75)]


def _printable(text: str) -> str:
    """`text` with control and format characters (escapes, bidi overrides) as '?'."""
    if text.isprintable():
        return text
    import unicodedata

    return "".join(char if char == " " or unicodedata.category(char) not in ("Cc", "Cf", "Zl",
                                                                             "Zp") else "?"
                   for char in text)


class ObjectFailed(ReconcileError):
    """Work on one object (a view, a table, a connector) failed in the engine.

    The message keeps the first line of the cause, for the person at the terminal;
    `public` keeps only the error's class (and Spark's error condition) and the
    object, for what others may read: pull-request comments and manifests, which
    must never echo data values or anything the cause quoted.
    """

    def __init__(self, what: str, name: str, cause: BaseException):
        self.what, self.name = what, name
        self.public = f"{what} '{name}': {error_class(cause)}"
        super().__init__(f"{what} '{name}': {type(cause).__name__}: {_headline(cause)}"
                         .rstrip(": "))


_JAVA_CAUSE = re.compile(r"^(?:Caused by: |: )?[\w.$]+(?:Exception|Error): (.+)$", re.MULTILINE)


def _headline(cause: BaseException) -> str:
    """The first line of an error, or for a bare Py4JJavaError ("An error occurred while
    calling o123.save.") the innermost Java cause's message (`[DIVIDE_BY_ZERO] ...`)."""
    text = str(cause).strip()
    first = text.splitlines()[0] if text else ""
    if getattr(cause, "java_exception", None) is None:
        return first
    causes = _JAVA_CAUSE.findall(text)
    return causes[-1].strip() if causes else first


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
    """`AnalysisException [UNRESOLVED_COLUMN...]`: the class and Spark's condition, no text.

    A call into the JVM that PySpark does not wrap (Delta's writer, some catalog calls)
    raises a bare `Py4JJavaError`: its condition is the innermost one along the Java
    exception's causes (a task's `CAST_INVALID_INPUT` inside the write's `SparkException`)."""
    code = _condition(error) or _java_condition(getattr(error, "java_exception", None))
    return type(error).__name__ + (f" [{code}]" if code else "")


JAVA_CAUSES_READ = 8
"""How deep a Java exception's causes are searched for a condition."""


def _condition(error: object) -> str | None:
    """Spark's error condition of a Python or (through Py4J) Java exception, if it has one."""
    for getter in ("getCondition", "getErrorClass"):
        condition = getattr(error, getter, None)
        try:
            code = condition() if callable(condition) else None
        except Exception:  # a Java object without the method, or one that cannot answer
            code = None
        if code:
            return str(code)
    return None


def _java_condition(java: object) -> str | None:
    """The innermost condition along a Java exception's causes: a failed write's own
    (`TASK_WRITE_FAILED`) wraps what failed in its task (`CAST_INVALID_INPUT`)."""
    innermost = None
    for _ in range(JAVA_CAUSES_READ):
        if java is None:
            break
        innermost = _condition(java) or innermost
        try:
            java = java.getCause()  # type: ignore[attr-defined]
        except Exception:
            break
    return innermost


def public_message(error: BaseException) -> str:
    """What may be shown to anyone: our own one-line messages (URLs redacted), or for any
    other error only its class and the object it concerned."""
    from reconciler.support.redaction import redact_text

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

