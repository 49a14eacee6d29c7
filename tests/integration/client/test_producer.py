"""The topic-level Producer on a real cluster (tower + stores on loopback sockets)."""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from dafka.client import Consumer, DeliveryError, Producer
from dafka.errors import ConfigError, NodeFailedError
from dafka.node import BackpressureError
from dafka.records import Record, RecordMetadata
from dafka.server import InProcessCluster, LocalCluster, free_port_pair
from dafka.storage import StorageConfig

BEACON = 0.2
FAST: dict[str, Any] = {"beacon_interval": BEACON, "beacon_timeout": 4 * BEACON}


class Cluster(InProcessCluster):
    """In this process (the tests stop stores and read their heads), on a port pair."""

    def __init__(
        self, data_dir: Path, stores: int, storage_config: StorageConfig | None = None
    ) -> None:
        self.port = free_port_pair()
        super().__init__(
            data_dir,
            stores=stores,
            tower_port=self.port,
            beacon_interval=BEACON,
            storage_config=storage_config,
        )

    @property
    def towers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> Cluster:
        self.start()
        return self


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(tmp_path, stores=2) as c:
        yield c


def live_consumer(cluster: Cluster, topic: str) -> Consumer:
    """A consumer of ``topic`` from its beginning, at the suite's fast beacons."""
    return Consumer(topic, towers=cluster.towers, offset_reset="earliest", **FAST)


def poll_values(consumer: Consumer, count: int, poll: float = 0.2) -> list[bytes]:
    """The values ``consumer`` polls (``poll`` s a call) until it has ``count`` or 30 s
    passed (the caller asserts on what came)."""
    got: list[Record] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.poll(timeout=poll)
    return [r.value for r in got]


def read_back(
    cluster: Cluster | LocalCluster, topic: str, count: int, timeout: float = 20
) -> list[Record]:
    """Every message of ``topic``, read by a late consumer (batches unpacked by it)."""
    out: list[Record] = []
    deadline = time.monotonic() + timeout
    with Consumer(topic, towers=cluster.towers, offset_reset="earliest", **FAST) as consumer:
        while len(out) < count and time.monotonic() < deadline:
            out += consumer.poll(timeout=0.5)
    assert len(out) == count, f"read {len(out)} of {count}"
    return out


@pytest.fixture
def store_processes(tmp_path: Path) -> Iterator[LocalCluster]:
    """Two stores in their own processes: the collector counted in this process is then
    the producer's alone (an in-process store's turns allocate too, more of them the more
    the machine is loaded: 16 collections in 20,000 messages in a CI run at load 15-18,
    none with the stores out of process)."""
    with LocalCluster(tmp_path, stores=2, beacon_interval=BEACON) as c:
        yield c


