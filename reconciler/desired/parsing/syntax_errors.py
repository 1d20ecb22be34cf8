"""Explain SQL that does not parse: the token where it goes wrong, and what was meant.

sqlglot's own words are about its parser (`Expecting )`, or an opaque Command whose first
unparsed token is `customer_id`); a person wants to hear about what they wrote. So every
syntax error here points at a token (`file:line:column`, with the line for the caret under it,
`errors.error_at`), and a word that is not a keyword but is close to one (`selct`,
`form`, `gruop by`, a type `decmal`) is named as the likely mistake, when writing the
keyword there makes the statement parse: a column that happens to be called `form` is
never blamed for an error elsewhere.

Only the error path comes here, and a statement comes from a pull request: the guesses are
bounded: `MAX_GUESSES` words among the `GUESS_WINDOW` tokens before the failure, each with
its two closest keywords, one parse each; then, in a statement of at most 8 windows, one
parse with every such word written as its keyword; no guess at all in a statement over
`MAX_GUESSED_TOKENS` tokens (each parse costs about 0.1 s at that size).
"""

from __future__ import annotations

import re
from collections import Counter

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError, TokenError
from sqlglot.tokens import Token, TokenType

from reconciler.support.errors import ReconcileError, closest, error_at

_SPARK = Dialect.get_or_raise("spark")  # sqlglot caches the class; this is one instance
MAX_GUESSES = 4
GUESS_WINDOW = 64
MAX_GUESSED_TOKENS = 20_000
MAX_SEARCHED_TOKENS = 1_000
"""Longest CREATE whose parsed prefix is searched for the unexpected token (quadratic: up
to a few seconds at this size, 24 s at 4,000 tokens); a missing ';' is found at any size."""

KEYWORDS = frozenset({
    "SELECT", "FROM", "WHERE", "GROUP", "ORDER", "BY", "HAVING", "JOIN", "LEFT", "RIGHT",
    "INNER", "OUTER", "FULL", "CROSS", "SEMI", "ANTI", "ON", "USING", "AS", "AND", "OR", "NOT",
    "NULL", "IS", "IN", "BETWEEN", "LIKE", "RLIKE", "EXISTS", "CASE", "WHEN", "THEN", "ELSE",
    "END", "DISTINCT", "UNION", "ALL", "INTERSECT", "EXCEPT", "LIMIT", "OFFSET", "OVER",
    "PARTITION", "WINDOW", "ROWS", "RANGE", "PRECEDING", "FOLLOWING", "UNBOUNDED", "CURRENT",
    "WITH", "CREATE", "TABLE", "VIEW", "MATERIALIZED", "TBLPROPERTIES", "PRIMARY", "KEY",
    "CONSTRAINT", "EXPECT", "VIOLATION", "LATERAL", "QUALIFY", "ASC", "DESC", "NULLS", "FIRST",
    "LAST", "INTERVAL", "TRUE", "FALSE", "DEFAULT", "NATURAL", "PIVOT", "UNPIVOT", "EXPLODE"
})
"""The words of a pipeline's SQL a typo most likely meant (Spark's keywords that appear in
CREATE TABLE, CREATE VIEW and queries), for suggestions only."""

TYPES = frozenset({
    "STRING", "INT", "INTEGER", "BIGINT", "SMALLINT", "TINYINT", "BYTE", "SHORT", "LONG",
    "FLOAT", "DOUBLE", "REAL", "DECIMAL", "NUMERIC", "BOOLEAN", "DATE", "TIMESTAMP",
    "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "BINARY", "VARCHAR", "CHAR", "ARRAY", "MAP", "STRUCT"
})
"""Spark SQL's column types, for `unknown type 'decmal' (did you mean DECIMAL?)`."""


