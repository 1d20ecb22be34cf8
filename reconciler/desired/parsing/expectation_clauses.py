"""Expectations: `CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | FAIL UPDATE]`.

Spark Declarative Pipelines' syntax, written where Databricks puts it: among a
table's column definitions (`CREATE TABLE t (a INT, CONSTRAINT c EXPECT (a > 0))`)
or in a view's parenthesis before `AS` (`CREATE MATERIALIZED VIEW v (CONSTRAINT c
EXPECT (x > 0) ON VIOLATION DROP ROW) AS SELECT ...`). Neither sqlglot nor Spark
parses `ON VIOLATION`, so the clauses are taken out of the statement's tokens here
(a scan of sqlglot's tokens, never of the raw text: a string literal or comment
holding the words is not a clause), the rest is parsed as any statement, and the
program keeps them beside the relation.

A condition is pipeline SQL from a pull request, so it passes the checks a view's
query does (`desired.parsing.safety`: Spark's pure built-ins only, nothing Spark's variable
substitution acts on, no bare name Spark reads as a clock or session call), and it
must be one boolean expression over the relation's own columns: no subquery, no
aggregate or window, no other relation's name.

Violation: a row violates an expectation when its condition is FALSE. NULL passes,
as in a SQL `CHECK` constraint (and Delta's); write `x IS NOT NULL AND ...` to catch
NULLs (`docs/expectations.md`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from reconciler.desired.parsing.safety import check_bare_names, check_substitution, check_view_query
from reconciler.support.errors import ReconcileError, did_you_mean

Action = Literal["keep", "drop", "fail"]
ACTION_WORDS: dict[Action, str] = {"keep": "", "drop": "ON VIOLATION DROP ROW",
                                   "fail": "ON VIOLATION FAIL UPDATE"}
_ACTIONS: dict[tuple[str, ...], Action] = {("DROP", "ROW"): "drop", ("FAIL", "UPDATE"): "fail"}
DROP_ALIAS = "__expectations"
"""The derived table a view's query becomes when a DROP ROW expectation filters it."""
_NOT_BOOLEAN = (exp.Literal, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.DPipe,
                exp.Star)
"""Roots a condition cannot have: a number, a string, arithmetic (Spark would fail the step)."""


@dataclass(frozen=True)
class Expectation:
    name: str
    condition: str  # Spark SQL of the parsed condition, comments dropped, names lower-cased
    action: Action
    line: int

    def document(self) -> dict[str, str]:
        return {"name": self.name, "condition": self.condition, "action": self.action}

    def describe(self) -> str:
        words = ACTION_WORDS[self.action]
        return f"{self.name} EXPECT ({self.condition})" + (f" {words}" if words else "")


def split_expectations(tokens: list[Token], text: str, file: str
                       ) -> tuple[list[Token], tuple[Expectation, ...]]:
    """The statement's tokens without its expectation clauses, and the clauses.

    Only the first parenthesis at depth 0 of a CREATE statement (a table's column list,
    or a view's parenthesis before `AS`) is looked at; an item there that reads
    `CONSTRAINT <name> EXPECT` is an expectation, taken out with its comma. A view's
    parenthesis left empty goes too. `text` is the file the tokens index into.
    """
    if not tokens or tokens[0].token_type != TokenType.CREATE:
        return tokens, ()
    start = next((index for index, token in enumerate(tokens)
                  if token.token_type in (TokenType.L_PAREN, TokenType.ALIAS)), None)
    if start is None or tokens[start].token_type != TokenType.L_PAREN:
        return tokens, ()
    end, items = _items(tokens, start)
    if end is None or start < 2:
        return tokens, ()
    kind = "table" if any(t.token_type == TokenType.TABLE for t in tokens[:start]) else "view"
    relation_kind = f"{kind} '{tokens[start - 1].text.lower()}'"
    found: list[Expectation] = []
    dropped: set[int] = set()
    for index, (first, last) in enumerate(items):
        if not _is_expectation(tokens, first, last):
            continue
        found.append(_expectation(tokens, first, last, text, file, relation_kind))
        comma = first - 1 if index > 0 else last + 1  # the comma before it, or after it
        dropped.update(range(first, last + 1))
        if tokens[comma].token_type == TokenType.COMMA:
            dropped.add(comma)
    if not found:
        return tokens, ()
    names = [expectation.name for expectation in found]
    for expectation in found:
        if names.count(expectation.name) > 1:
            raise ReconcileError(f"{relation_kind}: duplicate expectation "
                                 f"'{expectation.name}'", file=file, line=expectation.line)
    if len(dropped) == end - start - 1:  # nothing else in the parenthesis
        dropped.update((start, end))
    return [token for index, token in enumerate(tokens) if index not in dropped], tuple(found)


