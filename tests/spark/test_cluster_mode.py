"""One query on a multi-process Spark: ``local-cluster[2,1,1024]`` (two executor JVMs).

The connector must work where Spark distributes the work: the driver's planner process and
each executor's Python workers import it separately, and input partitions and commit
messages travel pickled between processes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from dafka.client import PartitionProducer
from tests.spark.committed import committed_values
from tests.spark.conftest import Cluster, make_session


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = make_session(
        "local-cluster[2,1,1024]",
        **{"spark.executor.memory": "768m", "spark.executorEnv.SPARK_LOCAL_IP": "127.0.0.1"},
    )
    yield session
    session.stop()


def test_read_and_exactly_once_write_on_two_executors(
    spark: SparkSession, cluster: Cluster
) -> None:
    for p in range(2):
        with PartitionProducer("lc-in", cluster.transport, producer_id=f"lc.{p}") as producer:
            for i in range(500):
                producer.publish(b"%d-%d" % (p, i))
            assert producer.flush(30)
    df = (
        spark.read.format("dafka")
        .option("towers", cluster.towers)
        .option("subscribe", "lc-in")
        .option("minPartitions", "4")
        .load()
    )
    assert df.rdd.getNumPartitions() >= 4
    executors = df.rdd.mapPartitions(lambda _: [__import__("os").getpid()]).distinct().count()
    assert executors >= 2, "the read ran in a single executor process"
    (
        df.select("value")
        .write.mode("append")
        .format("dafka")
        .option("towers", cluster.towers)
        .option("topic", "lc-out")
        .option("name", "lc")
        .save()
    )
    expected = [b"%d-%d" % (p, i) for p in range(2) for i in range(500)]
    assert Counter(committed_values(cluster, "lc-out")) == Counter(expected)
    out = (
        spark.read.format("dafka")
        .option("towers", cluster.towers)
        .option("subscribe", "lc-out")
        .option("isolation", "read_committed")
        .load()
        .collect()
    )
    assert Counter(r.value for r in out) == Counter(expected)