def token_error(error: TokenError, text: str, shown: str, scanned: list[Token]
                ) -> ReconcileError:
    """The token the tokenizer could not read, and what is wrong with it.

    sqlglot words the error as "Error tokenizing '<100 characters around it>'" and keeps the
    problem as the cause, e.g. "Missing ' from 3:17" whose second number is the token's
    offset (the first is where scanning stopped, often the end of the file); the compiled
    tokenizer (sqlglotc) keeps it as the context instead. Without an offset, the bad token
    starts right after the last good one.
    """
    cause = error.__cause__ or error.__context__
    match = re.fullmatch(r"(.+) from \d+:(\d+)", str(cause), re.DOTALL)
    if match:
        problem, offset = match[1], int(match[2])
        if problem.startswith("Missing "):
            problem = f"unterminated quote: missing closing {problem.removeprefix('Missing ')}"
    else:
        after = scanned[-1].end + 1 if scanned else 0
        offset = len(text) - len(text[after:].lstrip())
        problem = ("unterminated /* comment" if text.startswith("/*", offset)
                   else "cannot read the text here")
    return error_at(f"SQL syntax error: {problem}", shown, text, offset)


def parse_error(error: ParseError, tokens: list[Token], text: str, shown: str
                ) -> ReconcileError:
    """A statement sqlglot refused: the likely misspelt word before the token it stopped at,
    else that token and sqlglot's description without its parser's vocabulary."""
    detail = error.errors[0] if error.errors else {}
    index = _token_index(tokens, detail.get("line"), detail.get("col"))
    if (guessed := misspelling(tokens, text, shown, index)) is not None:
        return guessed
    description = str(detail.get("description") or error).split(". Line")[0]
    description = description.split(" but got <Token")[0]
    bad = tokens[index] if index is not None else tokens[-1]
    if _in_column_type(tokens, index):
        return error_at(f"unknown type '{bad.text}'", shown, text, bad.start, bad.end)
    return error_at(f"SQL syntax error: {description} near '{detail.get('highlight', '')}'",
                    shown, text, bad.start, bad.end)


def command_error(tokens: list[Token], text: str, shown: str, only_create: str
                  ) -> ReconcileError:
    """Explain a statement sqlglot could only parse as an opaque Command.

    When a prefix of it parses as a CREATE, the token after that prefix is unexpected (a
    misspelt keyword before it, or most often the next statement after a missing ';');
    otherwise the statement is one we do not support, e.g. `MSCK REPAIR` or `CREATE ROLE`.
    The longest such prefix is searched from the end, one parse per token, each as long as
    the prefix: a CREATE over `MAX_SEARCHED_TOKENS` tokens is not searched.
    """
    glued = next((index for index, token in enumerate(tokens)
                  if index and token.token_type == TokenType.CREATE), None)
    if tokens[0].token_type == TokenType.CREATE and len(tokens) > MAX_SEARCHED_TOKENS and (
            glued is None or not isinstance(_parsed(tokens[:glued], text), exp.Create)):
        return misspelling(tokens, text, shown, None) or ReconcileError(
            "SQL syntax error: the statement does not parse as CREATE TABLE or CREATE VIEW",
            file=shown, line=tokens[0].line)
    if tokens[0].token_type == TokenType.CREATE:
        first = [glued] if glued is not None else []  # a missing ';': one parse says so
        for index in [*first, *range(len(tokens) - 1, 0, -1)]:
            if isinstance(_parsed(tokens[:index], text), exp.Create):
                if (guessed := misspelling(tokens, text, shown, index)) is not None:
                    return guessed
                bad = tokens[index]
                hint = " (missing ';' before it?)" if bad.token_type == TokenType.CREATE else ""
                return error_at(f"SQL syntax error: unexpected '{bad.text}'{hint}", shown, text,
                                bad.start, bad.end)
    if (guessed := misspelling(tokens, text, shown, len(tokens) - 1)) is not None:
        return guessed
    words = " ".join(token.text.upper() for token in tokens[:2])
    kind = words if tokens[0].token_type == TokenType.CREATE else tokens[0].text.upper()
    return ReconcileError(f"unsupported statement {kind}: {only_create}", file=shown,
                          line=tokens[0].line)  # as for the statements sqlglot does parse


