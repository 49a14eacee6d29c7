"""The Spark job process: ``python -m dafka.pipeline job CONFIG_JSON``.

Two streaming queries (``format("dafka")``), sharing one session:

* ``to-topics``: the enriched window aggregates, as JSON keyed by device, to the output topic,
  and the messages that do not parse, unchanged, to the dead-letter topic - one query, one
  dafka sink (exactly-once; a ``topic`` column routes each row), so that each micro-batch
  pays the planning and the sink's commit once for both (they were two queries, each
  reading the input and committing on its own);
* ``to-parquet``: the same aggregates to Parquet files (Spark's file sink: exactly-once by
  its ``_spark_metadata`` log), read back from the output topic (read committed: each
  committed aggregate once) - not parsed, deduplicated and aggregated from the input a
  second time. A stateless query that runs a micro-batch only when windows close, so that
  ``to-topics`` has the 2 cores to itself the rest of the time.

Each query has its own checkpoint under ``checkpoint_dir``: killed and restarted with the same
config, the job resumes where the checkpoints say. It reports every micro-batch on stdout as
one JSON object per line (``{"type": "batch", "query": ..., ...}``) and stops cleanly on
SIGTERM/SIGINT.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from dafka.config import PLAINTEXT, KeyFiles


@dataclass(frozen=True)
class JobConfig:
    towers: str
    spark_master: str
    input_topic: str
    output_topic: str
    dead_letter_topic: str
    parquet_dir: str
    checkpoint_dir: str
    devices_file: str  # the reference table, JSON lines {"device", "site", "kind"}
    window_ms: int
    watermark_ms: int
    trigger_ms: int = 500
    max_records_per_trigger: int | None = None
    shuffle_partitions: int = 2
    driver_java_options: str = "-XX:TieredStopAtLevel=1"
    """The driver JVM's options (local mode: the executors are in it). C1 only: the JIT's
    C2 compiles of Spark's own code took half the JVM's CPU in a 1.5-minute run on 2 shared
    cores (``make run``: 41-56 s of JVM CPU with C2, 26 s without), CPU the micro-batches
    lacked; the job's per-row work is small at the rates it runs."""
    report_every: float = 0.25
    sink: str = "dafka"  # "dafka": the connector's exactly-once sink; "driver": see _driver_sink
    security: KeyFiles = PLAINTEXT  # the connector's key options, the driver sink's

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> JobConfig:
        data = json.loads(text)
        data["security"] = KeyFiles(**data.get("security", {}))
        return cls(**data)


QUERIES = ("to-topics", "to-parquet")

_CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


class _DriverSink:
    """A stand-in for the connector's sink while it is not built: ``foreachBatch`` on the
    driver, one producer per query and job process. At-least-once only: a batch replayed
    after a crash is written again (the checks then report the repeated rows)."""

    def __init__(self, towers: str, name: str, security: KeyFiles) -> None:
        self.towers = towers
        self.security = security
        self.name = name
        self.producers: dict[str, Any] = {}  # per topic (the rows' ``topic`` column)

    def __call__(self, frame: Any, batch_id: int) -> None:
        from dafka import Producer

        for row in frame.select("topic", "key", "value").toLocalIterator():
            producer = self.producers.get(row.topic)
            if producer is None:
                producer = self.producers[row.topic] = Producer(
                    row.topic,
                    towers=self.towers,
                    **self.security.fields(),
                    name=f"{row.topic}-{self.name}",
                )
            key = None if row.key is None else bytes(row.key)
            producer.send(bytes(row.value), key=key)
        for topic, producer in self.producers.items():
            if producer.flush(timeout=60):
                raise RuntimeError(f"{topic}: batch {batch_id} not stored within 60 s")


def _emit(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields, default=str) + "\n")
    sys.stdout.flush()


def batch_report(query: str, progress: dict[str, Any]) -> dict[str, object]:
    """The fields of one micro-batch the runner shows and uses to decide it is done."""
    source = (progress.get("sources") or [{}])[0]
    end = source.get("endOffset")
    if isinstance(end, str):
        end = json.loads(end)
    dropped = sum(
        int(op.get("numRowsDroppedByWatermark", 0)) for op in progress.get("stateOperators", [])
    )
    return {
        "type": "batch",
        "query": query,
        "batch": progress.get("batchId"),
        "input": progress.get("numInputRows", 0),
        "output": (progress.get("sink") or {}).get("numOutputRows", -1),
        "watermark": (progress.get("eventTime") or {}).get("watermark"),
        "end": end,
        "duration_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
        "durations_ms": progress.get("durationMs") or {},
        "dropped_by_watermark": dropped,
        "timestamp": progress.get("timestamp"),
    }


def _new_progress(query: Any, reported: int) -> list[dict[str, Any]]:
    """The query's micro-batches after ``reported``, oldest first: its last one, and all
    Spark keeps only when more than one came since (``recentProgress`` is up to 100 progress
    objects as JSON through Py4J: asked 8 times a second, that was CPU the batches lacked)."""
    last = query.lastProgress
    if last is None or last["batchId"] <= reported:
        return []
    if last["batchId"] == reported + 1:
        return [last]
    return [p for p in query.recentProgress if p["batchId"] > reported]


