"""Found by Spark's data source lookup (modules named ``pyspark_*`` exposing ``DefaultSource``):
makes ``format("dafka")`` work without ``spark.dataSource.register``."""

from dafka.spark import DafkaDataSource as DefaultSource

__all__ = ["DefaultSource"]
