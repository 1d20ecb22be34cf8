"""Column types: Spark SQL type strings -> Spark ``StructType`` -> Arrow schema.

Why a parser of our own: pyspark 4's ``_parse_datatype_string`` sends the
string to the JVM (classic or Spark Connect), so it needs a running session;
the reconciler derives table schemas while planning, where no Spark should be
started. The grammar of Spark's type strings is small, so this module parses
it faithfully in Python: DECIMAL precision and scale (default ``(10,0)``, like
Spark), DATE, TIMESTAMP / TIMESTAMP_NTZ / TIMESTAMP_LTZ, intervals, and nested
ARRAY / MAP / STRUCT with per-field ``NOT NULL`` and ``COMMENT``.

CHAR(n) and VARCHAR(n) become STRING plus the ``__CHAR_VARCHAR_TYPE_STRING``
field metadata, which is exactly how Spark itself stores them in a table
schema (``CharVarcharUtils``), so tables written here look like tables written
by Spark. The length is recorded, not enforced.

The Arrow conversion is also ours (delegating only atomic types to pyspark):
pyspark's ``to_arrow_schema`` packs field metadata into one JSON blob under a
Spark-private key, while Delta field metadata must stay a flat string map.

``conform`` shapes a DataFrame to a declared schema before it is written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from reconciler.support.errors import ReconcileError

CHAR_VARCHAR_METADATA_KEY = "__CHAR_VARCHAR_TYPE_STRING"
"""Field metadata key under which Spark keeps the declared CHAR/VARCHAR type."""

ARROW_TIMEZONE = "UTC"
"""Timezone of Arrow timestamps; matches the session timezone set in ``session.py``."""


class ColumnLike(Protocol):
    """What ``spark_schema`` needs from a column (``reconciler.sql_parser.ColumnDef`` fits)."""

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def nullable(self) -> bool: ...


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


def _has_char_varchar(data_type: T.DataType) -> bool:
    if isinstance(data_type, T.CharType | T.VarcharType):
        return True
    if isinstance(data_type, T.ArrayType):
        return _has_char_varchar(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return _has_char_varchar(data_type.keyType) or _has_char_varchar(data_type.valueType)
    if isinstance(data_type, T.StructType):
        return any(_has_char_varchar(field.dataType) for field in data_type.fields)
    return False


def _storage_type(data_type: T.DataType) -> T.DataType:
    """Replace CHAR/VARCHAR by STRING everywhere (``replaceCharVarcharWithString``)."""
    if isinstance(data_type, T.CharType | T.VarcharType):
        return T.StringType()
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(_storage_type(data_type.elementType), data_type.containsNull)
    if isinstance(data_type, T.MapType):
        return T.MapType(
            _storage_type(data_type.keyType),
            _storage_type(data_type.valueType),
            data_type.valueContainsNull,
        )
    if isinstance(data_type, T.StructType):
        return T.StructType(
            [
                T.StructField(
                    field.name, _storage_type(field.dataType), field.nullable, field.metadata
                )
                for field in data_type.fields
            ]
        )
    return data_type


def _storage_field(field: T.StructField) -> T.StructField:
    """Like Spark, only top-level fields carry the declared type; nested ones just become STRING."""
    metadata = dict(field.metadata or {})
    if _has_char_varchar(field.dataType):
        metadata[CHAR_VARCHAR_METADATA_KEY] = field.dataType.simpleString()
    return T.StructField(field.name, _storage_type(field.dataType), field.nullable, metadata)


def parse_type(type_string: str) -> T.DataType:
    """Parse one Spark SQL type string, keeping CHAR/VARCHAR as such (no storage mapping).

    Raises ``TypeParseError`` (a ``ValueError``) with the position of the problem.
    """
    return _Parser(type_string).parse()


def spark_schema(columns: Iterable[ColumnLike]) -> T.StructType:
    """The Spark schema of a table: names, parsed types and nullability, in column order.

    CHAR/VARCHAR become STRING with Spark's char/varchar metadata (see the module
    docstring). An unparsable type is a one-line ``ReconcileError`` naming the column.
    """
    fields: list[T.StructField] = []
    for column in columns:
        try:
            data_type = parse_type(column.type)
        except TypeParseError as error:
            raise ReconcileError(
                f"column '{column.name}': unsupported type '{column.type}': {error}"
            ) from None
        fields.append(_storage_field(T.StructField(column.name, data_type, bool(column.nullable))))
    return T.StructType(fields)


def _flat_metadata(metadata: Mapping[str, Any] | None) -> dict[str, str] | None:
    """Delta and Arrow field metadata are flat string maps; JSON-encode anything else."""
    if not metadata:
        return None
    return {
        key: value if isinstance(value, str) else json.dumps(value)
        for key, value in metadata.items()
    }


def arrow_type(data_type: T.DataType) -> pa.DataType:
    """Arrow type of a Spark type; timestamps are ``timestamp[us, UTC]``, NTZ has no zone."""
    if isinstance(data_type, T.StructType):
        return pa.struct([arrow_field(field) for field in data_type.fields])
    if isinstance(data_type, T.ArrayType):
        element = pa.field("element", arrow_type(data_type.elementType), data_type.containsNull)
        return pa.list_(element)
    if isinstance(data_type, T.MapType):
        key = pa.field("key", arrow_type(data_type.keyType), nullable=False)
        value = pa.field("value", arrow_type(data_type.valueType), data_type.valueContainsNull)
        return pa.map_(key, value)
    return to_arrow_type(data_type, timezone=ARROW_TIMEZONE)


def arrow_field(field: T.StructField) -> pa.Field:
    """Arrow field with the same name, type, nullability and (flat) metadata."""
    return pa.field(
        field.name,
        arrow_type(field.dataType),
        nullable=field.nullable,
        metadata=_flat_metadata(field.metadata),
    )


def arrow_schema(struct: T.StructType) -> pa.Schema:
    """The Arrow schema delta-rs writes for a Spark schema (same names, types, nullability)."""
    return pa.schema([arrow_field(field) for field in struct.fields])


@lru_cache(maxsize=1024)
def struct_from_json(schema_json: str) -> T.StructType:
    """A Spark schema from Delta's ``schemaString`` JSON (Delta uses Spark's JSON format),
    decoded once per distinct text (shared by every caller: read-only)."""
    return T.StructType.fromJson(json.loads(schema_json))


def comparable(data_type: T.DataType) -> T.DataType:
    """A copy that keeps only what makes two table schemas different for us.

    Names, types, nullability (but inside arrays and maps, where Delta's Spark writer
    drops it) and the declared CHAR/VARCHAR type count; other
    field metadata (comments, ids or invariants added by a Delta writer) does not.
    """
    if isinstance(data_type, T.StructType):
        fields = []
        for field in data_type.fields:
            kept = {
                key: value
                for key, value in (field.metadata or {}).items()
                if key == CHAR_VARCHAR_METADATA_KEY
            }
            fields.append(
                T.StructField(field.name, comparable(field.dataType), field.nullable, kept)
            )
        return T.StructType(fields)
    if isinstance(data_type, T.ArrayType):  # Delta keeps no NOT NULL inside arrays and maps
        return T.ArrayType(loosened(comparable(data_type.elementType)), data_type.containsNull)
    if isinstance(data_type, T.MapType):
        return T.MapType(loosened(comparable(data_type.keyType)),
                         loosened(comparable(data_type.valueType)), data_type.valueContainsNull)
    return data_type


def same_schema(left: T.StructType, right: T.StructType) -> bool:
    """Whether two table schemas are the same for ``create``'s idempotency check."""
    return comparable(left) == comparable(right)


