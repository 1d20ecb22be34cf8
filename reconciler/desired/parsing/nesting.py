"""How deeply pipeline SQL may nest: refused in one line before sqlglot parses it.

sqlglot's parser, and every walk of the tree it builds (resolution, lineage, SQL
generation), recurses once per level of nesting, so a view of a few thousand nested
parentheses (any pull request can write one) would end in a `RecursionError` and a
traceback. `check_nesting` counts the depth on the statement's tokens, which is
cheap and needs no recursion, and refuses past `MAX_DEPTH` with the file and the line
where it is exceeded; a run of prefix operators (`NOT NOT NOT ...`) counts as deep.
Shapes it does not count may still recurse: `refuse_deep_recursion` turns the
`RecursionError` of whatever parses or walks one statement into one line too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sqlglot.tokens import Token, TokenType

from reconciler.support.errors import ReconcileError

MAX_DEPTH = 100
"""Levels of parentheses, brackets and CASE ... END a statement may nest. Far above what
a person writes, far below what sqlglot and the analyses can recurse through."""
_OPEN = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE,
                   TokenType.CASE})
_CLOSE = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE,
                    TokenType.END})
_PREFIX = frozenset({TokenType.NOT, TokenType.DASH, TokenType.PLUS, TokenType.TILDE,
                     TokenType.EXCLAMATION})
TOO_DEEP = "SQL nested too deeply"


def check_nesting(tokens: Sequence[Token], file: str) -> None:
    """Refuse a statement nested deeper than `MAX_DEPTH`, at the line where it is. A run of
    prefix operators (`NOT NOT ...`, `- - ...`) nests as deep as parentheses do."""
    depth = run = 0
    for token in tokens:
        kind = token.token_type
        run = run + 1 if kind in _PREFIX else 0
        if kind in _OPEN:
            depth += 1
        elif kind in _CLOSE:
            depth -= 1
        if depth + run > MAX_DEPTH:
            raise ReconcileError(f"{TOO_DEEP}: more than {MAX_DEPTH} levels of parentheses, "
                                 "CASE or NOT", file=file, line=token.line)


@contextmanager
def refuse_deep_recursion(file: str, line: int | None) -> Iterator[None]:
    """A `RecursionError` while parsing or analysing one statement, as one line naming its
    file and line (the stack has unwound by the time it is raised)."""
    try:
        yield
    except RecursionError:
        raise ReconcileError(f"{TOO_DEEP} to analyse",
                             file=file, line=line) from None