@contextlib.contextmanager
def collections_counted(ignored: set[threading.Thread]) -> Iterator[list[int]]:
    """The generations of the cyclic collector's runs while the block runs (after a full
    collection, so that none is owed from before), but those set off in ``ignored``
    threads: the threads alive before the test made its producer (in an xdist worker,
    earlier tests' threads still closing allocated meanwhile - 102 collections in a lead CI
    run where the test alone sets off none; a collection starts in the thread whose
    allocation crossed the threshold)."""
    collections: list[int] = []

    def counted(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and threading.current_thread() not in ignored:
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(counted)
    try:
        yield collections
    finally:
        gc.callbacks.remove(counted)


def test_batched_round_trip_with_keys_headers_timestamps(cluster: Cluster) -> None:
    with Producer("orders", towers=cluster.towers, partitions=3, **FAST) as p:
        futures = [
            p.send(
                b"v%d" % i,
                key=None if i % 4 == 0 else b"k%d" % (i % 7),
                headers=[("n", str(i).encode())] if i % 2 else None,
                timestamp=1_700_000_000_000 + i,
                uuid=i.to_bytes(16, "big") if i % 3 == 1 else None,
            )
            for i in range(500)
        ]
        assert p.flush(timeout=20) == 0
        metas = [f.result(timeout=0) for f in futures]
    records = read_back(cluster, "orders", 500)
    by_value = {r.value: r for r in records}
    for i, meta in enumerate(metas):
        r = by_value[b"v%d" % i]
        assert RecordMetadata(r.topic, r.partition, r.offset, r.index) == meta
        assert r.key == (None if i % 4 == 0 else b"k%d" % (i % 7))
        assert r.headers == ((("n", str(i).encode()),) if i % 2 else ())
        assert r.timestamp == 1_700_000_000_000 + i
        assert r.uuid == (i.to_bytes(16, "big") if i % 3 == 1 else None)
    # per partition, messages come back in the order they were sent
    for partition in {m.partition for m in metas}:
        sent = [b"v%d" % i for i, m in enumerate(metas) if m.partition == partition]
        got = [
            r.value
            for r in sorted(records, key=lambda r: (r.offset, r.index))
            if r.partition == partition
        ]
        assert got == sent


def test_unbatched_round_trip_is_plain_records(cluster: Cluster) -> None:
    with Producer("plain", towers=cluster.towers, batching=False, **FAST) as p:
        metas = [p.send(b"plain %d" % i).result(timeout=20) for i in range(50)]
    assert [(m.offset, m.index) for m in metas] == [(i, 0) for i in range(50)]
    records = read_back(cluster, "plain", 50)
    assert sorted(r.value for r in records) == sorted(b"plain %d" % i for i in range(50))
    assert all(r.key is None and r.timestamp is None for r in records)


def test_unbatched_callbacks_name_each_record(cluster: Cluster) -> None:
    """produce() and produce_many unbatched: runs of RECORDs completed at once (a spread
    chunk) still tell on_delivery each message's own RECORD, in order."""
    seen: list[tuple[int, int]] = []
    with Producer(
        "plain-callbacks",
        towers=cluster.towers,
        batching=False,
        on_delivery=lambda m, e: seen.append((m.offset, m.index) if m else (-1, -1)),
        **FAST,
    ) as p:
        for i in range(30):
            p.produce(b"one %d" % i)
        p.produce_many([b"many %d" % i for i in range(10)])
        assert p.flush(20) == 0
        assert p.delivered == 40
    assert seen == [(i, 0) for i in range(40)]
    records = read_back(cluster, "plain-callbacks", 40)
    assert sorted(r.offset for r in records) == list(range(40))


def test_futures_and_callbacks_resolve_after_storage(cluster: Cluster) -> None:
    calls: list[tuple[RecordMetadata | None, BaseException | None]] = []
    with Producer(
        "stored",
        towers=cluster.towers,
        on_delivery=lambda m, e: calls.append((m, e)),
        linger_ms=1,
        **FAST,
    ) as p:
        for i in range(20):
            meta = p.send(b"x%d" % i).result(timeout=20)
            # once the future resolved, a store holds the RECORD durably
            heads = [store.heads("stored").get(meta.partition, -1) for store in cluster.stores]
            assert max(heads) >= meta.offset
        assert p.flush(5) == 0
    assert len(calls) == 20
    assert all(m is not None and e is None for m, e in calls)


def test_keyed_routing_is_stable_across_a_restart(cluster: Cluster) -> None:
    keys = [b"user-%d" % i for i in range(30)]
    first: dict[bytes, RecordMetadata] = {}
    with Producer("keyed", towers=cluster.towers, name="writer", partitions=4, **FAST) as p:
        for key in keys:
            first[key] = p.send(b"one", key=key).result(timeout=20)
    assert len({m.partition for m in first.values()}) > 1
    with Producer("keyed", towers=cluster.towers, name="writer", partitions=4, **FAST) as p:
        for key in keys:
            meta = p.send(b"two", key=key).result(timeout=20)
            assert meta.partition == first[key].partition
            # resumed: the partition continues after its stored head (no sequence reused)
            assert meta.offset > first[key].offset
            assert p.partition_for(key) == meta.partition
    records = read_back(cluster, "keyed", 60)
    for key in keys:
        mine = sorted((r.offset, r.index, r.value) for r in records if r.key == key)
        assert [v for _, _, v in mine] == [b"one", b"two"]


def test_rendezvous_partitioner(cluster: Cluster) -> None:
    with Producer("rv", towers=cluster.towers, partitions=5, partitioner="rendezvous", **FAST) as p:
        metas = [p.send(b"v", key=b"k%d" % (i % 10)).result(timeout=20) for i in range(40)]
    by_key: dict[int, set[str]] = {}
    for i, m in enumerate(metas):
        by_key.setdefault(i % 10, set()).add(m.partition)
    assert all(len(parts) == 1 for parts in by_key.values())


def test_futures_fail_when_the_cluster_is_gone(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, stores=1)
    cluster.start()
    try:
        p = Producer("gone", towers=cluster.towers, delivery_timeout=1.0, **FAST)
        # until the store is connected (under load that can take longer than the 1 s timeout)
        deadline = time.monotonic() + 20
        while p.send(b"before").exception(timeout=20) is not None:
            assert time.monotonic() < deadline, "the store never acknowledged"
        for store in cluster.stores:
            store.stop()
        cluster.stores.clear()
        future = p.send(b"after")
        with pytest.raises(DeliveryError, match="delivery_timeout"):
            future.result(timeout=20)
        lost = p.send(b"on close")
        p.close(timeout=0)
        with pytest.raises(DeliveryError, match="closed"):
            lost.result(timeout=5)
    finally:
        cluster.stop()


def test_backpressure_error_at_the_in_flight_bound(tmp_path: Path) -> None:
    with Cluster(tmp_path, stores=0) as cluster:
        with Producer(
            "bp", towers=cluster.towers, max_in_flight=3, backpressure="error", **FAST
        ) as p:
            futures: list[Future[RecordMetadata]] = [p.send(b"x") for _ in range(3)]
            with pytest.raises(BackpressureError):
                p.send(b"one too many")
            assert len(p) == 3
            assert p.flush(timeout=0.2) == 3
        for f in futures:  # closed unflushed: each future fails, none hangs
            with pytest.raises(DeliveryError):
                f.result(timeout=5)


def test_a_named_producer_without_stores_fails_clearly(tmp_path: Path) -> None:
    with Cluster(tmp_path, stores=0) as cluster:
        started = time.monotonic()
        with pytest.raises(DeliveryError, match="resume"):
            Producer("t", towers=cluster.towers, name="w", resume_timeout=1.0, **FAST)
        assert time.monotonic() - started < 10
        # a new name can say so
        with Producer("t", towers=cluster.towers, name="w", resume=False, **FAST) as p:
            assert p.partitions == ("w.0",)


def test_next_sequences_continue_where_the_caller_says(tmp_path: Path) -> None:
    """A caller that knows its partitions' heads (the Spark sink's commit) skips the resume's
    wait: the producer publishes once a store greeted it, at the sequences given."""
    with Cluster(tmp_path, stores=1) as cluster:
        with Producer("known", towers=cluster.towers, name="w", partitions=2, **FAST) as p:
            first = [p.send(b"a%d" % i, key=b"k%d" % i).result(timeout=20) for i in range(6)]
        heads = {m.partition: m.offset for m in first}
        assert set(heads) == {"w.0", "w.1"}
        nexts = {partition: head + 1 for partition, head in heads.items()}
        with Producer(
            "known", towers=cluster.towers, name="w", partitions=2, next_sequences=nexts, **FAST
        ) as p:
            assert p.start_offsets == nexts
            meta = p.send(b"next", key=b"k0").result(timeout=20)
            assert meta.offset == nexts[meta.partition]
    with pytest.raises(ConfigError, match="exactly the partitions"):
        Producer("known", towers=cluster.towers, name="w", next_sequences={"w.1": 3}, **FAST)
    with pytest.raises(ConfigError, match="needs a name"):
        Producer("known", towers=cluster.towers, next_sequences={"x.0": 3}, **FAST)
    with pytest.raises(ConfigError, match=">= 0"):
        Producer("known", towers=cluster.towers, name="w", next_sequences={"w.0": -1}, **FAST)


def test_application_mistakes_raise_in_the_caller(cluster: Cluster) -> None:
    with Producer("mistakes", towers=cluster.towers, **FAST) as p:
        for bad in ("text", None, 42):
            with pytest.raises(TypeError, match="value must be bytes"):
                p.send(bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="key"):
            p.send(b"v", key="text")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="header"):
            p.send(b"v", headers=[("h", "text")])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="timestamp"):
            p.send(b"v", timestamp=1.5)  # type: ignore[arg-type]
        future = p.send(bytearray(b"ok"))  # type: ignore[arg-type]
        assert future.result(timeout=20).offset >= 0
    with pytest.raises(ConfigError, match="linger_ms"):
        Producer("t", towers=cluster.towers, linger_ms=-1)
    with pytest.raises(ConfigError, match="lingerms"):
        Producer("t", towers=cluster.towers, lingerms=1)
    with (
        Producer("plain", towers=cluster.towers, batching=False, **FAST) as p,
        pytest.raises(ValueError, match="batching=False"),
    ):
        p.send(b"v", headers=[("h", b"v")])