def _items(tokens: list[Token], start: int) -> tuple[int | None, list[tuple[int, int]]]:
    """Where the parenthesis opened at `start` closes, and its comma-separated items as
    (first, last) token indexes."""
    depth, first = 0, start + 1
    items: list[tuple[int, int]] = []
    for index in range(start, len(tokens)):
        kind = tokens[index].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                if index > first:
                    items.append((first, index - 1))
                return index, items
        elif kind == TokenType.COMMA and depth == 1:
            items.append((first, index - 1))
            first = index + 1
    return None, items


def _is_expectation(tokens: list[Token], first: int, last: int) -> bool:
    return (last - first >= 2 and tokens[first].token_type == TokenType.CONSTRAINT
            and tokens[first + 2].text.upper() == "EXPECT")


def _expectation(tokens: list[Token], first: int, last: int, text: str, file: str,
                 relation_kind: str) -> Expectation:
    line = tokens[first].line

    def error(message: str) -> ReconcileError:  # one line: the relation, file and line
        return ReconcileError(f"{relation_kind}: {message}", file=file, line=line)

    name_token = tokens[first + 1]
    name = name_token.text.lower()
    if name_token.token_type not in (TokenType.VAR, TokenType.IDENTIFIER) or \
            not name.replace("_", "a").isalnum():
        raise error(f"expectation name '{name_token.text}' is not allowed: use letters, "
                    "digits and underscores")
    opened = first + 3
    if opened > last or tokens[opened].token_type != TokenType.L_PAREN:
        raise error(f"expectation '{name}': write EXPECT (<condition>)")
    closed, _ = _items(tokens, opened)
    if closed is None or closed > last or closed == opened + 1:
        raise error(f"expectation '{name}': write EXPECT (<condition>)")
    words = tuple(token.text.upper() for token in tokens[closed + 1: last + 1])
    if words and (len(words) != 4 or words[:2] != ("ON", "VIOLATION")
                  or words[2:] not in _ACTIONS):
        raise error(f"expectation '{name}': after EXPECT (...) only ON VIOLATION DROP ROW "
                    f"or ON VIOLATION FAIL UPDATE may follow, not '{' '.join(words)}'")
    action: Action = _ACTIONS[words[2:]] if words else "keep"
    source = text[tokens[opened + 1].start: tokens[closed - 1].end + 1]
    condition = _condition(source, f"expectation '{name}'", error)
    check_substitution(source, condition, f"{relation_kind}: expectation '{name}'", file, line)
    try:  # the allow-list of functions a view's query has, on `SELECT <condition>`
        check_view_query(exp.select(condition.copy()).from_("__relation"), source, name,
                         file, line)
    except ReconcileError as refused:
        raise error("expectation " + refused.message.removeprefix("view ")) from None
    return Expectation(name, condition.sql(dialect="spark"), action, line)


def _condition(source: str, subject: str,
               error: Callable[[str], ReconcileError]) -> exp.Expr:
    """The parsed condition (comments dropped, column names lower-cased), refused unless
    it is one row-by-row boolean expression of unqualified columns."""
    try:
        tree = sqlglot.parse_one(source, dialect="spark")
    except (ParseError, TokenError):
        raise error(f"{subject}: cannot parse the condition '{source}'") from None
    except RecursionError:  # a shape check_nesting does not count: NOT NOT NOT ...
        raise error(f"{subject}: the condition is nested too deeply") from None
    for node in tree.walk():
        if isinstance(node, (exp.Query, exp.Subquery, exp.Exists)):
            raise error(f"{subject}: a condition may not hold a subquery")
        if isinstance(node, (exp.AggFunc, exp.Window)):
            raise error(f"{subject}: a condition is checked row by row: no aggregate or "
                        "window function")
        if isinstance(node, exp.Column) and (node.table or isinstance(node.this, exp.Star)):
            raise error(f"{subject}: write the relation's own columns unqualified, not "
                        f"'{node.sql(dialect='spark')}'")
        node.comments = None
    if isinstance(tree, _NOT_BOOLEAN):
        raise error(f"{subject}: the condition must be true or false for a row, not "
                    f"'{source}'")
    for column in tree.find_all(exp.Column):
        column.set("this", exp.to_identifier(column.name.lower(), quoted=column.this.quoted))
    return tree


