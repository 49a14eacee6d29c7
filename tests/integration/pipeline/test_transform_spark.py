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

# 600 s, as the pipeline's other Spark modules: pytest-timeout times a test's fixtures too, so
# the first test here pays the module's Spark session start (101 s at load ~30), and its own
# four availableNow queries of stateful micro-batches take 42-45 s on a quiet machine and
# 171-199 s at load 15-30: 300 s ran out mid-query, and the py4j call it interrupted left
# the module's session unusable (the two tests after it failed on 'SparkSession does not
# exist in the JVM' and a desynchronized answer, KeyError 'm').
pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

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


def test_one_stateful_operator_and_no_join_per_micro_batch(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The deduplication is part of the window aggregation (one state store, one shuffle per
    micro-batch: it was a second operator, ``dropDuplicatesWithinWatermark``), and the
    reference table is a map in the plan (it was a broadcast join, which read the table and
    broadcast it again in every micro-batch)."""
    values = [m.value for m in generate(SPEC)][:500]
    write_files(tmp_path / "in", values, per_file=500)
    devices = spark.createDataFrame(
        [(d.device, d.site, d.kind) for d in reference_table(SPEC.devices)],
        "device STRING, site STRING, kind STRING",
    )
    raw = spark.readStream.schema("value BINARY").parquet(str(tmp_path / "in"))
    aggregates = transform(raw, devices, SETTINGS).aggregates
    query = (
        aggregates.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(240)
    progress = query.lastProgress
    assert progress is not None
    assert len(progress["stateOperators"]) == 1, progress["stateOperators"]
    capsys.readouterr()
    aggregates.explain(extended=True)
    plan = capsys.readouterr().out
    assert "Aggregate" in plan, plan
    assert "Join" not in plan, plan
    assert "Broadcast" not in plan, plan


def test_a_duplicate_counts_once_whatever_it_carries(spark: SparkSession) -> None:
    """One reading per event_id in a window, also when a re-sent reading carries another
    temperature; readings of different events with equal values all count."""

    def reading(event_id: str, temp: int, ts: int = 1_000) -> tuple[bytes]:
        return (
            f'{{"event_id": "{event_id}", "device": "d1", "ts": {ts}, "temp": {temp}}}'.encode(),
        )

    rows = [reading("a", 10), reading("a", 10), reading("a", 30), reading("b", 10)]
    rows += [reading("c", 10), reading("d", -5, ts=6_000)]
    raw = spark.createDataFrame(rows, "value BINARY")
    devices = spark.createDataFrame(
        [("d1", "oslo", "office")], "device STRING, site STRING, kind STRING"
    )
    got = sorted(
        Aggregate(**row.asDict()) for row in transform(raw, devices, SETTINGS).aggregates.collect()
    )
    assert got == [
        Aggregate(0, 5_000, "d1", "oslo", "office", 3, 30, 10, 10),
        Aggregate(5_000, 10_000, "d1", "oslo", "office", 1, -5, -5, -5),
    ]