def test_a_dead_node_fails_futures_and_every_later_call(cluster: Cluster) -> None:
    """The runner thread dies (a bug injected through its post queue, as the hardening tests
    do): in-flight futures fail with NodeFailedError and so does every later call."""
    p = Producer("crash", towers=cluster.towers, linger_ms=60_000, **FAST)
    waiting = p.send(b"never sent")  # lingers in its open batch

    def boom(now: float) -> None:
        raise RuntimeError("injected")

    p._runner.post(boom)
    with pytest.raises(NodeFailedError) as caught:
        waiting.result(timeout=10)
    assert isinstance(caught.value.cause, RuntimeError)
    for call in (lambda: p.send(b"x"), lambda: p.flush(1), p.close, p.close):
        with pytest.raises(NodeFailedError):
            call()


def test_produce_without_futures_reports_through_flush_and_callback(cluster: Cluster) -> None:
    seen: list[RecordMetadata | None] = []
    with Producer(
        "bulk",
        towers=cluster.towers,
        partitions=2,
        on_delivery=lambda m, e: seen.append(m),
        **FAST,
    ) as p:
        for i in range(2000):
            p.produce(b"%d" % i, key=b"k%d" % (i % 3))
        assert p.flush(timeout=20) == 0
        assert p.delivered == 2000
    assert len(seen) == 2000
    assert None not in seen
    assert len(read_back(cluster, "bulk", 2000)) == 2000


