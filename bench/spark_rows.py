"""Rows/s of the Spark connector next to the raw clients, in one run, on one cluster.

    .venv/bin/python bench/spark_rows.py [--messages 200000] [--size 100] [--rounds 3]

1. raw producer: the topic-level ``Producer`` (batching) sends N messages of SIZE bytes;
2. raw consumer: a ``Consumer`` reads them back from the earliest offset;
3. source: ``spark.read.format("dafka")`` of the same topic into the ``noop`` sink;
4. sink: ``df.write.format("dafka")`` of N rows of SIZE bytes (exactly-once transactions);
5. source with ``isolation=read_committed`` of the sink's output (transactions), next to
   the raw read-committed ``Consumer`` of the same topic and to the source with
   ``isolation=read_uncommitted`` of that topic (alternated, ``--rounds`` times each,
   medians: issue 25's ratio, read_committed / read_uncommitted; at 200,000 rows a read
   takes well under a second and single reads move 2x under load: more rounds, steadier
   medians).

The load average (``os.getloadavg()``) is printed before and after: the machine is shared.

Spark runs ``local[2]``; its figures include the job's fixed costs (planning: ~0.3 s of it
waits for the stores' answers; the first job's Python worker start is left out by a warm-up
run). The raw consumer and the source run alternately, ``--rounds`` times each: the medians
are compared (the machine is shared and its load moves).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession

from dafka.client import Consumer, Producer, ReadCommittedConsumer
from dafka.server import InProcessCluster, free_port_pair

ROUNDS = 3
"""Default ``--rounds``."""


def raw_producer(towers: str, topic: str, n: int, size: int) -> float:
    value = os.urandom(size)
    with Producer(topic, towers=towers, name=f"{topic}-w", partitions=2) as producer:
        start = time.perf_counter()
        for _ in range(n):
            producer.send(value)
        left = producer.flush(120)
        took = time.perf_counter() - start
    assert left == 0, f"{left} messages not stored"
    return n / took


def raw_consumer(towers: str, topic: str, n: int, isolation: str = "read_uncommitted") -> float:
    kind = ReadCommittedConsumer if isolation == "read_committed" else Consumer
    with kind([topic], towers=towers, offset_reset="earliest") as consumer:
        got = 0
        start = time.perf_counter()
        deadline = start + 120
        while got < n and time.perf_counter() < deadline:
            got += len(consumer.poll(timeout=0.5, max_records=100_000))
        took = time.perf_counter() - start
    assert got >= n, f"read {got} of {n}"
    return n / took


def spark_source(
    spark: SparkSession, towers: str, topic: str, n: int, isolation: str = "read_uncommitted"
) -> float:
    df = (
        spark.read.format("dafka")
        .option("towers", towers)
        .option("subscribe", topic)
        .option("isolation", isolation)
    )
    start = time.perf_counter()
    df.load().write.format("noop").mode("overwrite").save()
    return n / (time.perf_counter() - start)


def spark_sink(spark: SparkSession, towers: str, topic: str, n: int, size: int) -> float:
    def run(name: str, rows: int) -> float:
        df = spark.range(0, rows, 1, 2).selectExpr(f"CAST(repeat('x', {size}) AS BINARY) AS value")
        start = time.perf_counter()
        (
            df.write.mode("append")
            .format("dafka")
            .option("towers", towers)
            .option("topic", topic)
            .option("name", name)
            .save()
        )
        return time.perf_counter() - start

    run("bench-warm", 1000)
    return n / run("bench-sink", n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="alternated reads, each")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    load_before = os.getloadavg()
    port = free_port_pair()
    towers = f"127.0.0.1:{port}"
    with (
        tempfile.TemporaryDirectory() as data,
        InProcessCluster(data, stores=1, tower_port=port),
    ):
        produced = raw_producer(towers, "bench-in", args.messages, args.size)
        raw_consumer(towers, "bench-in", args.messages)  # warm-up: the store's page cache
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", "1g")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        try:
            spark_source(spark, towers, "bench-in", args.messages)  # warm-up: Python workers
            consumed: list[float] = []
            sourced: list[float] = []
            for _ in range(args.rounds):  # alternate: the machine's load changes under us
                consumed.append(raw_consumer(towers, "bench-in", args.messages))
                sourced.append(spark_source(spark, towers, "bench-in", args.messages))
            sink = spark_sink(spark, towers, "bench-out", args.messages, args.size)
            committed_raw = raw_consumer(towers, "bench-out", args.messages, "read_committed")
            uncommitted_out: list[float] = []
            committed_out: list[float] = []
            for _ in range(args.rounds):
                uncommitted_out.append(spark_source(spark, towers, "bench-out", args.messages))
                committed_out.append(
                    spark_source(spark, towers, "bench-out", args.messages, "read_committed")
                )
        finally:
            spark.stop()
    consumer, source = statistics.median(consumed), statistics.median(sourced)
    print(f"{args.messages} messages of {args.size} bytes, 1 store, Spark local[2]")
    print(f"load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}")
    print(f"raw producer          {produced:>12,.0f} msg/s")
    print(f"raw consumer          {consumer:>12,.0f} msg/s  (median of {_rates(consumed)})")
    print(f"source -> noop        {source:>12,.0f} rows/s  (median of {_rates(sourced)}): ", end="")
    print(f"{source / consumer:.0%} of the consumer")
    print(f"sink (exactly-once)   {sink:>12,.0f} rows/s  ({sink / produced:.0%} of producer)")
    print(f"raw read_committed    {committed_raw:>12,.0f} msg/s  (the sink's output)")
    committed = statistics.median(committed_out)
    uncommitted = statistics.median(uncommitted_out)
    print(
        f"source read_uncommitted {uncommitted:>10,.0f} rows/s  (the sink's output, median of "
        f"{_rates(uncommitted_out)})"
    )
    print(
        f"source read_committed {committed:>12,.0f} rows/s  (median of {_rates(committed_out)}): "
        f"{committed / uncommitted:.2f}x read_uncommitted, "
        f"{committed / committed_raw:.0%} of the read-committed consumer"
    )


def _rates(rates: list[float]) -> str:
    return ", ".join(f"{r:,.0f}" for r in rates)


if __name__ == "__main__":
    main()
