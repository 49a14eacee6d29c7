"""A Spark query on one host of the multi-host tests, against stores on the others.

    python hosts_spark.py --towers 10.77.1.2:5556 --topic in --out out --expect 2000

A local Spark (``local[2]``: the driver and its executors on this host, on loopback among
themselves) reads ``--topic`` with ``spark.read.format("dafka")`` (tasks fetch from the
stores across the link) and writes every value to ``--out`` with the exactly-once sink
(``df.write.format("dafka")``). The only dafka option is ``towers``: where the tasks listen
is the default rule, as for every client. Prints one JSON line: ``{"read": N, "unique": M}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # Spark's own traffic: driver <-> executors
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

from pyspark.sql import SparkSession


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--towers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("dafka-hosts")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "768m")
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.network.timeout", "300s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        frame = (
            spark.read.format("dafka")
            .option("towers", args.towers)
            .option("subscribe", args.topic)
            .load()
            .select("value")
            .cache()
        )
        values = [row.value for row in frame.collect()]
        (
            frame.write.mode("append")
            .format("dafka")
            .option("towers", args.towers)
            .option("topic", args.out)
            .option("name", "hosts-spark")
            .save()
        )
    finally:
        spark.stop()
    print(json.dumps({"event": "done", "read": len(values), "unique": len(set(values))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