def test_produce_many_routes_keys_like_send_and_counts_delivery(cluster: Cluster) -> None:
    seen: list[RecordMetadata] = []
    errors: list[BaseException] = []

    def on_delivery(meta: RecordMetadata | None, error: BaseException | None) -> None:
        if meta is not None:
            seen.append(meta)
        if error is not None:
            errors.append(error)

    n = 3000
    keys: list[bytes | None] = [None if i % 7 == 0 else b"k%d" % (i % 11) for i in range(n)]
    values = [b"%d" % i for i in range(n)]
    with Producer(
        "many", towers=cluster.towers, partitions=3, on_delivery=on_delivery, **FAST
    ) as p:
        p.produce_many(values[:1000], keys[:1000])
        p.send(b"single", key=b"k1").result(timeout=20)  # mixed with single messages
        p.produce_many(iter(values[1000:]), iter(keys[1000:]))  # any iterables
        assert p.flush(timeout=20) == 0
        assert p.delivered == n + 1
        routes = {key: p.partition_for(key) for key in keys if key is not None}
    assert not errors
    assert len(seen) == n + 1
    assert len({(m.partition, m.offset, m.index) for m in seen}) == n + 1
    records = read_back(cluster, "many", n + 1)
    got = {r.value: r for r in records}
    assert sorted(got) == sorted([*values, b"single"])
    for i, (value, key) in enumerate(zip(values, keys, strict=True)):
        record = got[value]
        assert record.key == key, i
        if key is not None:  # keyed: the same partition as send() picks
            assert record.partition == routes[key]
        assert record.timestamp is not None
    for key, partition in routes.items():  # one key's messages keep their order
        mine = [r for r in records if r.key == key and r.value != b"single"]
        assert all(r.partition == partition for r in mine)
        order = [int(r.value) for r in sorted(mine, key=lambda r: (r.offset, r.index))]
        assert order == sorted(order)


