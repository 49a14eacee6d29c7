"""The dafka source on a real local Spark: batch and streaming reads, options, restarts."""

from __future__ import annotations

import json
import select
import socket
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from dafka.client import Consumer, ConsumerSettings
from dafka.client import PartitionProducer as Producer
from dafka.message import Flags, build_uuid
from dafka.records import RecordColumns, encode_batch
from dafka.server import StoreNode, free_port_pair
from dafka.spark._options import parse_source_options
from dafka.spark._read import (
    TASK_HOLD_BYTES,
    RangePartition,
    _read_again,
    committed_to_cut,
    read_partition,
)
from dafka.spark._source import DafkaBatchReader, DafkaStreamReader, _watcher
from tests.spark.conftest import Cluster, wait_until


def publish(cluster: Cluster, topic: str, partition: str, contents: list[bytes]) -> None:
    with Producer(topic, cluster.transport, producer_id=partition) as producer:
        for content in contents:
            producer.publish(content)
        assert producer.flush(30)


def values(rows: list[Row]) -> list[bytes]:
    return sorted(r["value"] for r in rows)


def read(spark: SparkSession, cluster: Cluster, **options: str) -> DataFrame:
    reader = spark.read.format("dafka").option("towers", cluster.towers)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_plain_and_batched_records(spark: SparkSession, cluster: Cluster) -> None:
    batch = encode_batch(
        [b"a", b"b"],
        keys=[b"k", None],
        headers=[[("h", b"x"), ("i", b"")], None],
        timestamps=[1_700_000_000_123, 1_700_000_000_456],
        uuids=[bytes(range(16)), bytes(range(16, 32))],
    )
    publish(cluster, "b1", "b1.0", [b"p0", b"p1", batch, b"p3"])
    rows = read(spark, cluster, subscribe="b1").orderBy("offset", "index").collect()
    assert [(r.topic, r.partition, r.offset, r["index"]) for r in rows] == [
        ("b1", "b1.0", 0, 0),
        ("b1", "b1.0", 1, 0),
        ("b1", "b1.0", 2, 0),
        ("b1", "b1.0", 2, 1),
        ("b1", "b1.0", 3, 0),
    ]
    assert [r.value for r in rows] == [b"p0", b"p1", b"a", b"b", b"p3"]
    assert [r.key for r in rows] == [None, None, b"k", None, None]
    a = rows[2]
    assert [(h.key, h.value) for h in a.headers] == [("h", b"x"), ("i", b"")]
    assert rows[3].headers is None
    assert rows[0].timestamp is None
    stamps = read(spark, cluster, subscribe="b1").selectExpr("unix_millis(timestamp) AS ms")
    assert sorted(r.ms for r in stamps.collect() if r.ms is not None) == [
        1_700_000_000_123,
        1_700_000_000_456,
    ]
    assert a.uuid == bytes(range(16))
    assert rows[0].uuid is None


def test_batch_read_starting_and_ending_offsets(spark: SparkSession, cluster: Cluster) -> None:
    publish(cluster, "b2", "b2.0", [b"x%d" % i for i in range(20)])
    publish(cluster, "b2", "b2.1", [b"y%d" % i for i in range(10)])
    start = json.dumps({"b2": {"b2.0": 5}})
    end = json.dumps({"b2": {"b2.0": 8, "b2.1": 3}})
    rows = read(spark, cluster, subscribe="b2", startingOffsets=start, endingOffsets=end)
    assert values(rows.collect()) == sorted([b"x5", b"x6", b"x7", b"y0", b"y1", b"y2"])
    # minPartitions splits the ranges; the rows are the same
    split = read(spark, cluster, subscribe="b2", minPartitions="7")
    assert split.rdd.getNumPartitions() >= 7
    assert values(split.collect()) == sorted(
        [b"x%d" % i for i in range(20)] + [b"y%d" % i for i in range(10)]
    )


def test_planned_records_that_never_arrive_fail_or_are_skipped(
    spark: SparkSession, cluster: Cluster
) -> None:
    """failOnDataLoss is the task consumer's fail_on_data_loss: records planned past what any
    store holds fail the task naming them, or the range ends where the records end.
    (fetchTimeout counts from when a store greeted the task's consumer.)"""
    publish(cluster, "b5", "b5.0", [b"z0", b"z1", b"z2"])
    end = json.dumps({"b5": {"b5.0": 6}})
    with pytest.raises(Exception, match=r"b5/b5\.0: records 3\.\.5 did not arrive within 3"):
        read(spark, cluster, subscribe="b5", endingOffsets=end, fetchTimeout="3").collect()
    rows = read(
        spark, cluster, subscribe="b5", endingOffsets=end, fetchTimeout="3", failOnDataLoss="false"
    )
    assert values(rows.collect()) == [b"z0", b"z1", b"z2"]


