"""The dafka sink with a fault on its writer: ``format("dafka_faulty")``, for the Spark
drivers of the exactly-once test (``eos_driver.py``) and the chaos soak
(``scripts/spark_chaos.py``).

The fault (``dafka.testing.fail_sink_task``) rides on the writer Spark pickles to the
executors; the data source class is made inside :func:`faulty_source`, so that Spark's
cloudpickle sends it by value (a local class has no importable name) and the executors need
nothing of this test tree.
"""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSourceStreamWriter
from pyspark.sql.types import StructType

from dafka.spark import DafkaDataSource, DafkaStreamWriter, SinkFault

FAULTY = "dafka_faulty"


def faulty_source(fault: SinkFault) -> type[DafkaDataSource]:
    """A data source named :data:`FAULTY`: the dafka sink with ``fault`` on its writer."""

    class FaultyDafka(DafkaDataSource):
        @classmethod
        def name(cls) -> str:
            return FAULTY

        def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
            writer = DafkaDataSource.streamWriter(self, schema, overwrite)
            assert isinstance(writer, DafkaStreamWriter)
            writer.fault = fault
            return writer

    return FaultyDafka


def register_faulty_sink(spark: SparkSession, fault: SinkFault) -> str:
    """Register the faulty sink on ``spark``; the format name to write with."""
    spark.dataSource.register(faulty_source(fault))
    return FAULTY


__all__ = ["FAULTY", "faulty_source", "register_faulty_sink"]
