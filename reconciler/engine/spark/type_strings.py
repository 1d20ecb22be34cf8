"""Spark SQL type strings parsed in Python: `DECIMAL(10,2)`, `ARRAY<STRUCT<a: INT>>`.

Why a parser of our own: pyspark 4's ``_parse_datatype_string`` sends the
string to the JVM (classic or Spark Connect), so it needs a running session;
the reconciler derives table schemas while planning, where no Spark should be
started. The grammar of Spark's type strings is small, so this module parses
it faithfully: DECIMAL precision and scale (default ``(10,0)``, like Spark),
DATE, TIMESTAMP / TIMESTAMP_NTZ / TIMESTAMP_LTZ, intervals, and nested ARRAY /
MAP / STRUCT with per-field ``NOT NULL`` and ``COMMENT``. CHAR and VARCHAR are
kept as such: how a table stores them is ``schema``'s concern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pyspark.sql import types as T


class TypeParseError(ValueError):
    """Not a Spark SQL type string; ``spark_schema`` turns it into a ``ReconcileError``."""


_ATOMIC: dict[str, type[T.DataType]] = {
    "BOOLEAN": T.BooleanType,
    "TINYINT": T.ByteType,
    "BYTE": T.ByteType,
    "SMALLINT": T.ShortType,
    "SHORT": T.ShortType,
    "INT": T.IntegerType,
    "INTEGER": T.IntegerType,
    "BIGINT": T.LongType,
    "LONG": T.LongType,
    "FLOAT": T.FloatType,
    "REAL": T.FloatType,
    "DOUBLE": T.DoubleType,
    "DATE": T.DateType,
    "TIMESTAMP": T.TimestampType,
    "TIMESTAMP_LTZ": T.TimestampType,
    "TIMESTAMP_NTZ": T.TimestampNTZType,
    "BINARY": T.BinaryType,
    "VOID": T.NullType,
    "VARIANT": T.VariantType,
}
_DECIMAL_NAMES = {"DECIMAL", "DEC", "NUMERIC"}
_YEAR_MONTH = {"YEAR": T.YearMonthIntervalType.YEAR, "MONTH": T.YearMonthIntervalType.MONTH}
_DAY_TIME = {
    "DAY": T.DayTimeIntervalType.DAY,
    "HOUR": T.DayTimeIntervalType.HOUR,
    "MINUTE": T.DayTimeIntervalType.MINUTE,
    "SECOND": T.DayTimeIntervalType.SECOND,
}
_MAX_DECIMAL_PRECISION = 38

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<quoted>`(?:[^`]|``)*`)
      | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
      | (?P<word>[A-Za-z0-9_]+)
      | (?P<punct>[<>(),:])
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Token:
    kind: str  # quoted | string | word | punct | end
    text: str
    pos: int


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    end = len(text.rstrip())
    pos = 0
    while pos < end:
        match = _TOKEN.match(text, pos)
        if not match or match.lastgroup is None:
            start = len(text) - len(text[pos:].lstrip())
            raise TypeParseError(f"unexpected character {text[start]!r} at position {start + 1}")
        kind = match.lastgroup
        tokens.append(_Token(kind, match.group(kind), match.start(kind)))
        pos = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


class _Parser:
    """Recursive descent over Spark's ``dataType`` grammar (``SqlBaseParser.g4``)."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokenize(text)
        self.index = 0

    # -- token helpers -------------------------------------------------------
    def peek(self) -> _Token:
        return self.tokens[self.index]

    def advance(self) -> _Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def fail(self, expected: str) -> TypeParseError:
        token = self.peek()
        found = "end of type" if token.kind == "end" else repr(token.text)
        return TypeParseError(f"expected {expected} but found {found} at position {token.pos + 1}")

    def expect_punct(self, char: str) -> None:
        token = self.peek()
        if token.kind != "punct" or token.text != char:
            raise self.fail(f"'{char}'")
        self.advance()

    def accept_punct(self, char: str) -> bool:
        token = self.peek()
        if token.kind == "punct" and token.text == char:
            self.advance()
            return True
        return False

    def accept_word(self, word: str) -> bool:
        token = self.peek()
        if token.kind == "word" and token.text.upper() == word:
            self.advance()
            return True
        return False

    def integer(self) -> int:
        token = self.peek()
        if token.kind != "word" or not token.text.isdigit():
            raise self.fail("an integer")
        self.advance()
        return int(token.text)

    def identifier(self) -> str:
        token = self.peek()
        if token.kind == "quoted":
            self.advance()
            return token.text[1:-1].replace("``", "`")
        if token.kind == "word":
            self.advance()
            return token.text
        raise self.fail("a field name")

    def string_literal(self) -> str:
        token = self.peek()
        if token.kind != "string":
            raise self.fail("a string literal")
        self.advance()
        return re.sub(r"\\(.)", r"\1", token.text[1:-1])

    # -- grammar ---------------------------------------------------------------
    def parse(self) -> T.DataType:
        data_type = self.data_type()
        if self.peek().kind != "end":
            raise self.fail("end of type")
        return data_type

    def data_type(self) -> T.DataType:
        token = self.peek()
        if token.kind != "word":
            raise self.fail("a type name")
        name = self.advance().text.upper()
        if name == "ARRAY":
            self.expect_punct("<")
            element = self.data_type()
            self.expect_punct(">")
            return T.ArrayType(element, containsNull=True)
        if name == "MAP":
            self.expect_punct("<")
            key = self.data_type()
            self.expect_punct(",")
            value = self.data_type()
            self.expect_punct(">")
            return T.MapType(key, value, valueContainsNull=True)
        if name == "STRUCT":
            return self.struct_body()
        if name == "INTERVAL":
            return self.interval()
        if name in _DECIMAL_NAMES:
            return self.decimal()
        if name in ("CHAR", "CHARACTER", "VARCHAR"):
            self.expect_punct("(")
            length = self.integer()
            self.expect_punct(")")
            return T.VarcharType(length) if name == "VARCHAR" else T.CharType(length)
        if name == "STRING":
            if self.accept_word("COLLATE"):
                return T.StringType(self.identifier())
            return T.StringType()
        if name == "TIME" and hasattr(T, "TimeType"):
            precision = 6
            if self.accept_punct("("):
                precision = self.integer()
                self.expect_punct(")")
            return T.TimeType(precision)
        atomic = _ATOMIC.get(name)
        if atomic is None:
            self.index -= 1
            raise self.fail("a Spark SQL type")
        return atomic()

    def decimal(self) -> T.DecimalType:
        precision, scale = 10, 0
        if self.accept_punct("("):
            precision = self.integer()
            if self.accept_punct(","):
                scale = self.integer()
            self.expect_punct(")")
        if not 1 <= precision <= _MAX_DECIMAL_PRECISION:
            raise TypeParseError(
                f"DECIMAL precision {precision} is out of range 1..{_MAX_DECIMAL_PRECISION}"
            )
        if scale > precision:
            raise TypeParseError(f"DECIMAL scale {scale} is larger than its precision {precision}")
        return T.DecimalType(precision, scale)

    def interval(self) -> T.DataType:
        start_token = self.peek()
        start = start_token.text.upper() if start_token.kind == "word" else ""
        if start not in _YEAR_MONTH and start not in _DAY_TIME:
            raise self.fail("an interval unit (YEAR, MONTH, DAY, HOUR, MINUTE, SECOND)")
        self.advance()
        end = start
        if self.accept_word("TO"):
            end_token = self.peek()
            end = end_token.text.upper() if end_token.kind == "word" else ""
            units = _YEAR_MONTH if start in _YEAR_MONTH else _DAY_TIME
            if end not in units or units[end] < units[start]:
                raise self.fail(f"an interval unit after {start} TO")
            self.advance()
        if start in _YEAR_MONTH:
            return T.YearMonthIntervalType(_YEAR_MONTH[start], _YEAR_MONTH[end])
        return T.DayTimeIntervalType(_DAY_TIME[start], _DAY_TIME[end])

    def struct_body(self) -> T.StructType:
        self.expect_punct("<")
        fields: list[T.StructField] = []
        if self.accept_punct(">"):
            return T.StructType(fields)
        while True:
            name = self.identifier()
            self.accept_punct(":")
            data_type = self.data_type()
            nullable = True
            metadata: dict[str, Any] = {}
            if self.accept_word("NOT"):
                if not self.accept_word("NULL"):
                    raise self.fail("NULL after NOT")
                nullable = False
            if self.accept_word("COMMENT"):
                metadata["comment"] = self.string_literal()
            fields.append(T.StructField(name, data_type, nullable, metadata))
            if self.accept_punct(">"):
                return T.StructType(fields)
            self.expect_punct(",")


def parse_type(type_string: str) -> T.DataType:
    """Parse one Spark SQL type string, keeping CHAR/VARCHAR as such (no storage mapping).

    Raises ``TypeParseError`` (a ``ValueError``) with the position of the problem.
    """
    return _Parser(type_string).parse()
