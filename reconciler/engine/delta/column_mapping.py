"""Reading a column-mapped Delta table's files by their columns' physical names.

With Delta's column mapping (`delta.columnMapping.mode = name`, which lets
evolution drop a column in the log alone: `engine.bootstrap.evolution`) the Parquet files no
longer name columns as the table does. The log's schema maps each field to its
`delta.columnMapping.physicalName`: a column that existed when the mapping was
turned on keeps its name, one added later is `col-<uuid>`, nested fields too.
Scanning the files with the physical names and renaming the columns back keeps
pinned reads what they are for the other tables: Spark reading a version's files
directly, without Delta's snapshot rebuild.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reconciler.support.errors import ReconcileError

PHYSICAL_NAME = "delta.columnMapping.physicalName"


def read_by_physical_names(scan: Callable[[list[str], T.StructType], DataFrame],
                           files: list[str], stored: T.StructType, wanted: T.StructType,
                           where: str) -> DataFrame:
    """`wanted`'s columns of a column-mapped version's `files`: `scan` reads them by the
    physical names the log's schema `stored` gives, and the columns are renamed back."""
    return _by_logical_names(scan(files, _physical_schema(stored, wanted, where)), wanted)


def _physical_schema(stored: T.StructType, wanted: T.StructType, where: str) -> T.StructType:
    """`wanted`'s columns as the files name them, from the log's schema `stored`."""
    fields = {field.name: field for field in stored.fields}
    missing = [field.name for field in wanted.fields if field.name not in fields]
    if missing:
        raise ReconcileError(f"{where}: no column {missing[0]} in the table")
    return T.StructType([_physical_field(fields[field.name]) for field in wanted.fields])


def _by_logical_names(frame: DataFrame, wanted: T.StructType) -> DataFrame:
    """Columns read by physical names renamed to `wanted`'s (top level by alias, nested
    fields by a cast, which Spark applies to a struct's fields by position)."""
    return frame.select(*(F.col(f"`{physical}`").cast(field.dataType).alias(field.name)
                          for physical, field in zip(frame.columns, wanted.fields,
                                                     strict=True)))


def _physical_field(field: T.StructField) -> T.StructField:
    return T.StructField(field.metadata.get(PHYSICAL_NAME, field.name),
                         _physical_type(field.dataType), field.nullable)


def _physical_type(data_type: T.DataType) -> T.DataType:
    if isinstance(data_type, T.StructType):
        return T.StructType([_physical_field(field) for field in data_type.fields])
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(_physical_type(data_type.elementType), data_type.containsNull)
    if isinstance(data_type, T.MapType):
        return T.MapType(_physical_type(data_type.keyType), _physical_type(data_type.valueType),
                         data_type.valueContainsNull)
    return data_type