def test_produce_many_unbatched_and_its_mistakes(cluster: Cluster) -> None:
    with Producer("many-plain", towers=cluster.towers, batching=False, partitions=2, **FAST) as p:
        p.produce_many([b"a%d" % i for i in range(100)], [b"k%d" % (i % 5) for i in range(100)])
        p.produce_many([])  # nothing to do
        with pytest.raises(TypeError, match="value must be bytes"):
            p.produce_many([b"ok", "text"])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="key must be bytes"):
            p.produce_many([b"ok"], ["text"])  # type: ignore[list-item]
        with pytest.raises(ValueError, match="2 keys for 1 values"):
            p.produce_many([b"ok"], [b"a", b"b"])
        with pytest.raises(TypeError, match="timestamp"):
            p.produce_many([b"ok"], timestamp=1.5)  # type: ignore[arg-type]
        assert p.flush(timeout=20) == 0
        assert p.delivered == 100
    records = read_back(cluster, "many-plain", 100)
    assert sorted(r.value for r in records) == sorted(b"a%d" % i for i in range(100))
    assert all(r.index == 0 and r.key is None for r in records)  # plain RECORDs


def test_produce_many_is_admitted_whole_at_the_bounds(tmp_path: Path) -> None:
    """No store: nothing is ever ACKed. flush() returns what is still unACKed."""
    with Cluster(tmp_path, stores=0) as cluster:
        failed: list[BaseException | None] = []
        with Producer(
            "bp-many",
            towers=cluster.towers,
            max_in_flight=100,
            backpressure="error",
            on_delivery=lambda m, e: failed.append(e),
            **FAST,
        ) as p:
            p.produce_many([b"x"] * 60)
            with pytest.raises(BackpressureError):
                p.produce_many([b"y"] * 41)  # would pass the bound: nothing queued
            assert len(p) == 60
            p.produce_many([b"z"] * 40)
            assert p.flush(timeout=0.3) == 100
            with pytest.raises(BackpressureError):
                p.produce(b"one too many")
        # closed unflushed: every message is reported failed to on_delivery
        assert len(failed) == 100
        assert all(isinstance(e, DeliveryError) for e in failed)
        with Producer("bp-many", towers=cluster.towers, max_in_flight=10, **FAST) as p:
            p.produce_many([b"big"] * 25)  # more than the bound, nothing in flight: admitted
            assert p.flush(timeout=0.2) == 25


def test_a_lone_message_leaves_at_once_and_batches_form_under_load(cluster: Cluster) -> None:
    """Adaptive batching (issue 23): with ``linger_ms`` = 60 s, a message sent while its
    partition is quiet is stored long before the linger (the runner sends a batch at once
    when nothing more is queued and few RECORDs await ACKs); messages sent in a loop still
    share RECORDs; every message is read back once, in order."""
    with Producer("adapt", towers=cluster.towers, partitions=1, linger_ms=60_000, **FAST) as p:
        lone = p.send(b"lone")
        lone.result(timeout=20)  # before the fix: only after 60 s (linger) or flush()
        before = p.metrics().records_published
        futures = [p.send(b"m%d" % i) for i in range(20_000)]
        assert p.flush(timeout=60) == 0
        offsets = [f.result(timeout=0) for f in futures]
        records = p.metrics().records_published - before
    assert records < 20_000 / 4, f"{records} RECORDs for 20,000 messages: no batches formed"
    got = read_back(cluster, "adapt", 20_001, timeout=60)
    assert [r.value for r in got] == [b"lone"] + [b"m%d" % i for i in range(20_000)]
    assert [(m.offset, m.index) for m in offsets] == sorted((m.offset, m.index) for m in offsets)