def check_columns(expectations: Sequence[Expectation], columns: Sequence[str] | None,
                  relation_kind: str, file: str) -> None:
    """Each condition reads only columns the relation has (None: not known, let through),
    and no bare name Spark would read as a clock or session call."""
    if columns is None:
        return
    known = {column.lower() for column in columns}
    for expectation in expectations:
        tree = sqlglot.parse_one(expectation.condition, dialect="spark")
        for column in tree.find_all(exp.Column):
            if column.name.lower() not in known and not _is_literal_call(column):
                raise ReconcileError(
                    f"{relation_kind}: expectation '{expectation.name}' reads '{column.name}', "
                    f"which is not a column of it ({', '.join(columns)})"
                    + did_you_mean(column.name, columns), file=file, line=expectation.line)
        try:
            check_bare_names(exp.select(tree).from_("__relation"),
                             {"__relation": list(known)}, expectation.name, file,
                             expectation.line)
        except ReconcileError as refused:
            raise ReconcileError(f"{relation_kind}: expectation "
                                 + refused.message.removeprefix("view "), file=file,
                                 line=expectation.line) from None


def _is_literal_call(column: exp.Column) -> bool:
    """`current_date` and the like: `check_bare_names` refuses them with its own words."""
    from reconciler.desired.parsing.safety import LITERAL_FUNCTIONS

    return column.name.lower() in LITERAL_FUNCTIONS


def drop_conditions(expectations: Sequence[dict[str, str]]) -> list[str]:
    """The conditions of DROP ROW expectations, from a document's entries."""
    return [entry["condition"] for entry in expectations if entry["action"] == "drop"]


def violated(condition: str) -> str:
    """Spark SQL that is true for a row the condition rejects (FALSE; NULL passes)."""
    return f"NOT coalesce(({condition}), true)"


def with_drops(query: exp.Query, conditions: Sequence[str]) -> exp.Query:
    """A view's query with rows that a DROP ROW expectation rejects filtered out:
    `SELECT * FROM (<query>) AS __expectations WHERE coalesce((c), true) AND ...`, a
    select over a derived table that incremental maintenance keeps like the query."""
    if not conditions:
        return query
    keep = " AND ".join(f"coalesce(({condition}), true)" for condition in conditions)
    return exp.select("*").from_(exp.Subquery(this=query.copy(), alias=exp.TableAlias(
        this=exp.to_identifier(DROP_ALIAS)))).where(sqlglot.parse_one(keep, dialect="spark"))


@cache
def executable_view_query(statement_sql: str) -> str:
    """The Spark SQL a view statement runs: its query, without its expectation clauses,
    filtered by its DROP ROW expectations."""
    tokenizer = Dialect.get_or_raise("spark").tokenizer()
    tokens, expectations = split_expectations(tokenizer.tokenize(statement_sql),
                                              statement_sql, "")
    [create] = [statement for statement in Dialect.get_or_raise("spark").parser().parse(
        tokens, statement_sql) if statement is not None]
    assert isinstance(create, exp.Create) and isinstance(create.expression, exp.Query)
    drops = [e.condition for e in expectations if e.action == "drop"]
    return with_drops(create.expression, drops).sql(dialect="spark")


def expectation_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What changed among two document entries' expectations, as a plan says it:
    `expectation positive added: EXPECT (amount > 0) ON VIOLATION DROP ROW`."""
    before = {e["name"]: e for e in old.get("expectations", ())}
    after = {e["name"]: e for e in new.get("expectations", ())}
    changes = []
    for name in sorted({*before, *after}):
        if before.get(name) == after.get(name):
            continue
        if name not in before:
            changes.append(f"expectation {name} added: {_shown(after[name])}")
        elif name not in after:
            changes.append(f"expectation {name} removed")
        else:
            changes.append(f"expectation {name}: {_shown(before[name])} -> "
                           f"{_shown(after[name])}")
    return changes


def _shown(entry: Mapping[str, Any]) -> str:
    """An expectation's document entry as a plan shows it (an entry is read JSON)."""
    words = ACTION_WORDS[entry["action"]]
    return f"EXPECT ({entry['condition']})" + (f" {words}" if words else "")
