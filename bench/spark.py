"""The Spark connector's cost per micro-batch next to Spark's own floor, in one run.

    .venv/bin/python bench/spark.py [--sizes 100,10000,1000000] [--batches 4] [--latency 30]

Four streaming queries per size N (rows per micro-batch), each run for ``--batches`` timed
micro-batches after one warm-up batch (the first batch of a query starts its Python
processes: left out):

1. ``rate -> noop``: Spark's ``rate-micro-batch`` source (N rows per batch) into the
   ``noop`` sink: **the floor**, what Spark costs per micro-batch without dafka;
2. ``dafka -> noop``: the dafka source (a backlog produced beforehand, split into batches
   of about N rows by ``maxRecordsPerTrigger``) into ``noop``;
3. ``rate -> dafka``: the rate source into the dafka sink (exactly-once);
4. ``dafka -> dafka``: the dafka source into the dafka sink.

Each line gives the median ``triggerExecution`` of the timed batches (Spark's own measure of
a micro-batch, planning included), its ratio to the floor and the difference (what the
connector adds). Then the end-to-end latency of ``dafka -> dafka`` at a low rate: a producer
sends ``--rate`` messages/s carrying their send time for ``--latency`` seconds, the query
(default trigger: a batch as soon as the last one ended) copies them to another topic, and
a ``ReadCommittedConsumer`` of that topic takes the time each one became visible;
p50/p90/p99. ``--realtime`` also starts the dafka source under Spark's real-time mode and
prints what Spark answers (docs/spark.md: a Python data source cannot serve it).

The cluster is a ``LocalCluster`` (a tower and one store in their own processes); Spark
runs ``local[2]``. The load average is printed before and after: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from dafka.client import HeadWatcher, Producer, ReadCommittedConsumer
from dafka.server import LocalCluster

SIZE = 100


def _session() -> SparkSession:
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _produce(towers: str, topic: str, n: int, per_record: int) -> int:
    """n messages of SIZE bytes, about ``per_record`` to a RECORD; returns how many RECORDs
    (offsets) the topic holds (``maxRecordsPerTrigger`` counts them)."""
    value = os.urandom(SIZE)
    batch_size = max(1, per_record) * (SIZE + 24)
    with Producer(
        topic, towers=towers, name=f"{topic}-w", partitions=2, batch_size=batch_size
    ) as producer:
        producer.produce_many([value] * n)
        left = producer.flush(300)
    assert left == 0, f"{left} messages not stored"
    with HeadWatcher([topic], producer.settings.transport()) as watcher:
        heads = watcher.wait_quiet(0.3, 10.0, min_stores=1)
    return sum(h + 1 for (t, _), h in heads.items() if t == topic)


PARTS = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")
"""Where Spark says a micro-batch's time went (``durationMs`` of its progress): planning
the offsets (the source's ``latestOffset``), the plan, the job and the sink's commit
(``addBatch``: the dafka sink's writer creation, tasks and ``commit``), the checkpoint."""

Batch = tuple[float, int, dict[str, float]]
"""(seconds, rows, seconds per part of ``PARTS``) of one micro-batch."""


def _timed(query: StreamingQuery, batches: int, timeout: float) -> list[Batch]:
    """The query's batches after its first, until ``batches`` had rows."""
    deadline = time.monotonic() + timeout
    seen: dict[int, Batch] = {}
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise RuntimeError(f"query failed: {query.exception()}")
        for progress in query.recentProgress:
            rows = int(progress.get("numInputRows", 0))
            if progress["batchId"] > 0 and rows > 0:
                durations = progress["durationMs"]
                took = durations["triggerExecution"] / 1000
                parts = {p: durations.get(p, 0) / 1000 for p in PARTS}
                seen[progress["batchId"]] = (took, rows, parts)
        if len(seen) >= batches:
            break
        time.sleep(0.2)
    query.stop()
    timed = [seen[b] for b in sorted(seen)[:batches]]
    if len(timed) < batches:
        raise RuntimeError(f"only {len(timed)} of {batches} batches within {timeout:.0f}s")
    return timed


class Bench:
    def __init__(self, spark: SparkSession, towers: str, tmp: Path, batches: int) -> None:
        self.spark = spark
        self.towers = towers
        self.tmp = tmp
        self.batches = batches
        self.runs = 0

    def _checkpoint(self) -> str:
        self.runs += 1
        return str(self.tmp / f"ckpt-{self.runs}")

    def rate(self, n: int) -> DataFrame:
        return (
            self.spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", n)
            .option("numPartitions", 2)
            .load()
            .selectExpr(f"CAST(repeat('x', {SIZE}) AS BINARY) AS value")
        )

    def dafka(self, topic: str, records_per_batch: int) -> DataFrame:
        return (
            self.spark.readStream.format("dafka")
            .option("towers", self.towers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerTrigger", str(max(1, records_per_batch)))
            .load()
            .select("value")
        )

    def noop(self, df: DataFrame) -> StreamingQuery:
        return (
            df.writeStream.format("noop")
            .option("checkpointLocation", self._checkpoint())
            .trigger(processingTime="0 seconds")
            .start()
        )

    def sink(self, df: DataFrame, topic: str) -> StreamingQuery:
        return (
            df.writeStream.format("dafka")
            .option("towers", self.towers)
            .option("topic", topic)
            .option("checkpointLocation", self._checkpoint())
            .trigger(processingTime="0 seconds")
            .start()
        )

    def run(self, query: StreamingQuery, n: int) -> tuple[float, float, str]:
        """(median seconds per batch, median rows per batch, the medians of its parts) of a
        started query."""
        timeout = 120 + 30 * self.batches * max(1.0, n / 100_000)
        timed = _timed(query, self.batches, timeout)
        parts = ", ".join(f"{p} {statistics.median(b[2][p] for b in timed):.2f}" for p in PARTS)
        return (
            statistics.median(b[0] for b in timed),
            statistics.median(b[1] for b in timed),
            parts,
        )


def _latency(bench: Bench, rate: float, seconds: float) -> list[float]:
    """Seconds from send to visible (read committed) of each message, dafka -> dafka."""
    towers = bench.towers
    query = bench.sink(
        bench.spark.readStream.format("dafka")
        .option("towers", towers)
        .option("subscribe", "lat-in")
        .option("startingOffsets", "earliest")
        .load()
        .select("value"),
        "lat-out",
    )
    latencies: list[float] = []
    done = threading.Event()
    expected = int(rate * seconds)

    def consume() -> None:
        with ReadCommittedConsumer(["lat-out"], towers=towers, offset_reset="earliest") as c:
            while len(latencies) < expected and not done.is_set():
                for record in c.poll(timeout=0.5):
                    latencies.append(time.time() - float(record.value))

    reader = threading.Thread(target=consume)
    reader.start()
    try:
        with Producer("lat-in", towers=towers, name="lat-w", partitions=1) as producer:
            # the query's first batch starts Python processes: wait until it runs idle
            producer.send(str(time.time()).encode()).result(30)
            deadline = time.monotonic() + 120
            while not latencies and time.monotonic() < deadline:
                time.sleep(0.1)
            latencies.clear()
            start = time.monotonic()
            for i in range(expected):
                time.sleep(max(0.0, start + i / rate - time.monotonic()))
                producer.send(str(time.time()).encode())
            producer.flush(30)
        deadline = time.monotonic() + 60
        while len(latencies) < expected and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        done.set()
        reader.join()
        query.stop()
    return latencies


def _realtime(bench: Bench) -> str:
    """What Spark says to the dafka source under real-time mode (docs/spark.md): the sink is
    a ``foreach`` writer, one real-time mode allows, so that the answer is about the source."""
    df = (
        bench.spark.readStream.format("dafka")
        .option("towers", bench.towers)
        .option("subscribe", "lat-in")
        .load()
    )
    try:
        query = (
            df.writeStream.foreach(lambda _row: None)
            .outputMode("update")  # real-time mode refuses append
            .option("checkpointLocation", bench._checkpoint())
            .trigger(realTime="5 seconds")  # type: ignore[call-overload]
            .start()
        )
    except Exception as exc:  # what this records: the refusal
        return f"refused at start: {str(exc).splitlines()[0][:300]}"
    try:
        deadline = time.monotonic() + 60
        while query.exception() is None and time.monotonic() < deadline:
            if query.lastProgress is not None:
                return "ran a real-time batch"
            time.sleep(0.5)
        error = query.exception()
        return "no batch within 60 s" if error is None else f"failed: {str(error)[:300]}"
    finally:
        query.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="100,10000,1000000")
    parser.add_argument("--batches", type=int, default=4, help="timed batches per query")
    parser.add_argument("--latency", type=float, default=30.0, help="seconds of latency run")
    parser.add_argument("--rate", type=float, default=20.0, help="messages/s of latency run")
    parser.add_argument("--realtime", action="store_true", help="try real-time mode too")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    load_before = os.getloadavg()
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, LocalCluster(stores=1) as cluster:
        towers = cluster.towers
        spark = _session()
        bench = Bench(spark, towers, Path(tmp), args.batches)
        try:
            for n in sizes:
                topic = f"in-{n}"
                records = _produce(towers, topic, n * (args.batches + 2), n // 20)
                per_batch = records // (args.batches + 2)
                figures = {
                    "rate -> noop (floor)": bench.run(bench.noop(bench.rate(n)), n),
                    "dafka -> noop": bench.run(bench.noop(bench.dafka(topic, per_batch)), n),
                    "rate -> dafka": bench.run(bench.sink(bench.rate(n), f"out-rate-{n}"), n),
                    "dafka -> dafka": bench.run(
                        bench.sink(bench.dafka(topic, per_batch), f"out-{n}"), n
                    ),
                }
                floor = figures["rate -> noop (floor)"][0]
                lines.append(f"{n:,} rows per micro-batch (median of {args.batches} batches):")
                for what, (took, rows, parts) in figures.items():
                    lines.append(
                        f"  {what:<22}{took:7.3f} s/batch  {rows:>10,.0f} rows  "
                        f"x{took / floor:5.2f} of the floor  +{took - floor:6.3f} s"
                    )
                    lines.append(f"  {'':<22}({parts})")
                print("\n".join(lines[-9:]), flush=True)
            if args.latency > 0:
                latencies = sorted(_latency(bench, args.rate, args.latency))
                if latencies:
                    q = statistics.quantiles(latencies, n=100)
                    lines.append(
                        f"end to end dafka -> dafka at {args.rate:g} msg/s ({len(latencies)} "
                        f"messages, read committed): p50 {q[49]:.2f} s, p90 {q[89]:.2f} s, "
                        f"p99 {q[98]:.2f} s, max {latencies[-1]:.2f} s"
                    )
                else:
                    lines.append("end to end: no message came through")
                print(lines[-1], flush=True)
            if args.realtime:
                lines.append(f"real-time mode (trigger(realTime=...)): {_realtime(bench)}")
                print(lines[-1], flush=True)
        finally:
            spark.stop()
    print()
    print(f"Spark local[2], 1 store, {SIZE}-byte rows")
    print(f"load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