def misspelling(tokens: list[Token], text: str, shown: str, failed_at: int | None
                ) -> ReconcileError | None:
    """`unknown keyword 'selct' (did you mean SELECT?)` at the word, when a word shortly
    before token `failed_at` (or at it; the end of the statement when None) is close to a
    keyword or type and writing that keyword there makes the statement parse, or, in a short
    statement, when writing every such word of it as its keyword does (more than one typo,
    or one past where sqlglot stopped: `left jion`; the first is named); else None."""
    if len(tokens) > MAX_GUESSED_TOKENS:
        return None
    end = len(tokens) if failed_at is None else failed_at + 1
    nearby = _guesses(tokens, range(max(0, end - GUESS_WINDOW), end))[-MAX_GUESSES:]
    for index, words in reversed(nearby):  # the nearest to the failure first
        for word in words:
            if isinstance(_parsed(_written(tokens, index, word), text), exp.Create):
                return _misspelt(tokens[index], word, text, shown)
    guesses = _guesses(tokens, range(len(tokens))) if len(tokens) <= GUESS_WINDOW * 8 else []
    if {index for index, _ in guesses} - {index for index, _ in nearby}:
        # more than one typo, or one after where sqlglot stopped: every guess at once
        corrected = tokens
        for index, words in reversed(guesses[:MAX_GUESSES * 2]):
            corrected = _written(corrected, index, words[0])
        if isinstance(_parsed(corrected, text), exp.Create):
            return _misspelt(tokens[guesses[0][0]], guesses[0][1][0], text, shown)
    return None


def _guesses(tokens: list[Token], indexes: range) -> list[tuple[int, list[str]]]:
    """The unquoted words at `indexes` that are no keyword but close to one (or a type),
    with their two closest, in order. A word the statement uses as a name is none: one
    written twice (`from orders o join orders p`: no ORDER) or qualified (`o.form`)."""
    names = Counter(token.text.lower() for token in tokens
                    if token.token_type in (TokenType.VAR, TokenType.IDENTIFIER))
    found = []
    for index in indexes:
        token = tokens[index]
        if (token.token_type == TokenType.VAR and token.text.upper() not in KEYWORDS
                and names[token.text.lower()] == 1 and not _qualified(tokens, index)
                and (words := closest(token.text, KEYWORDS | TYPES, count=2))):
            found.append((index, words))
    return found


def _qualified(tokens: list[Token], index: int) -> bool:
    """Whether token `index` is part of a dotted name (`o.form`, `form.x`)."""
    return any(0 <= near < len(tokens) and tokens[near].token_type == TokenType.DOT
               for near in (index - 1, index + 1))


def _misspelt(token: Token, word: str, text: str, shown: str) -> ReconcileError:
    kind = "type" if word in TYPES else "keyword"
    return error_at(f"unknown {kind} '{token.text}' (did you mean {word}?)", shown, text,
                    token.start, token.end)


def _written(tokens: list[Token], index: int, word: str) -> list[Token]:
    """`tokens` with token `index` read as `word`; with the next word too when they make one
    keyword (`GROUP BY`, `ORDER BY`: one token in sqlglot)."""
    following = tokens[index + 1] if index + 1 < len(tokens) else None
    pair = following is not None and following.token_type == TokenType.VAR
    try:
        replaced = _SPARK.tokenize(f"{word} {following.text}" if pair and following else word)
    except TokenError:
        return tokens
    return [*tokens[:index], *replaced, *tokens[index + (2 if pair else 1):]]


def _parsed(tokens: list[Token], text: str) -> exp.Expr | None:
    """The one statement `tokens` parse to, or None when they do not parse (an opaque
    Command comes back as a Command: callers ask for a CREATE)."""
    try:
        parsed = _SPARK.parser().parse(tokens, text)
    except (SqlglotError, RecursionError):
        return None
    return parsed[0] if len(parsed) == 1 else None


def _token_index(tokens: list[Token], line: int | None, col: int | None) -> int | None:
    """The statement's token that sqlglot's error names by its line and (last) column."""
    for index, token in enumerate(tokens):
        if token.line == line and token.col == col:
            return index
    return None


def _in_column_type(tokens: list[Token], index: int | None) -> bool:
    """Whether token `index` is an unquoted word where a CREATE TABLE's column type goes:
    right after a column name that opens the list or follows a comma."""
    if index is None or index < 3 or tokens[index].token_type != TokenType.VAR:
        return False
    if [token.token_type for token in tokens[:2]] != [TokenType.CREATE, TokenType.TABLE]:
        return False
    name, before = tokens[index - 1], tokens[index - 2]
    return (name.token_type in (TokenType.VAR, TokenType.IDENTIFIER)
            and before.token_type in (TokenType.L_PAREN, TokenType.COMMA))
