"""A statement's forms that compare equal when its meaning does.

`desired.parsing.sql` parses a statement once and keeps three things derived from it that no
later layer may compute differently: the canonical text a view's fingerprint is taken
of (`canonical_text`), the digest the analysis memo is keyed on (`statement_digest`),
and a tree without source positions, its positions kept aside by node for error
messages (`drop_positions`). Kept apart from the parsing itself, since each is a
promise to other layers (fingerprints, the memo, lineage's copies) about what counts
as a change.
"""

from __future__ import annotations

import hashlib
import json

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

_OPERATOR_SYNONYMS = {"!=": "<>", "==": "="}
_POSITIONS = frozenset({"line", "col", "start", "end"})  # what sqlglot's parser puts in meta
_STRING_TOKENS = frozenset(kind for kind in TokenType if kind.name.endswith("STRING"))


def statement_digest(source_text: str, tokens: list[Token]) -> str:
    """SHA-256 of what a statement's parse depends on: its text, and the comments the
    tokenizer attached to its first and last tokens (a comment before a statement goes to
    its first token, one after its last token on the same line to the last): a comment's
    text can reach the tree and the SQL generated from it."""
    payload = json.dumps([source_text[tokens[0].start: tokens[-1].end + 1], tokens[0].comments,
                          tokens[-1].comments], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def drop_positions(tree: exp.Expr,
                   spans: dict[int, tuple[int, int]] | None = None) -> dict[int, int]:
    """Take from `tree` the source positions the parser keeps on each node (line, column
    and offsets, in `meta`; anything else there stays), returning each node's line by
    `id(node)`, for error messages; and into `spans`, when given, each node's (start, end)
    offsets.

    Copying a tree, which maintenance analysis does and SQL generation does first,
    copies each node's `meta` through `copy.deepcopy`: most of what a copy costs, and
    only error messages read a position.
    """
    lines: dict[int, int] = {}
    for node in tree.walk():
        meta = node._meta
        if meta:
            if (line := meta.get("line")) is not None:
                lines[id(node)] = line
            if spans is not None and "start" in meta and "end" in meta:
                spans[id(node)] = (meta["start"], meta["end"])
            node._meta = (None if meta.keys() <= _POSITIONS else
                          {key: value for key, value in meta.items() if key not in _POSITIONS})
    return lines


def canonical_text(tokens: list[Token]) -> str:
    """The canonical form of a query: its tokens, with what carries no meaning removed.

    The tokenizer already drops comments and whitespace; keywords are upper-cased and
    identifiers lower-cased (Spark resolves both case-insensitively), while string literals
    keep their case. Working on tokens instead of regenerating SQL from the syntax tree
    keeps `plan` fast on large pipelines (about 20x cheaper than sqlglot's generator).
    Operator synonyms (`!=` and `<>`, `==` and `=`) are spelled one way.
    """
    parts = []
    for token in tokens:
        kind = token.token_type
        if kind == TokenType.VAR:
            parts.append(token.text.lower())
        elif kind == TokenType.IDENTIFIER:
            parts.append(f"`{token.text.lower()}`")
        elif kind in _STRING_TOKENS:
            quoted = token.text.replace("\\", "\\\\").replace("'", "\\'")
            parts.append(("" if kind == TokenType.STRING else kind.name + ":") + f"'{quoted}'")
        elif kind == TokenType.NUMBER:
            parts.append(token.text)
        else:
            text = token.text.upper()
            parts.append(_OPERATOR_SYNONYMS.get(text, text))
    return " ".join(parts)