def loosened(data_type: T.DataType) -> T.DataType:
    """The type with every nested field, element and value nullable: what a cast targets.
    Spark refuses casts that tighten nested nullability; the writer checks NOT NULL."""
    if isinstance(data_type, T.StructType):
        return T.StructType([T.StructField(field.name, loosened(field.dataType), True,
                                           field.metadata) for field in data_type.fields])
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(loosened(data_type.elementType), True)
    if isinstance(data_type, T.MapType):
        return T.MapType(loosened(data_type.keyType), loosened(data_type.valueType), True)
    return data_type


def conform(df: DataFrame, schema: T.StructType, *, where: str) -> DataFrame:
    """``df`` with exactly ``schema``'s columns, in its order, cast where the type differs.

    A missing column is a one-line error naming the table; extra columns are dropped.
    """
    present = {name.lower(): name for name in df.columns}
    missing = [field.name for field in schema.fields if field.name.lower() not in present]
    if missing:
        raise ReconcileError(f"{where}: data has no column(s) {', '.join(missing)}")
    types = {field.name.lower(): field.dataType for field in df.schema.fields}
    columns = []
    for field in schema.fields:
        quoted = present[field.name.lower()].replace("`", "``")
        source = F.col(f"`{quoted}`")
        if loosened(types[field.name.lower()]) != loosened(field.dataType):
            source = source.cast(loosened(field.dataType))
        columns.append(source.alias(field.name))
    return df.select(*columns)
