"""Column types: a table's columns -> Spark ``StructType`` -> Arrow schema.

The type strings themselves are parsed without Spark (``type_strings``); this module
makes a table's schema of them, as Spark would store it, converts schemas to Arrow,
and shapes frames to a declared schema.

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
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, Protocol

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from reconciler.engine.spark.type_strings import TypeParseError, parse_type
from reconciler.support.errors import ReconcileError

CHAR_VARCHAR_METADATA_KEY = "__CHAR_VARCHAR_TYPE_STRING"
"""Field metadata key under which Spark keeps the declared CHAR/VARCHAR type."""

ARROW_TIMEZONE = "UTC"
"""Timezone of Arrow timestamps; matches the session timezone set in ``session.py``."""


def quoted(name: str) -> str:
    """A SQL identifier (or a `delta.` table path) in backticks, backticks doubled."""
    return "`" + name.replace("`", "``") + "`"


class ColumnLike(Protocol):
    """What ``spark_schema`` needs from a column (``reconciler.sql_parser.ColumnDef`` fits)."""

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def nullable(self) -> bool: ...


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