def run(config: JobConfig) -> int:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Spark's Python workers must import dafka: by default they run this interpreter (its
    # venv), not the first python3 on PATH. A remote cluster sets PYSPARK_PYTHON itself.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812  (the PySpark idiom)
    from pyspark.sql.streaming.query import StreamingQuery

    from dafka.pipeline._transform import (
        TransformSettings,
        from_message,
        to_message,
        transform,
    )

    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    spark = (
        SparkSession.builder.master(config.spark_master)
        .appName("dafka-pipeline")
        .config("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
        .config("spark.driver.extraJavaOptions", config.driver_java_options)
        # Checkpoints through Hadoop's FileSystem API on its raw local file system: without
        # Hadoop's native library every file a micro-batch writes forked processes - the
        # default FileContext's renames ran `readlink`, each created file `chmod` (and its
        # .crc file another): ~350 processes per micro-batch of a windowed count, 36 now.
        .config("spark.sql.streaming.checkpointFileManagerClass", _CHECKPOINT_FILE_MANAGER)
        .config("spark.hadoop.fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem")
        .config("spark.ui.enabled", "false")
        # a busy machine can take more than the default 15 s to start a Python worker
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    # Read once: transform() puts the (small) reference table into the plan as a map.
    devices = spark.read.schema("device STRING, site STRING, kind STRING").json(config.devices_file)
    reader = (
        spark.readStream.format("dafka")
        .option("towers", config.towers)
        .options(**config.security.spark_options())
        .option("subscribe", config.input_topic)
        .option("startingOffsets", "earliest")
    )
    if config.max_records_per_trigger:
        reader = reader.option("maxRecordsPerTrigger", str(config.max_records_per_trigger))
    outputs = transform(
        reader.load(), devices, TransformSettings(config.window_ms, config.watermark_ms)
    )
    checkpoints = Path(config.checkpoint_dir)
    trigger = f"{config.trigger_ms} milliseconds"
    run_tag = f"{os.getpid()}"

    def to_topics() -> StreamingQuery:
        # Dead letters (stateless) and aggregates (after the watermark) in one query: the
        # union is written by one sink per micro-batch, each row to its ``topic``.
        dead = outputs.dead_letters.select(
            F.lit(config.dead_letter_topic).alias("topic"), "key", "value"
        )
        aggregates = to_message(outputs.aggregates).select(
            F.lit(config.output_topic).alias("topic"), "key", "value"
        )
        writer = (
            dead.unionByName(aggregates)
            .writeStream.queryName("to-topics")
            .outputMode("append")
            .option("checkpointLocation", str(checkpoints / "to-topics"))
            .trigger(processingTime=trigger)
        )
        if config.sink == "driver":
            return writer.foreachBatch(_DriverSink(config.towers, run_tag, config.security)).start()
        return (
            writer.format("dafka")
            .option("towers", config.towers)
            .options(**config.security.spark_options())
            .start()
        )

    def to_parquet() -> StreamingQuery:
        published = (
            spark.readStream.format("dafka")
            .option("towers", config.towers)
            .options(**config.security.spark_options())
            .option("subscribe", config.output_topic)
            .option("startingOffsets", "earliest")
            .option("isolation", "read_committed")
            .load()
        )
        return (
            from_message(published)
            .writeStream.queryName("to-parquet")
            .outputMode("append")
            .format("parquet")
            .option("path", config.parquet_dir)
            .option("checkpointLocation", str(checkpoints / "to-parquet"))
            .trigger(processingTime=trigger)
            .start()
        )

    starts: dict[str, Callable[[], StreamingQuery]] = {
        "to-topics": to_topics,
        "to-parquet": to_parquet,
    }
    queries: dict[str, StreamingQuery] = {}
    for name, start in starts.items():
        if stop.is_set():  # stopped while Spark started: start nothing more
            break
        # One at a time: each query starts a Python process on the driver that must connect
        # back to the JVM within Spark's timeout; three importing at once on a busy 2-core
        # machine missed it.
        query = queries[name] = start()
        while query.isActive and query.status["message"] == "Initializing sources":
            if stop.wait(0.1):
                break
    sources = {"to-topics": config.input_topic, "to-parquet": config.output_topic}
    _emit(type="started", queries=list(queries), sources=sources)
    reported = dict.fromkeys(queries, -1)
    status = 0
    while not stop.wait(config.report_every):
        for name, query in queries.items():
            for progress in _new_progress(query, reported[name]):
                reported[name] = progress["batchId"]
                _emit(**batch_report(name, progress))
            if not query.isActive:
                error = query.exception()
                _emit(type="error", query=name, message=str(error) if error else "stopped")
                status = 1
                stop.set()
    for query in queries.values():
        if query.isActive:
            query.stop()
    _emit(type="stopped", status=status)
    spark.stop()
    return status


__all__ = ["QUERIES", "JobConfig", "batch_report", "run"]
