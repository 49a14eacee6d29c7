"""dafka's PySpark connector: ``format("dafka")`` for Structured Streaming and batch.

The only package that imports pyspark (install ``dafka[spark]``). ``format("dafka")`` works
without registration because the top-level module ``pyspark_dafka`` exposes
:class:`DafkaDataSource` as ``DefaultSource`` (Spark looks up ``pyspark_*`` modules);
:func:`register` registers it explicitly too. See ``docs/spark.md``.
"""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from dafka.errors import (
    ConfigError,
    DataLossError,  # the one class (the Spark API names it too)
)
from dafka.spark._options import parse_sink_options, parse_source_options
from dafka.spark._schema import source_schema
from dafka.spark._sink import (
    DafkaBatchWriter,
    DafkaStreamWriter,
    SinkFault,
    foreach_batch,
    sink_name,
)
from dafka.spark._source import DafkaBatchReader, DafkaStreamReader, FailedStreamReader
from dafka.spark._workers import check_workers


class DafkaDataSource(DataSource):
    """``format("dafka")``: a source of dafka topics and a sink into them."""

    @classmethod
    def name(cls) -> str:
        return "dafka"

    def schema(self) -> StructType:
        """The rows' schema; called when a read is defined (``load()``), so the options a
        batch and a streaming read share are checked here: a typo fails ``load()`` with the
        same :class:`~dafka.errors.ConfigError` in both (raised later, in the streaming
        planner's ``streamReader``, PySpark buries it under an ``UnboundLocalError``)."""
        options = parse_source_options(self.options, streaming=None)
        return source_schema(options.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return DafkaBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        try:
            options = parse_source_options(self.options, streaming=True)
        except ConfigError as error:
            # Raised here, PySpark's planner process fails on its own cleanup
            # (UnboundLocalError) and the ConfigError is buried in its traceback.
            return FailedStreamReader(error)
        return DafkaStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = parse_sink_options(self.options)
        return DafkaBatchWriter(options, sink_name(options, dict(self.options), once=True), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = parse_sink_options(self.options)
        return DafkaStreamWriter(options, sink_name(options, dict(self.options)), schema)


def register(spark: SparkSession) -> None:
    """Register ``format("dafka")`` on ``spark`` (not needed when dafka is installed in the
    workers' interpreter), after checking that Spark's Python workers can import dafka
    (:func:`check_workers`: a :class:`ConfigError` says which interpreter and how to fix
    it, where Spark would say ``DATA_SOURCE_NOT_FOUND`` or fail in the workers)."""
    check_workers(spark)
    spark.dataSource.register(DafkaDataSource)


__all__ = [
    "DafkaBatchWriter",
    "DafkaDataSource",
    "DafkaStreamWriter",
    "DataLossError",
    "SinkFault",
    "check_workers",
    "foreach_batch",
    "register",
]
