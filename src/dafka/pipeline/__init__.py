"""dafka.pipeline: the main job - a streaming data pipeline on dafka and Spark.

A deterministic sensor feed (:mod:`._workload`) is produced into a dafka topic; a PySpark
Structured Streaming job parses it (bad messages to a dead-letter topic), deduplicates,
aggregates per device and event-time window with a watermark, enriches from a reference
table, and writes the aggregates exactly-once to an output topic and to Parquet. The
expected output is computed in plain Python (:mod:`._expected`) and the run checks itself
against it. Only the job module imports pyspark, and only when the job runs.
"""

from dafka.pipeline._cli import pipeline_command
from dafka.pipeline._expected import Aggregate, Expected, Heartbeat, expected, parse, window_of
from dafka.pipeline._workload import (
    Device,
    Kind,
    Message,
    Reading,
    WorkloadSpec,
    encode,
    generate,
    heartbeat,
    reference_table,
)

__all__ = [
    "Aggregate",
    "Device",
    "Expected",
    "Heartbeat",
    "Kind",
    "Message",
    "Reading",
    "WorkloadSpec",
    "encode",
    "expected",
    "generate",
    "heartbeat",
    "parse",
    "pipeline_command",
    "reference_table",
    "window_of",
]
