"""A Spark driver for the exactly-once test: dafka topic -> (failing UDF) -> dafka sink.

``python eos_driver.py TOWERS CHECKPOINT BATCHES`` runs ``local[2,4]`` (task retries) with
``availableNow`` until the input topic is read to its end. In each micro-batch listed in
``BATCHES`` (comma-separated ids) the UDF fails the first attempt of task 0 at its 25th row,
after the sink has written the first rows (one RECORD per Arrow batch of 10): Spark retries
the task and the first attempt's rows stay behind, uncommitted. Prints ``batch N`` after
each micro-batch so that the test can kill it mid-run.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, udf
from pyspark.sql.types import BinaryType

from dafka.client._heads import HeadWatcher
from dafka.spark._options import towers_transport
from dafka.spark._txn import task_partition


def main() -> None:
    towers, checkpoint, batches = sys.argv[1], sys.argv[2], sys.argv[3]
    failing = {int(b) for b in batches.split(",") if b}
    seen: dict[int, int] = {}
    heads: dict[int, tuple[HeadWatcher, int]] = {}
    sink = "spark-" + hashlib.sha256(checkpoint.encode()).hexdigest()[:16]  # as sink_name()
    key = ("eos-out", task_partition(sink, 0)[1])
    spark = (
        SparkSession.builder.master("local[2,4]")
        .appName("dafka-eos")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "3")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "10")
        .config("spark.sql.execution.python.udf.maxRecordsPerBatch", "10")
        .config("spark.driver.memory", "768m")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")

    @udf(BinaryType())
    def fail_first_attempt(value: bytes) -> bytes:
        ctx = TaskContext.get()
        if ctx is None or ctx.attemptNumber() != 0 or ctx.partitionId() != 0:
            return value
        batch = int(ctx.getLocalProperty("streaming.sql.batchId") or -1)
        n = seen[ctx.taskAttemptId()] = seen.get(ctx.taskAttemptId(), 0) + 1
        if n == 1:
            print(f"task 0 of batch {batch}", file=sys.stderr, flush=True)
        if batch in failing and n == 1:
            watcher = HeadWatcher(["eos-out"], towers_transport(towers))
            heads[ctx.taskAttemptId()] = (
                watcher,
                watcher.wait_quiet(0.3, 10, min_stores=1).get(key, -1),
            )
        if batch in failing and n == 25:
            # fail part-way, once the sink stored its rollback ACK and a RECORD of rows
            watcher, base = heads.pop(ctx.taskAttemptId())
            watcher.wait_for(lambda h: h.get(key, -1) >= base + 2, timeout=30)
            watcher.close()
            raise RuntimeError(f"injected failure in batch {batch} at {value!r}")
        return value

    source = (
        spark.readStream.format("dafka")
        .option("towers", towers)
        .option("subscribe", "eos-in")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", "100")
        .load()
    )
    out = source.repartition(3, "key").select(
        col("key"), fail_first_attempt(col("value")).alias("value")
    )

    def progress(batch_id: int) -> None:
        print(f"batch {batch_id} at {time.strftime('%H:%M:%S')}", flush=True)

    query = (
        out.writeStream.format("dafka")
        .option("towers", towers)
        .option("topic", "eos-out")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    last = -1
    while query.isActive:
        query.awaitTermination(1)
        p = query.lastProgress
        if p is not None and p["batchId"] != last:
            last = p["batchId"]
            progress(last)
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
