"""A Spark driver for the exactly-once tests: dafka topic -> dafka sink, with failures.

``python eos_driver.py TOWERS CHECKPOINT BATCHES [MODE]`` runs ``local[2,4]`` (task retries) with
``availableNow`` until the input topic is read to its end. In each micro-batch listed in
``BATCHES`` (comma-separated ids) the first attempt of the sink's task 0 fails once it has
stored 25 rows (the sink's fault injector, ``dafka.testing.fail_sink_task``, on the writer of
``tests/spark/faults.py``'s ``dafka_faulty`` sink): Spark retries the task
and the first attempt's rows stay behind, uncommitted. Prints ``batch N`` after
each micro-batch so that the test can kill it mid-run. ``BATCHES`` ``-``: no failure.

``MODE`` (default ``append``: ``eos-in`` -> ``eos-out``): ``complete`` or ``update`` run a
count per key of ``modes-in`` (rows ``key:count``) into the topic named as the mode;
``update`` through ``dafka.spark.foreach_batch`` (Spark's Python data sources cannot take
that mode themselves).

Load: Spark starts a streaming Python source's driver-side process with a connect-back
timeout of 10 s that no configuration changes (``PythonWorkerFactory.createSimpleWorker``;
the executors' workers and the sink's commit runner come from the forking daemon, which has
none). On a loaded 2-core machine that start can take longer, and the query fails at once
with "Python worker failed to connect back": the driver then restarts the query from its
checkpoint (at most ``START_ATTEMPTS`` times), which is what a production driver does too.
"""

from __future__ import annotations

import os
import sys
import time

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable

from pyspark.sql import SparkSession

from dafka.spark import foreach_batch
from dafka.testing import fail_sink_task
from tests.spark.faults import register_faulty_sink

START_ATTEMPTS = 3
CONNECT_BACK = "failed to connect back"


def main() -> None:
    towers, checkpoint, batches = sys.argv[1], sys.argv[2], sys.argv[3]
    mode = sys.argv[4] if len(sys.argv) > 4 else "append"
    source_topic, out_topic = ("eos-in", "eos-out") if mode == "append" else ("modes-in", mode)
    spark = (
        SparkSession.builder.master("local[2,4]")
        .appName("dafka-eos")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "3")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "10")
        .config("spark.sql.execution.python.udf.maxRecordsPerBatch", "10")
        .config("spark.driver.memory", "768m")
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.network.timeout", "300s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    failing = [int(b) for b in batches.split(",") if b != "-"]
    sink = register_faulty_sink(spark, fail_sink_task(failing, rows=25))

    source = (
        spark.readStream.format("dafka")
        .option("towers", towers)
        .option("subscribe", source_topic)
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", "100")
        .load()
    )
    if mode == "append":
        out = source.repartition(3, "key").select("key", "value")
    else:  # a running count per key: each micro-batch's output is "key:count" rows
        out = (
            source.groupBy("key")
            .count()
            .selectExpr("key", "concat(CAST(key AS STRING), ':', CAST(count AS STRING)) AS value")
        )

    def progress(batch_id: int) -> None:
        print(f"batch {batch_id} at {time.strftime('%H:%M:%S')}", flush=True)

    last = -1
    for attempt in range(START_ATTEMPTS):
        writer = (
            out.writeStream.outputMode(mode)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
        )
        if mode == "update":  # Spark's Python data sources cannot take update: foreachBatch
            writer = writer.foreachBatch(foreach_batch(towers=towers, topic=out_topic))
        else:
            writer = writer.format(sink).option("towers", towers).option("topic", out_topic)
        query = writer.start()
        while query.isActive:
            query.awaitTermination(1)
            p = query.lastProgress
            if p is not None and p["batchId"] != last:
                last = p["batchId"]
                progress(last)
        error = query.exception()
        if error is None:
            break
        if CONNECT_BACK not in str(error) or attempt == START_ATTEMPTS - 1:
            raise SystemExit(f"query failed: {error}")
        # Spark waits a fixed 10 s for its streaming source's Python process (see the module
        # docstring): on a loaded machine it may give up; the checkpoint makes a restart exact.
        print(f"restart after: {CONNECT_BACK}", flush=True)
    print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
