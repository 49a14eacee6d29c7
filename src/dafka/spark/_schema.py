"""The source's row schema (modelled on Spark's Kafka source) and its exact Arrow twin.

Spark checks that every Arrow RecordBatch a Python source yields equals the Arrow form of
the declared schema (``to_arrow_schema(schema, timezone="UTC")``, nullability and list item
names included), so the Arrow schema is derived from the Spark one here, once, rather than
written twice.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])

SOURCE_SCHEMA = StructType(
    [
        StructField("topic", StringType(), nullable=False),
        StructField("partition", StringType(), nullable=False),
        StructField("offset", LongType(), nullable=False),
        StructField("index", IntegerType(), nullable=False),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", ArrayType(HEADER)),
        StructField("timestamp", TimestampType()),
        StructField("uuid", BinaryType()),
    ]
)
"""One row per message: ``offset`` is the sequence of the RECORD that carried it, ``index``
its position inside a batched RECORD (0 for a plain one)."""

SOURCE_ARROW_SCHEMA: pa.Schema = to_arrow_schema(SOURCE_SCHEMA, timezone="UTC")

NO_HEADERS_SCHEMA = StructType([f for f in SOURCE_SCHEMA.fields if f.name != "headers"])
"""``includeHeaders=false``: the rows without their ``headers`` column."""


def source_schema(include_headers: bool) -> StructType:
    """The rows' schema with or without ``headers`` (option ``includeHeaders``)."""
    return SOURCE_SCHEMA if include_headers else NO_HEADERS_SCHEMA


def without_headers(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` of :data:`SOURCE_ARROW_SCHEMA` without its ``headers`` column."""
    return batch.drop_columns(["headers"])


__all__ = [
    "NO_HEADERS_SCHEMA",
    "SOURCE_ARROW_SCHEMA",
    "SOURCE_SCHEMA",
    "source_schema",
    "without_headers",
]