def test_subscribe_pattern(spark: SparkSession, cluster: Cluster) -> None:
    publish(cluster, "pat-a", "pa.0", [b"a"])
    publish(cluster, "pat-b", "pb.0", [b"b"])
    publish(cluster, "other", "po.0", [b"o"])
    publish(cluster, "pat-gone", "pg.0", [b"g"])  # its producer is gone (issue 21)
    # The pattern finds topics by their producers' HEADs (live producers, as in a pipeline)
    # and by the GET-HEADS a store sends a new peer for every topic it holds (any topic).
    with (
        Producer("pat-a", cluster.transport, producer_id="pa.1") as pa,
        Producer("pat-b", cluster.transport, producer_id="pb.1") as pb,
    ):
        pa.publish(b"a2")
        pb.publish(b"b2")
        assert pa.flush(30)
        assert pb.flush(30)
        rows = read(spark, cluster, subscribePattern="pat-.*").collect()
    assert values(rows) == [b"a", b"a2", b"b", b"b2", b"g"]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "t", "subscrbe": "t"}, "subscrbe"),
        ({"subscribe": "t", "maxRecordsPerTrigger": "lots"}, "maxRecordsPerTrigger"),
        ({"subscribe": "t", "minPartitions": "0"}, "minPartitions"),
        ({"subscribe": "t", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({"subscribe": "t", "isolation": "dirty"}, "isolation"),
        ({"subscribe": "t", "startingOffsets": "{bad"}, "startingOffsets"),
        ({"subscribe": "t", "startingOffsets": '{"t": {"p": -1}}'}, "startingOffsets"),
        ({"subscribe": "t", "towers": "nohost"}, "towers"),
        ({}, "subscribe"),
        ({"subscribe": "t", "subscribePattern": "t.*"}, "subscribePattern"),
        ({"subscribe": "t", "kafka.bootstrap.servers": "h:9092"}, "dafka's: 'towers'"),
    ],
)
def test_bad_options_fail_at_once_naming_the_option(
    spark: SparkSession, cluster: Cluster, options: dict[str, str], named: str
) -> None:
    with pytest.raises(Exception, match=named):
        read(spark, cluster, **options).collect()
    if named not in ("subscrbe", "maxRecordsPerTrigger", "dafka's: 'towers'"):
        return  # the streaming path parses options the same way; three cases show it
    stream = spark.readStream.format("dafka").option("towers", cluster.towers)
    for key, value in options.items():
        stream = stream.option(key, value)
    with pytest.raises(Exception, match=named) as failed:
        _run_briefly(stream.load())
    _a_clear_config_error(str(failed.value))


def _a_clear_config_error(message: str) -> None:
    """The streaming planner's error is the ConfigError itself, not PySpark's
    UnboundLocalError raised while it cleans up after it (issue 21)."""
    assert "dafka.errors.ConfigError" in message, message
    assert "UnboundLocalError" not in message, message


def test_a_streaming_only_option_error_is_as_clear(spark: SparkSession, cluster: Cluster) -> None:
    """Checks that depend on the kind of read run when Spark creates the streaming reader:
    their ConfigError reaches the user as clearly as the shared ones."""
    stream = (
        spark.readStream.format("dafka")
        .option("towers", cluster.towers)
        .option("subscribe", "t")
        .option("endingOffsets", "latest")
        .load()
    )
    with pytest.raises(Exception, match="'endingOffsets' is for batch reads") as failed:
        _run_briefly(stream)
    _a_clear_config_error(str(failed.value))


