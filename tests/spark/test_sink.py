"""The exactly-once dafka sink on a real local Spark and a real dafka cluster."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid as uuid_mod
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, Row, SparkSession

from dafka.client import PartitionProducer, Producer
from dafka.message import get_clock
from dafka.records import encode_batch
from dafka.spark._txn import batch_base
from tests.spark.committed import committed_values, read_to_heads
from tests.spark.conftest import Cluster, wait_until

DRIVER = Path(__file__).with_name("eos_driver.py")


def read_all(spark: SparkSession, cluster: Cluster, topic: str, **options: str) -> list[Row]:
    reader = spark.read.format("dafka").option("towers", cluster.towers)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.option("subscribe", topic).load().collect()


def write(df: DataFrame, cluster: Cluster, **options: str) -> None:
    writer = df.write.mode("append").format("dafka").option("towers", cluster.towers)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def test_batch_write_is_one_transaction_per_write_with_keys_routed(
    spark: SparkSession, cluster: Cluster
) -> None:
    df = spark.range(0, 300, 1, 3).selectExpr(
        "CAST(id % 10 AS STRING) AS key",
        "CAST(id AS STRING) AS value",
        "array(named_struct('key', 'h', 'value', CAST('x' AS BINARY))) AS headers",
    )
    write(df.repartition(3, "key"), cluster, topic="w-out", name="bw")
    write(df.repartition(3, "key"), cluster, topic="w-out", name="bw")
    rows = read_all(spark, cluster, "w-out")
    committed = committed_values(cluster, "w-out")
    assert Counter(committed) == Counter({str(i).encode(): 2 for i in range(300)})
    # a default (read_uncommitted) read shows data rows only: the transactions' ACKs are
    # control records, never rows (issue 21)
    assert Counter(r.value for r in rows) == Counter(committed)
    data = rows
    assert all([(h.key, h.value) for h in r.headers] == [("h", b"x")] for r in data)
    # keyed rows, repartitioned by key: every key in exactly one partition, both writes
    partitions_of: dict[bytes, set[str]] = {}
    for r in data:
        partitions_of.setdefault(r.key, set()).add(r.partition)
    assert all(len(p) == 1 for p in partitions_of.values())
    assert {r.partition for r in rows} <= {"bw.0.0", "bw.1.0", "bw.2.0"}  # bounded


@pytest.mark.parametrize(
    ("select", "options", "named"),
    [
        ("CAST(id AS STRING) AS key", {"topic": "x", "name": "n"}, "value"),
        ("CAST(id AS STRING) AS value, id", {"topic": "x", "name": "n"}, "id"),
        ("CAST(id AS STRING) AS value", {"name": "n"}, "topic"),
        ("CAST(id AS STRING) AS value", {"topic": "x", "name": "n", "partitons": "2"}, "partitons"),
    ],
)
def test_bad_sink_input_fails_naming_it(
    spark: SparkSession, cluster: Cluster, select: str, options: dict[str, str], named: str
) -> None:
    df = spark.range(0, 3).selectExpr(*select.split(", "))
    with pytest.raises(Exception, match=named):
        write(df, cluster, **options)


def test_a_write_without_a_name_is_a_one_shot_job_of_its_own(
    spark: SparkSession, cluster: Cluster
) -> None:
    """``df.write`` without ``name`` (issue 21): each save is a sink of its own identity
    (new partitions), written once; ``name`` remains for idempotent re-runs."""
    df = spark.range(0, 20, 1, 2).selectExpr("CAST(id AS STRING) AS value")
    write(df, cluster, topic="anon-out")
    write(df, cluster, topic="anon-out")
    assert Counter(committed_values(cluster, "anon-out")) == Counter(
        {str(i).encode(): 2 for i in range(20)}
    )
    sinks = {r.partition.split(".")[0] for r in read_all(spark, cluster, "anon-out")}
    assert len(sinks) == 2, sinks
    assert all(s.startswith("write-") for s in sinks), sinks


def _publish_input(cluster: Cluster, n: int) -> list[bytes]:
    values = [b"v%05d" % i for i in range(n)]
    with PartitionProducer("eos-in", cluster.transport, producer_id="in.0") as p:
        for i, v in enumerate(values):
            p.publish(encode_batch([v], keys=[b"k%d" % (i % 101)]))
        assert p.flush(60)
    return values


def _run_driver(
    cluster: Cluster,
    checkpoint: Path,
    kill_after_batch: int | None,
    runs: list[str],
    failing: str = "1,4",
    mode: str = "append",
) -> str:
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), cluster.towers, str(checkpoint), failing, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    lines: list[str] = []
    log = (checkpoint.parent / f"driver-{len(runs)}.log").open("w")
    killed = threading.Event()

    def watch() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            log.write(line)
            log.flush()
            if (
                kill_after_batch is not None
                and line.startswith("batch ")
                and int(line.split()[1]) >= kill_after_batch
                and not killed.is_set()
            ):
                killed.set()
                os.killpg(proc.pid, signal.SIGKILL)  # driver, JVM and Python workers

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        reader.join(10)
        assert proc.stdout is not None
        proc.stdout.close()
        log.close()
    output = "".join(lines)
    runs.append(output)
    if kill_after_batch is not None:
        assert killed.is_set(), output[-3000:]
    else:
        assert proc.returncode == 0, output[-3000:]
        assert "done" in output
    return output


@pytest.mark.timeout(900)
def test_exactly_once_with_failed_task_attempts_and_a_killed_driver(
    spark: SparkSession, cluster: Cluster, tmp_path: Path
) -> None:
    expected = _publish_input(cluster, 600)
    checkpoint = tmp_path / "checkpoint"
    started = time.monotonic()
    runs: list[str] = []
    _run_driver(cluster, checkpoint, 1, runs)  # killed once batch 1 is done: batch 2 runs
    _run_driver(cluster, checkpoint, None, runs)
    logs = "\n---\n".join(r[-4000:] for r in runs)
    rows = read_all(spark, cluster, "eos-out")
    committed = committed_values(cluster, "eos-out")
    assert Counter(committed) == Counter(expected), (
        f"missing {len(set(expected) - set(committed))}, "
        f"duplicated {sum(n - 1 for n in Counter(committed).values() if n > 1)}"
    )
    # the source's read_committed isolation sees the same
    through_spark = read_all(spark, cluster, "eos-out", isolation="read_committed")
    assert Counter(r.value for r in through_spark) == Counter(expected)
    # The scenario happened: retried attempts (attempt bits of the clocks) wrote rows, and
    # rows that no reader may see (failed attempts, the killed run) are in the log.
    data = [r for r in rows if r.value]
    attempts = {(get_clock(uuid_mod.UUID(bytes=r.uuid)) >> 24) & 0xFF for r in data}
    assert attempts - {0}, f"no task attempt was retried:\n{logs}"
    assert len(data) > len(expected), f"no uncommitted leftovers (no rollback):\n{logs}"
    assert all(get_clock(uuid_mod.UUID(bytes=r.uuid)) > batch_base(0) for r in data)
    assert time.monotonic() - started < 900


@pytest.fixture(scope="module")
def modes_input(cluster: Cluster) -> Counter[bytes]:
    """600 records over 20 keys (30 each), round robin: each micro-batch of 100 counts
    every key again. The expected final count per key."""
    with PartitionProducer("modes-in", cluster.transport, producer_id="mi.0") as p:
        for i in range(600):
            p.publish(encode_batch([b"v%d" % i], keys=[b"k%02d" % (i % 20)]))
        assert p.flush(60)
    return Counter({b"k%02d" % k: 30 for k in range(20)})


@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", ["complete", "update"])
def test_output_modes_are_exactly_once_per_batch_across_a_killed_driver(
    spark: SparkSession,
    cluster: Cluster,
    tmp_path: Path,
    modes_input: Counter[bytes],
    mode: str,
) -> None:
    """Issue 21: a running count per key in ``complete`` (``format("dafka")``) and
    ``update`` (``dafka.spark.foreach_batch``) output modes, the driver SIGKILLed after
    batch 1 and restarted from its checkpoint. Each sink batch (the clock's high bits) is
    one micro-batch's output, written once: no key twice in a batch, every key's count
    grows from batch to batch (each batch of 100 records counts all 20 keys again: a
    micro-batch written twice would repeat its counts), and the last counts are the truth."""
    checkpoint = tmp_path / "checkpoint"
    runs: list[str] = []
    _run_driver(cluster, checkpoint, 1, runs, failing="-", mode=mode)
    _run_driver(cluster, checkpoint, None, runs, failing="-", mode=mode)
    by_batch: dict[int, list[tuple[bytes, int]]] = {}
    for r in read_to_heads(cluster, mode, "read_committed"):
        assert r.uuid is not None
        name, text = r.value.rsplit(b":", 1)
        by_batch.setdefault(get_clock(uuid_mod.UUID(bytes=r.uuid)) >> 32, []).append(
            (name, int(text))
        )
    logs = "\n---\n".join(r[-3000:] for r in runs)
    assert len(by_batch) == 6, f"{sorted(by_batch)}:\n{logs}"
    last: dict[bytes, int] = {}
    for batch in sorted(by_batch):
        keys = [k for k, _ in by_batch[batch]]
        assert len(keys) == len(set(keys)), f"sink batch {batch} holds a key twice"
        for key, count in by_batch[batch]:
            assert count > last.get(key, 0), f"{key!r}: {count} after {last.get(key)}"
            last[key] = count
    assert Counter(last) == modes_input


def _stream_to_sink(
    spark: SparkSession, cluster: Cluster, checkpoint: Path, starting: str, rows: int
) -> set[int]:
    """``reset-in`` -> the dafka sink ``reset-out``, 100 records per batch, until the query
    has read ``rows`` rows; the ids of the micro-batches it ran. (A processing-time trigger
    polls the heads; ``availableNow`` would end at once if its first plan missed them.)"""
    query = (
        spark.readStream.format("dafka")
        .option("towers", cluster.towers)
        .option("subscribe", "reset-in")
        .option("startingOffsets", starting)
        .option("maxRecordsPerTrigger", "100")
        .load()
        .select("value")
        .writeStream.format("dafka")
        .option("towers", cluster.towers)
        .option("topic", "reset-out")
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="100 milliseconds")
        .start()
    )

    def read() -> bool:
        if query.exception() is not None:
            raise AssertionError(f"the query failed: {query.exception()}")
        return int(sum(p["numInputRows"] for p in query.recentProgress)) >= rows

    try:
        wait_until(read, 300, f"the query to read {rows} rows")
    finally:
        query.stop()
    return {p["batchId"] for p in query.recentProgress if p["numInputRows"]}


def _publish_named(cluster: Cluster, values: list[bytes]) -> None:
    """Append to partition ``reset-in.0`` (a named producer resumes after its stored head)."""
    with Producer(
        "reset-in", towers=cluster.towers, name="reset-in", partitions=1, batching=False
    ) as producer:
        for v in values:
            producer.send(v)
        assert producer.flush(60) == 0


@pytest.mark.timeout(600)
def test_a_fresh_checkpoint_at_the_same_path_is_a_new_query_whose_output_is_written(
    spark: SparkSession, cluster: Cluster, tmp_path: Path
) -> None:
    """Issue 18, path 3: the sink's name is derived from the checkpoint path and its
    committed batches live in the cluster, so a checkpoint deleted and started again at the
    same path used to find its batches 0..N "already committed" and wrote nothing."""
    checkpoint = tmp_path / "checkpoint"
    first = [b"r%04d" % i for i in range(300)]
    _publish_named(cluster, first)
    _stream_to_sink(spark, cluster, checkpoint, "earliest", 300)  # batches 0, 1, 2
    assert Counter(committed_values(cluster, "reset-out")) == Counter(first)

    # the checkpoint is deleted; the query starts again at the same path, after what it read
    second = [b"r%04d" % i for i in range(300, 600)]
    _publish_named(cluster, second)
    shutil.rmtree(checkpoint)
    start = json.dumps({"reset-in": {"reset-in.0": 300}})
    _stream_to_sink(spark, cluster, checkpoint, start, 300)
    committed = Counter(committed_values(cluster, "reset-out"))
    written = sum(1 for v in second if committed[v])
    assert written == len(second), f"{written} of {len(second)} rows of the new query written"
    assert committed == Counter(first + second)

    # the new query's own restarts stay exactly-once: Spark replays its last batch (its
    # commit log entry is gone, as after a crash between the sink's commit and Spark's)
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    third = [b"r%04d" % i for i in range(600, 650)]
    _publish_named(cluster, third)
    assert last in _stream_to_sink(spark, cluster, checkpoint, "earliest", 150)  # replayed
    assert Counter(committed_values(cluster, "reset-out")) == Counter(first + second + third)