def test_futures_held_by_the_application_cost_the_collector_one_object_each(
    cluster: Cluster,
) -> None:
    """``send()`` in a loop keeping every future: after delivery each future is one object
    the cycle collector walks, nothing more (issue 23: a future with its lists and its
    metadata was four, the in-flight tokens more, and the collector's full passes over
    them made ``send()`` 4x slower than with the collector off)."""
    count = 20_000
    with Producer("gc", towers=cluster.towers, partitions=2, **FAST) as p:
        p.send(b"warm").result(timeout=20)
        gc.collect()
        before = len(gc.get_objects())
        futures = [p.send(b"v%d" % i) for i in range(count)]
        assert p.flush(timeout=30) == 0
        gc.collect()
        grown = len(gc.get_objects()) - before
        assert grown < count * 1.1, f"{grown:,} more tracked objects for {count:,} futures"
        metas = [f.result(timeout=0) for f in futures]
    assert all(isinstance(m, RecordMetadata) for m in metas)
    by_partition: dict[str, list[tuple[int, int]]] = {}
    for m in metas:
        by_partition.setdefault(m.partition, []).append((m.offset, m.index))
    for positions in by_partition.values():
        assert positions == sorted(positions)


def test_produce_and_send_of_plain_values_queue_nothing_per_message_for_the_collector(
    store_processes: LocalCluster,
) -> None:
    """``produce()``/``send()`` of a plain value join their partition's column chunk: no
    object per message lives until the runner takes it, so a loop of them does not set off
    the cycle collector (issue 23: a queued tuple and its token per message ran a young
    collection every ~350 messages, ~0.3 us of the caller's ~1 us and half the runner's)."""
    count = 20_000
    earlier = set(threading.enumerate()) - {threading.current_thread()}
    with Producer("gc-plain", towers=store_processes.towers, partitions=2, **FAST) as p:
        p.send(b"warm").result(timeout=20)
        with collections_counted(earlier) as collections:
            for i in range(count):
                p.produce(b"v%d" % i)
        assert p.flush(timeout=30) == 0
        assert p.delivered == count + 1
    # the loop allocates nothing that lives: a collection or two may come from the
    # producer's turns, not per message
    assert len(collections) < count // 2_000, f"{len(collections)} collections in the loop"
    values = [r.value for r in read_back(store_processes, "gc-plain", count + 1)]
    assert sorted(values[1:], key=lambda v: int(v[1:])) == [b"v%d" % i for i in range(count)]


def test_unbatched_produce_of_plain_values_allocates_nothing_per_message_for_the_collector(
    store_processes: LocalCluster,
) -> None:
    """``produce()`` of a plain value with ``batching=False`` (one RECORD per message)
    joins its partition's column chunk too, and the runner gives its messages the shared
    token of their size: no object per message lives until the runner takes it or the
    store ACKs it (issue 23: a queued tuple and token per message in the caller, and a
    token per message in the runner until the ACK, ran a young collection every ~350
    messages on the producer -> ACKed path)."""
    count = 20_000
    earlier = set(threading.enumerate()) - {threading.current_thread()}
    with Producer(
        "gc-unbatched", towers=store_processes.towers, partitions=2, batching=False, **FAST
    ) as p:
        p.send(b"warm").result(timeout=20)
        with collections_counted(earlier) as collections:
            for i in range(count):
                p.produce(b"v%d" % i)
            assert p.flush(timeout=30) == 0
        assert p.delivered == count + 1
    assert len(collections) < count // 2_000, f"{len(collections)} collections in the loop"
    values = [r.value for r in read_back(store_processes, "gc-unbatched", count + 1)]
    assert sorted(values[1:], key=lambda v: int(v[1:])) == [b"v%d" % i for i in range(count)]


