"""The job's Spark logic on a real local Spark, fed from files: exactly the expected output.

The feed is split over several files read one per micro-batch, so duplicates and late
readings cross batch boundaries, and the last file holds the heartbeat that closes every
window (append mode). Then the same job restarts from its checkpoint with more files.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

from dafka.pipeline import (
    Aggregate,
    WorkloadSpec,
    expected,
    generate,
    heartbeat,
    reference_table,
)
from dafka.pipeline._transform import TransformSettings, from_message, to_message, transform

pytestmark = pytest.mark.spark

SPEC = WorkloadSpec(seed=5, readings=4_000, devices=9, step_ms=10, max_lateness_ms=3_000)
SETTINGS = TransformSettings(window_ms=5_000, watermark_ms=12_000)


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("dafka-pipeline-transform-test")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    yield session
    session.stop()


def write_files(directory: Path, values: list[bytes], per_file: int, first: int = 0) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    n = first
    for i in range(0, len(values), per_file):
        table = pa.table({"value": pa.array(values[i : i + per_file], pa.binary())})
        pq.write_table(table, directory / f"part-{n:04d}.parquet")
        n += 1
    return n


def run(spark: SparkSession, root: Path) -> tuple[list[Aggregate], Counter[bytes]]:
    devices = spark.createDataFrame(
        [(d.device, d.site, d.kind) for d in reference_table(SPEC.devices)],
        "device STRING, site STRING, kind STRING",
    )
    raw = spark.readStream.schema("value BINARY").option("maxFilesPerTrigger", 1)
    outputs = transform(raw.parquet(str(root / "in")), devices, SETTINGS)

    def start(df: DataFrame, name: str) -> None:
        query = (
            df.writeStream.format("parquet")
            .option("path", str(root / name))
            .option("checkpointLocation", str(root / f"checkpoint-{name}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(240)
        assert not query.isActive

    start(outputs.aggregates, "aggregates")
    start(outputs.dead_letters, "dead")
    rows = spark.read.parquet(str(root / "aggregates")).collect()
    got = sorted(Aggregate(**row.asDict()) for row in rows)
    dead = Counter(bytes(r.value) for r in spark.read.parquet(str(root / "dead")).collect())
    return got, dead


def test_exact_output_across_batches_and_a_restart(spark: SparkSession, tmp_path: Path) -> None:
    values = [m.value for m in generate(SPEC)]
    half = len(values) // 2
    # first run: half the feed, no heartbeat: only windows the data's own watermark closed
    files = write_files(tmp_path / "in", values[:half], per_file=1_100)
    got, dead = run(spark, tmp_path)
    first = expected(values[:half], reference_table(SPEC.devices), SETTINGS.window_ms)
    assert dead == first.dead_letters
    assert got, "the watermark closed some windows already"
    assert set(got) < set(first.aggregates)
    newest = max(m.reading.ts for m in generate(SPEC) if m.reading and m.index < half)
    assert all(a.window_end <= newest - SETTINGS.watermark_ms for a in got)

    # second run from the same checkpoints: the rest and the heartbeat -> every window, once
    closing = heartbeat("end", SPEC.end_ms + SETTINGS.window_ms + SETTINGS.watermark_ms + 1)
    write_files(tmp_path / "in", [*values[half:], closing], per_file=1_100, first=files)
    got, dead = run(spark, tmp_path)
    full = expected(values, reference_table(SPEC.devices), SETTINGS.window_ms)
    assert full.duplicates > 0
    assert sum(full.dead_letters.values()) > 0
    assert dead == full.dead_letters
    assert got == full.aggregates  # sorted lists: no duplicate row, none missing
    # the Parquet copy is read back from the output topic's messages: the same rows
    written = to_message(spark.read.parquet(str(tmp_path / "aggregates")))
    back = from_message(written.select("value")).collect()
    assert sorted(Aggregate(**row.asDict()) for row in back) == full.aggregates