def test_assign_and_include_headers(spark: SparkSession, cluster: Cluster) -> None:
    """``assign`` reads the named partitions only; ``includeHeaders=false`` drops the
    ``headers`` column (Kafka's options)."""
    batch = encode_batch([b"h"], headers=[[("k", b"v")]])
    publish(cluster, "as", "as.0", [b"a0", batch])
    publish(cluster, "as", "as.1", [b"b0"])
    assign = json.dumps({"as": ["as.0"]})
    rows = read(spark, cluster, assign=assign).orderBy("offset").collect()
    assert [r.value for r in rows] == [b"a0", b"h"]
    assert [(h.key, h.value) for h in rows[1].headers] == [("k", b"v")]
    bare = read(spark, cluster, assign=assign, includeHeaders="false")
    assert "headers" not in bare.columns
    assert values(bare.collect()) == [b"a0", b"h"]
    stream = (
        spark.readStream.format("dafka")
        .option("towers", cluster.towers)
        .option("assign", json.dumps({"as": ["as.1"]}))
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "false")
        .load()
    )
    assert "headers" not in stream.columns
    query = stream.writeStream.format("memory").queryName("assigned").start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert values(spark.table("assigned").collect()) == [b"b0"]


def test_a_query_started_before_its_cluster_waits_for_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Issue 21: the driver waits for a tower up to ``clusterTimeout`` (60 s by default, as
    Kafka's source waits for its brokers) rather than failing after 10 s. The tower's ports
    are held by plain listeners until the driver first connects; the cluster comes up 12 s
    after that."""
    port, listeners = _held_pair_below_ephemeral()
    late = Cluster(tmp_path / "late", port=port)
    query = (
        spark.readStream.format("dafka")
        .option("towers", late.towers)
        .option("subscribe", "late")
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("memory")
        .queryName("late")
        .start()
    )
    try:
        reached, _, _ = select.select(listeners, [], [], 120)
        assert reached, "the driver never tried to reach the tower"
        tried = time.monotonic()
        for listener in listeners:
            listener.close()
        wait_until(lambda: time.monotonic() - tried > 12 or not query.isActive, 30, "12 s")
        assert query.isActive, query.exception()
        late.inner.start()
        try:
            publish(late, "late", "late.0", [b"l0", b"l1"])
            wait_until(
                lambda: query.exception() is not None or spark.table("late").count() == 2,
                120,
                "the late cluster's rows",
            )
            assert query.exception() is None, query.exception()
        finally:
            late.inner.stop()
    finally:
        query.stop()
        for listener in listeners:
            listener.close()


def _held_pair_below_ephemeral() -> tuple[int, list[socket.socket]]:
    """Ports P, P+1 below the kernel's ephemeral range, held by listeners. (A client that
    keeps connecting to a free port of that range can connect to itself - the kernel may
    pick that very port as its source - and then holds the port the tower needs.) Taken
    from ``free_port_pair``'s cursor, which every cluster of this user shares: a random
    pick could be a port handed to another test a moment ago, not yet bound."""
    for _ in range(20):
        port = free_port_pair()
        try:
            first = socket.create_server(("127.0.0.1", port))
        except OSError:
            continue
        try:
            return port, [first, socket.create_server(("127.0.0.1", port + 1))]
        except OSError:
            first.close()
    raise AssertionError("no free pair of ports below the ephemeral range")


def _run_briefly(df: DataFrame) -> None:
    query = df.writeStream.format("noop").start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()


def _file_query(spark: SparkSession, cluster: Cluster, topic: str, out: Path) -> StreamingQuery:
    return (
        spark.readStream.format("dafka")
        .option("towers", cluster.towers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .select("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(out / "data"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )


def _written(spark: SparkSession, out: Path) -> list[bytes]:
    return values(spark.read.parquet(str(out / "data")).collect())


def test_streaming_new_partitions_and_exact_resume_after_restart(
    spark: SparkSession, cluster: Cluster, tmp_path: Path
) -> None:
    publish(cluster, "s1", "s1.0", [b"a%d" % i for i in range(50)])
    query = _file_query(spark, cluster, "s1", tmp_path)
    try:
        expected = [b"a%d" % i for i in range(50)]
        wait_until(lambda: query.lastProgress is not None and len(_seen(spark, tmp_path)) >= 50)
        # a new partition while the query runs: read from its beginning
        publish(cluster, "s1", "s1.1", [b"b%d" % i for i in range(30)])
        expected += [b"b%d" % i for i in range(30)]
        wait_until(lambda: len(_seen(spark, tmp_path)) >= 80, what="the new partition")
    finally:
        query.stop()
    assert _written(spark, tmp_path) == sorted(expected)
    # while stopped: more in the old partition and a third one
    # a second writer of s1.0 that does not resume (sequences 0..) is never told its records
    # are stored: the stores hold 0..49, so their ACKs lie beyond what it sent (issue 18)
    with Producer("s1", cluster.transport, producer_id="s1.0") as clash:
        for i in range(5):
            clash.publish(b"c%d" % i)
        assert not clash.flush(3)
        assert clash.statistics().acks_beyond_sent > 0
        clash.close(flush_timeout=0)
    with Producer("s1", cluster.transport, producer_id="s1.2") as p:
        for i in range(20):
            p.publish(b"d%d" % i)
        assert p.flush(30)
    expected += [b"d%d" % i for i in range(20)]
    query = _file_query(spark, cluster, "s1", tmp_path)
    try:
        wait_until(lambda: len(_seen(spark, tmp_path)) >= 100, what="the restarted query")
        query.processAllAvailable()
    finally:
        query.stop()
    assert _written(spark, tmp_path) == sorted(expected)


def _seen(spark: SparkSession, out: Path) -> list[Row]:
    if not (out / "data" / "_spark_metadata").exists():
        return []
    return spark.read.parquet(str(out / "data")).collect()


def _capped_batches(
    spark: SparkSession, cluster: Cluster, topic: str, cap: str
) -> tuple[list[int], list[bytes]]:
    """Read ``topic`` from the earliest offsets to its end (``availableNow``) with the cap
    option ``cap`` at 10: each micro-batch's size, and every value read."""
    sizes: list[int] = []
    seen: list[bytes] = []

    def collect(df: DataFrame, batch_id: int) -> None:
        rows = df.collect()
        sizes.append(len(rows))
        seen.extend(r.value for r in rows)

    query = (
        spark.readStream.format("dafka")
        .option("towers", cluster.towers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option(cap, "10")
        .load()
        .writeStream.foreachBatch(collect)
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    return sizes, seen


def test_max_records_per_trigger(spark: SparkSession, cluster: Cluster) -> None:
    publish(cluster, "m1", "m1.0", [b"x%d" % i for i in range(25)])
    publish(cluster, "m1", "m1.1", [b"y%d" % i for i in range(12)])
    sizes, seen = _capped_batches(spark, cluster, "m1", "maxRecordsPerTrigger")
    assert sorted(seen) == sorted([b"x%d" % i for i in range(25)] + [b"y%d" % i for i in range(12)])
    assert max(sizes) == 10
    assert sum(sizes) == 37
    assert len([s for s in sizes if s]) == 4


def test_max_offsets_per_trigger_counts_messages(spark: SparkSession, cluster: Cluster) -> None:
    """Kafka's ``maxOffsetsPerTrigger`` caps a micro-batch in messages (the driver counts
    them per RECORD); before, it was refused (``maxRecordsPerTrigger`` counts RECORDs: 10 of
    these would be up to 50 messages). A RECORD is never split: one larger than the cap
    makes one batch of its own size."""
    x = [encode_batch([b"x%d-%d" % (r, i) for i in range(5)]) for r in range(8)]
    y = [encode_batch([b"y%d-%d" % (r, i) for i in range(4)]) for r in range(3)]
    big = [encode_batch([b"z%d" % i for i in range(15)])]
    publish(cluster, "m2", "m2.0", x)
    publish(cluster, "m2", "m2.1", y)
    publish(cluster, "m2", "m2.2", big)
    sizes, seen = _capped_batches(spark, cluster, "m2", "maxOffsetsPerTrigger")
    expected = (
        [b"x%d-%d" % (r, i) for r in range(8) for i in range(5)]
        + [b"y%d-%d" % (r, i) for r in range(3) for i in range(4)]
        + [b"z%d" % i for i in range(15)]
    )
    assert sorted(seen) == sorted(expected)
    over = [s for s in sizes if s > 10]
    assert len(over) <= 1, sizes  # the batch with the 15-message RECORD
    assert all(s <= 15 + 10 for s in over), sizes  # it, and at most the cap besides
    assert len([s for s in sizes if s]) >= 5, sizes  # 67 messages: (67 - 15) / 10 + 1


# -- isolation=read_committed ----------------------------------------------------------------

_PID = b"\x01rc-tx"


def _txn(values: list[bytes], first_clock: int, producer: bytes = _PID) -> bytes:
    """One RECORD of CONTINUE_TXN messages with consecutive clocks from ``first_clock``."""
    clocks = range(first_clock, first_clock + len(values))
    uuids = [build_uuid(producer, clock, Flags.CONTINUE_TXN).bytes for clock in clocks]
    return encode_batch(values, uuids=uuids)


def _ack(clock: int, producer: bytes = _PID) -> bytes:
    return encode_batch([b""], uuids=[build_uuid(producer, clock, Flags.ACK_TXN).bytes])


def _committed_stream(
    spark: SparkSession,
    cluster: Cluster,
    checkpoint: Path,
    batches: list[list[bytes]],
    *,
    cap: int = 2,
    available_now: bool = False,
) -> StreamingQuery:
    def collect(df: DataFrame, batch_id: int) -> None:
        batches.append(sorted(r.value for r in df.collect()))

    writer = (
        spark.readStream.format("dafka")
        .option("towers", cluster.towers)
        .option("subscribe", "rc")
        .option("startingOffsets", "earliest")
        .option("isolation", "read_committed")
        .option("maxRecordsPerTrigger", str(cap))
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
    )
    if available_now:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime="100 milliseconds").start()


def test_read_committed_across_micro_batches_and_a_restart(
    spark: SparkSession, cluster: Cluster, tmp_path: Path
) -> None:
    a = [b"a%d" % i for i in range(5)]
    r = [b"r%d" % i for i in range(3)]
    c = [b"c%d" % i for i in range(3)]
    batches: list[list[bytes]] = []
    with Producer("rc", cluster.transport, producer_id="rc.0") as log:
        for content in [
            _txn(a[:3], 1),  # 0  T1 (clocks 1..5) in two RECORDs ...
            _txn(a[3:], 4),  # 1
            _ack(5),  # 2     ... committed
            b"p0",  # 3       a plain RECORD: committed on its own
            _txn(r, 6),  # 4  T2 ...
            _ack(5),  # 5     ... rolled back (the last ACK again)
            _txn([b"a2"], 3),  # 6  a re-sent message of T1: a duplicate (clock <= last ACK)
            _txn(c[:2], 9),  # 7  T3 open: straddles the batches and the restart
            _txn(c[2:], 11),  # 8
        ]:
            log.publish(content)
        assert log.flush(30)
        query = _committed_stream(spark, cluster, tmp_path / "ckpt", batches)
        try:
            wait_until(lambda: sum(map(len, batches)) >= 6, what="T1 and p0")
            query.processAllAvailable()
        finally:
            query.stop()
        before = [v for b in batches for v in b]
        assert sorted(before) == sorted([*a, b"p0"]), batches
        # maxRecordsPerTrigger=2 splits the log into several batches, but never a
        # transaction: T1's five messages arrive together
        assert len([b for b in batches if b]) >= 2, batches
        assert next(b for b in batches if b"a0" in b)[:5] == a
        log.publish(_ack(11))  # 9: T3 commits while the query is stopped
        assert log.flush(30)
    query = _committed_stream(spark, cluster, tmp_path / "ckpt", batches)
    try:
        wait_until(lambda: sum(map(len, batches)) >= 9, what="T3 after the restart")
        query.processAllAvailable()
    finally:
        query.stop()
    seen = [v for b in batches for v in b]
    assert Counter(seen) == Counter([*a, b"p0", *c])  # each committed message once
    # a batch read sees the same committed log
    rows = read(spark, cluster, subscribe="rc", isolation="read_committed").collect()
    assert Counter(r.value for r in rows) == Counter([*a, b"p0", *c])
    everything = read(spark, cluster, subscribe="rc").collect()
    assert {b"r0", b"r1", b"r2"} <= {r.value for r in everything}  # but the log holds T2
    # availableNow: the driver's reader catches up with the heads before the first batch
    now: list[list[bytes]] = []
    query = _committed_stream(spark, cluster, tmp_path / "now", now, cap=3, available_now=True)
    assert query.awaitTermination(120)
    assert Counter(v for b in now for v in b) == Counter([*a, b"p0", *c])


def test_a_batch_read_committed_ends_at_the_last_clean_cut(
    spark: SparkSession, cluster: Cluster
) -> None:
    """A batch read's tasks end their rows at the last clean cut of their range (the
    driver reads no RECORD to plan it): a transaction committed behind another producer's
    span that is still open is no row until that span is decided, as when the driver's
    plan ended the range before the span."""
    other = b"\x01rc-ot"
    with Producer("rcb", cluster.transport, producer_id="rcb.0") as log:
        for content in [
            _txn([b"t1a", b"t1b"], 1),  # 0  T1 ...
            _ack(2),  # 1                    ... committed: a clean cut after it
            _txn([b"o1"], 1, other),  # 2   the other producer's span, open
            _txn([b"t2"], 3),  # 3          T2 ...
            _ack(3),  # 4                    ... committed, behind the open span
        ]:
            log.publish(content)
        assert log.flush(30)
        rows = read(spark, cluster, subscribe="rcb", isolation="read_committed").collect()
        assert sorted(r.value for r in rows) == [b"t1a", b"t1b"]
        log.publish(_ack(2, other))  # 5: the span commits
        assert log.flush(30)
    rows = read(spark, cluster, subscribe="rcb", isolation="read_committed").collect()
    assert Counter(r.value for r in rows) == Counter([b"t1a", b"t1b", b"o1", b"t2"])


def test_a_batch_read_committed_ends_each_partition_at_its_own_cut(
    spark: SparkSession, cluster: Cluster
) -> None:
    """Two partitions whose last clean cuts differ (one behind another producer's open
    span, one behind its own transaction open at the end, with plain RECORDs), read whole,
    with ``endingOffsets`` inside a transaction and ``startingOffsets`` inside another: each
    task ends its rows at its own range's last cut, as the driver's plan did."""
    other = b"\x01rcpot"
    with Producer("rcp", cluster.transport, producer_id="rcp.0") as log:
        for content in [
            _txn([b"a0", b"a1"], 1),  # 0  T1 ...
            _ack(2),  # 1                  ... committed: the last cut, at 2
            _txn([b"o0"], 1, other),  # 2  the other producer's span, open at the end
            _txn([b"a2"], 3),  # 3         T2 ...
            _ack(3),  # 4                  ... committed behind it: no row
        ]:
            log.publish(content)
        assert log.flush(30)
    with Producer("rcp", cluster.transport, producer_id="rcp.1") as log:
        for content in [
            b"p0",  # 0                       plain
            _txn([b"b0", b"b1"], 1),  # 1     T3 in two RECORDs ...
            _txn([b"b2"], 3),  # 2
            _ack(3),  # 3                     ... committed
            b"p1",  # 4                       plain: the last cut, at 5
            _txn([b"b3"], 4),  # 5            T4, open at the end
        ]:
            log.publish(content)
        assert log.flush(30)

    def committed(**options: str) -> list[bytes]:
        found = read(spark, cluster, subscribe="rcp", isolation="read_committed", **options)
        return values(found.collect())

    assert committed() == sorted([b"a0", b"a1", b"p0", b"b0", b"b1", b"b2", b"p1"])
    # endingOffsets inside T3 (its ACK not in the range): T3 is no row; T1 whole
    end = json.dumps({"rcp": {"rcp.0": 5, "rcp.1": 3}})
    assert committed(endingOffsets=end) == sorted([b"a0", b"a1", b"p0"])
    # startingOffsets inside T3 (no producer state there): the rest of T3 from its ACK
    start = json.dumps({"rcp": {"rcp.0": 0, "rcp.1": 2}})
    assert committed(startingOffsets=start) == sorted([b"a0", b"a1", b"b2", b"p1"])
    # an empty range: nothing
    start = json.dumps({"rcp": {"rcp.0": 5, "rcp.1": 6}})
    assert committed(startingOffsets=start) == []


def test_a_task_past_its_hold_reads_between_its_cuts_again_from_the_stores(
    cluster: Cluster,
) -> None:
    """The task's body over a real cluster with a hold of 1 byte and polls of one message:
    T2, committed behind the other producer's span, overflows the hold; the task reads on
    to the cut after that span's ACK and reads the range up to it again with a new bounded
    consumer (``_read_again``), keeping the rows from its last cut on - the rows, in their
    order, of the same read with a hold that never overflows."""
    other = b"\x01rchot"
    with Producer("rch", cluster.transport, producer_id="rch.0") as log:
        for content in [
            _txn([b"a0", b"a1"], 1),  # 0  T1 ...
            _ack(2),  # 1                  ... committed: a cut at 2
            _txn([b"o0"], 1, other),  # 2  the other producer's span ...
            _txn([b"a2"], 3),  # 3         T2 ...
            _ack(3),  # 4                  ... committed behind it: the hold overflows
            _ack(1, other),  # 5           ... the span commits: the later cut, at 6
            _txn([b"a3"], 4),  # 6         T3, open at the end
        ]:
            log.publish(content)
        assert log.flush(30)
    task = RangePartition(
        cluster.towers, "rch", "rch.0", 0, 7, 10.0, True, committed=True, find_cut=True
    )
    settings = task.settings()
    reads_again: list[tuple[int, int, bool]] = []

    def read_again(again: RangePartition, settings: ConsumerSettings) -> Iterator[RecordColumns]:
        reads_again.append((again.start, again.end, again.find_cut))
        return _read_again(again, settings)

    def rows(hold: int) -> list[bytes]:
        with Consumer(
            assign={("rch", "rch.0"): 0}, end_offsets={("rch", "rch.0"): 7}, settings=settings
        ) as consumer:
            polls = consumer.read_to_end(task.timeout, 1)
            found = committed_to_cut(polls, task, settings, read_again, hold)
            return [value for columns in found for value in columns.values]

    assert rows(TASK_HOLD_BYTES) == [b"a0", b"a1", b"a2", b"o0"]
    assert reads_again == []
    assert rows(1) == [b"a0", b"a1", b"a2", b"o0"]
    assert reads_again == [(0, 6, False)]


def test_a_batch_read_committed_planned_before_its_store_restarts(tmp_path: Path) -> None:
    """The driver plans a read_committed batch read from the heads alone; the store restarts
    before the tasks run: each task reads its range from the restarted store and ends its
    rows at its last clean cut - T1, not T2 (committed behind the other producer's span
    still open), nor that span."""
    cluster = Cluster(tmp_path)
    cluster.inner.start()
    try:
        other = b"\x01rcsot"
        with Producer("rcs", cluster.transport, producer_id="rcs.0") as log:
            for content in [
                _txn([b"a0", b"a1"], 1),  # 0  T1 ...
                _ack(2),  # 1                  ... committed: the last cut, at 2
                _txn([b"o0"], 1, other),  # 2  the other producer's span, open at the end
                _txn([b"a2"], 3),  # 3         T2 ...
                _ack(3),  # 4                  ... committed behind it
            ]:
                log.publish(content)
            assert log.flush(30)
        options = {"towers": cluster.towers, "subscribe": "rcs", "isolation": "read_committed"}
        tasks = DafkaBatchReader(parse_source_options(options, streaming=False)).partitions()
        assert [(t.start, t.end, t.find_cut) for t in tasks] == [(0, 5, True)]
        store = cluster.inner.stores[0]
        store.stop()
        again = StoreNode(store.data_dir, cluster.inner.transport, name="store-0")
        again.start()
        cluster.inner.stores[0] = again
        rows = [v for t in tasks for b in read_partition(t) for v in b.column("value").to_pylist()]
        assert rows == [b"a0", b"a1"]
    finally:
        cluster.inner.stop()


@pytest.mark.parametrize(
    ("option", "delay"),
    [
        ("minOffsetsPerTrigger", "1h"),
        ("minOffsetsPerTrigger", "300ms"),
        ("minRecordsPerTrigger", "1h"),
    ],
)
def test_min_offsets_per_trigger_waits_for_enough_or_the_delay(
    cluster: Cluster, option: str, delay: str
) -> None:
    """Kafka's ``minOffsetsPerTrigger`` / ``maxTriggerDelay``, on the driver's planner (the
    reader Spark calls, against the real cluster): the first micro-batch runs at once; then
    a batch waits until that many offsets are there, or until the delay since the last one.
    (Plain RECORDs: one message each, so messages and RECORDs agree here.)"""
    topic = f"min-{option}-{delay}"
    options = {
        "towers": cluster.towers,
        "subscribe": topic,
        "startingOffsets": "earliest",
        option: "5",
        "maxTriggerDelay": delay,
    }
    r = DafkaStreamReader(parse_source_options(options, streaming=True))
    limit = r.getDefaultReadLimit()

    def seen(head: int) -> None:
        key = (topic, "m.0")
        wait_until(lambda: _watcher(r.options).heads().get(key) == head, 30, f"head {head}")

    with Producer(topic, cluster.transport, producer_id="m.0") as p:
        for i in range(3):
            p.publish(b"%d" % i)
        assert p.flush(30)
        start = r.initialOffset()
        seen(2)
        first = r.latestOffset(start, limit)
        assert first == {topic: {"m.0": 3}}  # the first batch: at once
        for i in range(3, 6):
            p.publish(b"%d" % i)
        assert p.flush(30)
        seen(5)
        if delay == "1h":  # 3 < 5 offsets, the delay far off: no batch
            assert r.latestOffset(first, limit) == first
            for i in range(6, 8):
                p.publish(b"%d" % i)
            assert p.flush(30)
            seen(7)
            # (messages: once the driver's counter has counted them)
            wait_until(lambda: r.latestOffset(first, limit) == {topic: {"m.0": 8}}, 30, "5")
        else:  # 3 < 5 offsets, but 300 ms since the last batch let them through
            wait_until(lambda: r.latestOffset(first, limit) == {topic: {"m.0": 6}}, 30, "the delay")


def test_min_offsets_per_trigger_counts_messages(cluster: Cluster) -> None:
    """``minOffsetsPerTrigger`` counts messages, as Kafka's (and ``maxOffsetsPerTrigger``):
    two batched RECORDs of three messages are six offsets, enough for 5 - it counted
    RECORDs before (2 < 5: no batch until ``maxTriggerDelay``); ``minRecordsPerTrigger``
    counts RECORDs."""
    topic = "min-messages"

    def reader(option: str) -> DafkaStreamReader:
        options = {
            "towers": cluster.towers,
            "subscribe": topic,
            "startingOffsets": "earliest",
            option: "5",
            "maxTriggerDelay": "1h",
        }
        return DafkaStreamReader(parse_source_options(options, streaming=True))

    by_messages, by_records = reader("minOffsetsPerTrigger"), reader("minRecordsPerTrigger")
    limit = by_messages.getDefaultReadLimit()
    key = (topic, "n.0")
    with Producer(topic, cluster.transport, producer_id="n.0") as p:
        p.publish(b"first")
        assert p.flush(30)
        wait_until(lambda: _watcher(by_messages.options).heads().get(key) == 0, 30, "head 0")
        first = {topic: {"n.0": 1}}
        for r in (by_messages, by_records):  # the first batch: at once
            assert r.latestOffset(r.initialOffset(), limit) == first
        for n in range(2):
            p.publish(encode_batch([b"%d-%d" % (n, i) for i in range(3)]))
        assert p.flush(30)
        wait_until(lambda: _watcher(by_messages.options).heads().get(key) == 2, 30, "head 2")
        wait_until(
            lambda: by_messages.latestOffset(first, limit) == {topic: {"n.0": 3}},
            30,
            "a batch of 2 RECORDs holding 6 messages",
        )
        assert by_records.latestOffset(first, limit) == first  # 2 RECORDs < 5


def test_starting_and_ending_timestamps(spark: SparkSession, cluster: Cluster) -> None:
    """Kafka's ``startingTimestamp``, ``startingOffsetsByTimestamp`` and ``endingTimestamp``:
    a partition starts at its first RECORD at or after the time, ends before the first at
    or after the ending time; one with none at or after starts at its end."""

    def stamped(times: list[int]) -> list[bytes]:
        return [encode_batch([b"%d" % t], timestamps=[t]) for t in times]

    publish(cluster, "ts", "ts.0", stamped([1000, 2000, 3000, 4000, 5000, 6000]))
    publish(cluster, "ts", "ts.1", stamped([1500, 2500, 3500]))

    def got(**options: str) -> list[bytes]:
        return values(read(spark, cluster, subscribe="ts", **options).collect())

    assert got(startingTimestamp="2500") == [b"2500", b"3000", b"3500", b"4000", b"5000", b"6000"]
    assert got(startingTimestamp="2500", endingTimestamp="5000") == [
        b"2500",
        b"3000",
        b"3500",
        b"4000",
    ]
    by_partition = json.dumps({"ts": {"ts.0": 5500}})  # ts.1 not named: from its beginning
    assert got(startingOffsetsByTimestamp=by_partition) == [b"1500", b"2500", b"3500", b"6000"]
    with pytest.raises(Exception, match="at most one of the options"):
        got(startingTimestamp="1", startingOffsets="earliest")
    stream = (
        spark.readStream.format("dafka")
        .option("towers", cluster.towers)
        .option("subscribe", "ts")
        .option("startingTimestamp", "4500")  # ts.1 has nothing at or after: its end
        .load()
    )
    query = stream.writeStream.format("memory").queryName("since").start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert values(spark.table("since").collect()) == [b"5000", b"6000"]