def test_plain_and_other_messages_of_one_partition_keep_their_call_order(
    cluster: Cluster,
) -> None:
    """Plain values (column chunks), messages with a key, headers or timestamp (one entry
    each), ``produce_many`` chunks and ``send()`` futures, interleaved on one partition:
    stored and delivered in call order, each future with its own offset and index."""
    rounds = 300
    with Producer("order-mix", towers=cluster.towers, partitions=1, **FAST) as p:
        expected: list[bytes] = []
        futures: list[tuple[int, Future[RecordMetadata]]] = []
        for r in range(rounds):
            step = r % 6
            value = b"m%d" % len(expected)
            if step == 0:
                p.produce(value)
                expected.append(value)
            elif step == 1:
                futures.append((len(expected), p.send(value)))
                expected.append(value)
            elif step == 2:
                p.produce(value, key=b"k")
                expected.append(value)
            elif step == 3:
                futures.append((len(expected), p.send(value, headers=[("h", b"1")])))
                expected.append(value)
            elif step == 4:
                many = [b"m%d" % (len(expected) + j) for j in range(3)]
                p.produce_many(many)
                expected += many
            else:
                for _ in range(4):
                    futures.append((len(expected), p.send(b"m%d" % len(expected))))
                    expected.append(b"m%d" % len(expected))
        assert p.flush(timeout=30) == 0
    records = read_back(cluster, "order-mix", len(expected))
    assert [r.value for r in records] == expected
    positions = [(r.offset, r.index) for r in records]
    for at, future in futures:
        meta = future.result(timeout=0)
        assert (meta.offset, meta.index) == positions[at]


def test_a_column_chunk_larger_than_a_record_is_cut_and_each_future_gets_its_place(
    cluster: Cluster,
) -> None:
    """``batch_size`` over ``max_message_bytes``: a closing batch of plain ``send()``
    values is cut into RECORDs that fit, and each message's future names its own RECORD
    and index there (the chunk's futures are cut with its values and timestamps)."""
    count = 400
    with Producer(
        "cut-chunk",
        towers=cluster.towers,
        partitions=1,
        batch_size=1 << 20,
        max_message_bytes=4096,
        linger_ms=10_000,
        **FAST,
    ) as p:
        p.send(b"warm").result(timeout=20)
        futures = [p.send(b"%04d" % i + b"x" * 96) for i in range(count)]
        assert p.flush(timeout=30) == 0
        metas = [f.result(timeout=0) for f in futures]
    records = read_back(cluster, "cut-chunk", count + 1)[1:]
    assert [r.value[:4] for r in records] == [b"%04d" % i for i in range(count)]
    assert [(m.offset, m.index) for m in metas] == [(r.offset, r.index) for r in records]
    assert len({m.offset for m in metas}) > 1, "one RECORD: nothing was cut"
    assert all(r.timestamp is not None and r.timestamp > 0 for r in records)


def test_senders_of_several_threads_blocked_at_the_bound_all_get_through(
    cluster: Cluster,
) -> None:
    """``max_in_flight=5`` and three threads sending plain values: a sender waiting for
    room waits on the producer's lock's condition (releasing it), so the runner thread -
    which takes that lock to drain the queue - goes on; every message is stored once and
    each thread's messages keep their order."""
    per_thread = 300
    errors: list[BaseException] = []
    with Producer("bp-threads", towers=cluster.towers, partitions=1, max_in_flight=5, **FAST) as p:

        def sender(name: bytes) -> None:
            try:
                for i in range(per_thread):
                    if i % 2:
                        p.produce(b"%s-%d" % (name, i))
                    else:
                        p.send(b"%s-%d" % (name, i))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=sender, args=(b"t%d" % n,)) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not any(thread.is_alive() for thread in threads), "a sender is still blocked"
        assert not errors, errors
        assert p.flush(timeout=30) == 0
    values = [r.value for r in read_back(cluster, "bp-threads", 3 * per_thread)]
    for t in range(3):
        mine = [v for v in values if v.startswith(b"t%d-" % t)]
        assert mine == [b"t%d-%d" % (t, i) for i in range(per_thread)]
