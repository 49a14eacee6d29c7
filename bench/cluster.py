"""End-to-end figures of a real cluster: every node in its own process, on loopback.

A ``dafka tower`` and ``dafka store`` process(es) (see ``bench/_procs.py``), a producer
process and consumer processes (``multiprocessing``, spawn). One Dafka RECORD per record.
For each fsync policy of the store (``--fsync``, default: batch, ms:5 and os) and each record
size (100 B, 1,000 B) it prints:

* producer throughput: from the first ``publish`` until every record is ACKed by a store
  (``flush``), records/s and MB/s of payload;
* live consumer throughput: a consumer subscribed before the producer starts, from the
  producer's first publish to the consumer's last record;
* late consumer throughput: a consumer started after the producer finished, reading every
  record back from the store(s), from its constructor call to its last record.

Then, with the first policy:

* latency from ``publish`` to ``poll`` returning it in the consumer process, at a steady
  ``--rate`` (the payload carries ``time.time_ns()``: both processes share the clock);
* ACK latency: one record at a time, from ``publish`` until ``flush`` returns (the store made
  it durable under its fsync policy and ACKed it);
* time from a new consumer's constructor call to its first record (``offset_reset=latest``)
  while a producer publishes steadily, over ``--trials`` consumers.

``--clients records,unbatched,batched`` runs the throughput with each producer: ``records``
is ``PartitionProducer.publish`` (one RECORD per call, the figures above), ``unbatched`` and
``batched`` the topic-level ``Producer.produce`` (no future per message) with one RECORD per
message or many per RECORD (``linger_ms``/``batch_size`` defaults); rates then count
messages, and the consumer unpacks batches. ``many`` is batched with ``produce_many`` (10,000
values per call); ``futures`` is batched with ``send`` (a future per message, all awaited at
the end) and ``async`` the same with ``AsyncProducer.send_nowait`` and an ``AsyncConsumer``
(compare those two for the asyncio clients' cost). received/delivered counts RECORDs.
``--consumers poll,columns,arrow`` runs each client with each consumer mode: ``poll``
(Records), ``columns`` (``Consumer.poll_columns``, ``sum(map(len, values))``) and ``arrow``
(``poll_columns().to_arrow()``, value bytes summed by Arrow); all touch every value. The
async client always reads with ``await poll``.

Every result line ends with the load average when the run finished (``os.getloadavg()``): the
machine may be shared, compare figures of one run.

Run: ``.venv/bin/python bench/cluster.py [--records N] [--quick] [--fsync batch,os]``.
Targets (issue 5): >= 150,000 records/s of 100 B through a store, p99 < 2 ms, first record
within 100 ms. The C reference: 275k-390k records/s (``../shared/PROTOCOL.md`` section 7).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import multiprocessing
import os
import statistics
import struct
import sys
import threading
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any, TypeAlias

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _procs import ProcessCluster, cpu_seconds, percentile
from dafka.client import AsyncConsumer, AsyncProducer, Consumer, PartitionProducer, Producer
from dafka.node import ConsumerConfig
from dafka.transport.config import TransportConfig

MB = 1_000_000
_STAMP = struct.Struct(">Q")
Results: TypeAlias = "Queue[tuple[Any, ...]]"


def transport(port: int, beacon_interval: float) -> TransportConfig:
    return TransportConfig(
        tower_sub_addresses=(f"tcp://127.0.0.1:{port}",),
        tower_pub_addresses=(f"tcp://127.0.0.1:{port + 1}",),
        advertised_host="127.0.0.1",
        bind_host="127.0.0.1",
        beacon_interval=beacon_interval,
        beacon_timeout=4 * beacon_interval,
    )


# -- the client processes ---------------------------------------------------------------------


def produce_burst(
    port: int, beacon: float, topic: str, records: int, size: int, go: Event, out: Results
) -> None:
    """Trickle warm-up records until ``go``, then publish ``records`` at full speed.

    The first warm-up record is ACKed before anything else (a store is connected); the
    trickle lets the live consumer prove it receives from this producer directly before the
    burst starts. The last record of the burst starts with ``E`` (the consumers stop there).
    """
    with PartitionProducer(topic, transport(port, beacon)) as producer:
        warm = b"w" * size
        producer.publish(warm)
        if not producer.flush(60):
            out.put(("error", "warm-up record not ACKed within 60 s"))
            return
        out.put(("producer-ready", os.getpid()))
        while not go.wait(0.002):
            producer.publish(warm)
        payload = b"x" * size
        publish = producer.publish
        started = time.time_ns()
        cpu = time.process_time()
        for _ in range(records - 1):
            publish(payload)
        publish(b"E" * size)
        ok = producer.flush(300)
        finished = time.time_ns()
        cpu = time.process_time() - cpu
        resent = producer.statistics().records_resent
        out.put(
            ("produced", started, finished, producer.acked, producer.next_sequence, ok, cpu, resent)
        )


def produce_messages(
    port: int,
    beacon: float,
    topic: str,
    records: int,
    size: int,
    go: Event,
    out: Results,
    client: str = "batched",
) -> None:
    """``produce_burst`` with the topic-level ``Producer`` (one partition): ``produce()``
    (no future per message) in batches or one RECORD per message (``unbatched``),
    ``produce_many`` (``many``) or ``send`` with a future per message (``futures``)."""
    if client == "async":
        asyncio.run(produce_async(port, beacon, topic, records, size, go, out))
        return
    towers = f"127.0.0.1:{port}"
    with Producer(
        topic,
        towers=towers,
        batching=client != "unbatched",
        beacon_interval=beacon,
        beacon_timeout=4 * beacon,
        bind_host="127.0.0.1",
        advertised_host="127.0.0.1",
    ) as producer:
        warm = b"w" * size
        if producer.send(warm).exception(60) is not None:
            out.put(("error", "warm-up message not stored within 60 s"))
            return
        out.put(("producer-ready", os.getpid()))
        while not go.wait(0.002):
            producer.produce(warm)
        payload = b"x" * size
        produce = producer.produce
        started = time.time_ns()
        cpu = time.process_time()
        if client == "many":
            chunk = [payload] * 10_000
            for _ in range((records - 1) // len(chunk)):
                producer.produce_many(chunk)
            producer.produce_many([payload] * ((records - 1) % len(chunk)))
        elif client == "futures":
            send = producer.send
            futures = [send(payload) for _ in range(records - 1)]
        else:
            for _ in range(records - 1):
                produce(payload)
        produce(b"E" * size)
        left = producer.flush(300)
        if client == "futures":
            assert all(f.result(0) for f in futures)
        finished = time.time_ns()
        cpu = time.process_time() - cpu
        resent = sum(m.statistics().records_resent for m in producer._machine.machines)
        delivered = producer.delivered
    out.put(("produced", started, finished, delivered, delivered + left, left == 0, cpu, resent))


async def produce_async(
    port: int, beacon: float, topic: str, records: int, size: int, go: Event, out: Results
) -> None:
    """``futures`` with an ``AsyncProducer``: ``send_nowait`` per message, ``flush``, then
    every future's result (as ``futures`` does)."""
    async with AsyncProducer(
        topic,
        towers=f"127.0.0.1:{port}",
        beacon_interval=beacon,
        beacon_timeout=4 * beacon,
        bind_host="127.0.0.1",
        advertised_host="127.0.0.1",
    ) as producer:
        warm = b"w" * size
        await producer.send(warm)
        out.put(("producer-ready", os.getpid()))
        while not go.is_set():
            producer.send_nowait(warm)
            await asyncio.sleep(0.002)
        payload = b"x" * size
        send = producer.send_nowait
        started = time.time_ns()
        cpu = time.process_time()
        futures = [send(payload) for _ in range(records - 1)]
        futures.append(send(b"E" * size))
        left = await producer.flush(300)
        assert all(f.result() for f in futures)
        finished = time.time_ns()
        cpu = time.process_time() - cpu
        inner = producer.producer
        resent = sum(m.statistics().records_resent for m in inner._machine.machines)
        delivered = inner.delivered
    out.put(("produced", started, finished, delivered, delivered + left, left == 0, cpu, resent))


def _peers_connected(consumer: Consumer) -> int:
    # transport_statistics() is new; the fallback lets this bench measure older checkouts.
    stats = getattr(consumer, "transport_statistics", None)
    runner_stats = stats() if stats else consumer._runner.statistics()
    return int(runner_stats.peers_connected)


class _Polled:
    """What one poll returned, however the consumer mode takes it: every value touched."""

    def __init__(self, consumer: Consumer, mode: str) -> None:
        self.count = 0
        self.last_value = b""
        self.value_bytes = 0
        if mode == "poll":
            records = consumer.poll(timeout=1.0)
            self.count = len(records)
            if records:
                self.value_bytes = sum(len(r.value) for r in records)
                self.last_value = records[-1].value
        elif mode == "columns":
            columns = consumer.poll_columns(timeout=1.0)
            self.count = len(columns)
            if columns:
                values = columns.values
                self.value_bytes = sum(map(len, values))
                self.last_value = values[-1]
        elif mode == "arrow":
            columns = consumer.poll_columns(timeout=1.0)
            self.count = len(columns)
            if columns:
                import pyarrow.compute as pc

                value = columns.to_arrow()["value"]
                self.value_bytes = pc.sum(pc.binary_length(value)).as_py()
                self.last_value = value[-1].as_py()
        else:
            raise SystemExit(f"unknown consumer mode {mode!r}: poll, columns or arrow")


def consume_count(
    port: int,
    beacon: float,
    topic: str,
    peers: int,
    out: Results,
    use_async: bool = False,
    mode: str = "poll",
) -> None:
    """Read (earliest) up to the record starting with ``E``; says "consumer-ready" once it
    is connected to ``peers`` peers, has caught up and received 50 more records (0: at once).
    ``use_async``: with an ``AsyncConsumer`` (``await poll``). ``mode``: ``poll`` (Records),
    ``columns`` (``poll_columns``, ``sum(map(len, values))``) or ``arrow`` (``poll_columns``
    then ``to_arrow``, the value bytes summed by Arrow): each touches every value.
    """
    if use_async:
        asyncio.run(consume_count_async(port, beacon, topic, peers, out))
        return
    started = time.time_ns()
    config = ConsumerConfig(offset_reset="earliest")
    count = 0
    first = last = 0
    ready_at: int | None = None
    cpu = time.process_time()
    with Consumer(topic, transport=transport(port, beacon), config=config) as consumer:
        if peers == 0:
            out.put(("consumer-ready", os.getpid()))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            took = _Polled(consumer, mode)
            if not took.count:
                continue
            now = time.time_ns()
            if not first:
                first = now
            count += took.count
            last = now
            # Connected and caught up (no FETCH in flight): what follows comes live.
            if (
                ready_at is None
                and peers
                and _peers_connected(consumer) >= peers
                and consumer.statistics().fetches_in_flight == 0
            ):
                ready_at = count + 50
            if ready_at is not None and count - took.count < ready_at <= count:
                out.put(("consumer-ready", os.getpid()))
                cpu = time.process_time()
            if took.last_value[:1] == b"E":
                break
        cpu = time.process_time() - cpu
        stats = consumer.statistics()
        received = consumer.transport_statistics().received
        polled = consumer.poll_statistics().records_polled
    out.put(
        (
            "consumed",
            started,
            first,
            last,
            count,
            cpu,
            stats.fetches_sent,
            stats.arrived_ahead,
            received / max(polled, 1),
        )
    )


async def consume_count_async(
    port: int, beacon: float, topic: str, peers: int, out: Results
) -> None:
    """``consume_count`` with an ``AsyncConsumer``."""
    started = time.time_ns()
    config = ConsumerConfig(offset_reset="earliest")
    count = 0
    first = last = 0
    ready_at: int | None = None
    cpu = time.process_time()
    async with AsyncConsumer(topic, transport=transport(port, beacon), config=config) as c:
        consumer = c.consumer
        if peers == 0:
            out.put(("consumer-ready", os.getpid()))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            batch = await c.poll(timeout=1.0)
            if not batch:
                continue
            now = time.time_ns()
            if not first:
                first = now
            count += len(batch)
            last = now
            if (
                ready_at is None
                and peers
                and _peers_connected(consumer) >= peers
                and consumer.statistics().fetches_in_flight == 0
            ):
                ready_at = count + 50
            if ready_at is not None and count - len(batch) < ready_at <= count:
                out.put(("consumer-ready", os.getpid()))
                cpu = time.process_time()
            if batch[-1].value[:1] == b"E":
                break
        cpu = time.process_time() - cpu
        stats = consumer.statistics()
        received = consumer.transport_statistics().received
        polled = consumer.poll_statistics().records_polled
    out.put(
        (
            "consumed",
            started,
            first,
            last,
            count,
            cpu,
            stats.fetches_sent,
            stats.arrived_ahead,
            received / max(polled, 1),
        )
    )


def produce_steady(
    port: int, beacon: float, topic: str, rate: float, size: int, stop: Event, out: Results
) -> None:
    """Publish ``rate`` records/s, each starting with ``time.time_ns()``, until ``stop``."""
    padding = b"p" * max(0, size - _STAMP.size)
    with PartitionProducer(topic, transport(port, beacon)) as producer:
        out.put(("producer-ready", os.getpid()))
        interval = 1.0 / rate
        next_at = time.monotonic()
        sent = 0
        while not stop.is_set():
            producer.publish(_STAMP.pack(time.time_ns()) + padding)
            sent += 1
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -1.0:
                next_at = time.monotonic()  # fell far behind: do not burst
        out.put(("steady-sent", sent))


def consume_latency(
    port: int, beacon: float, topic: str, warmup: int, samples: int, out: Results
) -> None:
    """Latency of ``samples`` records after skipping ``warmup`` (latest)."""
    latencies: list[float] = []
    seen = 0
    config = ConsumerConfig(offset_reset="latest")
    with Consumer(topic, transport=transport(port, beacon), config=config) as consumer:
        deadline = time.monotonic() + 120
        while len(latencies) < samples and time.monotonic() < deadline:
            for record in consumer.poll(timeout=1.0):
                now = time.time_ns()
                seen += 1
                if seen > warmup:
                    latencies.append((now - _STAMP.unpack_from(record.value)[0]) / 1000)
        stats = consumer.statistics()
    latencies.sort()
    out.put(
        (
            "latency",
            len(latencies),
            percentile(latencies, 0.5),
            percentile(latencies, 0.99),
            percentile(latencies, 0.999),
            latencies[-1] if latencies else float("nan"),
            stats.fetches_sent,
            stats.arrived_ahead,
        )
    )


def latency_in_one_process(
    port: int, beacon: float, topic: str, rate: float, seconds: float, size: int, out: Results
) -> None:
    """``produce_steady`` in a thread and ``consume_latency`` in the main thread of one
    process (the C reference's ``c_latency`` topology: its producer and consumer are actors
    of one process); puts what ``consume_latency`` puts."""
    samples = int(rate * seconds)
    warmup = int(rate * 0.5)
    latencies: list[float] = []
    seen = 0
    stop = threading.Event()
    padding = b"p" * max(0, size - _STAMP.size)
    config = ConsumerConfig(offset_reset="latest")
    with Consumer(topic, transport=transport(port, beacon), config=config) as consumer:

        def publish() -> None:
            with PartitionProducer(topic, transport(port, beacon)) as producer:
                interval = 1.0 / rate
                next_at = time.monotonic()
                while not stop.is_set():
                    producer.publish(_STAMP.pack(time.time_ns()) + padding)
                    next_at += interval
                    delay = next_at - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    elif delay < -1.0:
                        next_at = time.monotonic()  # fell far behind: do not burst

        producer = threading.Thread(target=publish, name="steady-producer")
        producer.start()
        try:
            deadline = time.monotonic() + 120
            while len(latencies) < samples and time.monotonic() < deadline:
                for record in consumer.poll(timeout=1.0):
                    now = time.time_ns()
                    seen += 1
                    if seen > warmup:
                        latencies.append((now - _STAMP.unpack_from(record.value)[0]) / 1000)
        finally:
            stop.set()
            producer.join()
        stats = consumer.statistics()
    latencies.sort()
    out.put(
        (
            "latency",
            len(latencies),
            percentile(latencies, 0.5),
            percentile(latencies, 0.99),
            percentile(latencies, 0.999),
            latencies[-1] if latencies else float("nan"),
            stats.fetches_sent,
            stats.arrived_ahead,
        )
    )


def consume_first(port: int, beacon: float, topic: str, trials: int, out: Results) -> None:
    """``trials`` new consumers, one after the other: constructor call -> first record."""
    times: list[float] = []
    config = ConsumerConfig(offset_reset="latest")
    for _ in range(trials):
        started = time.monotonic()
        with Consumer(topic, transport=transport(port, beacon), config=config) as consumer:
            while not consumer.poll(timeout=5.0):
                if time.monotonic() - started > 30:
                    break
            times.append((time.monotonic() - started) * 1000)
    out.put(("first", times))


# -- the scenarios ----------------------------------------------------------------------------


def _expect(out: Results, kind: str, timeout: float = 120) -> tuple[Any, ...]:
    message: tuple[Any, ...] = out.get(timeout=timeout)
    if message[0] == "error":
        raise RuntimeError(message[1])
    if message[0] != kind:
        raise RuntimeError(f"expected {kind}, got {message}")
    return message


def throughput(
    ctx: Any,
    cluster: ProcessCluster,
    records: int,
    size: int,
    topic: str,
    live: bool,
    client: str = "records",
    mode: str = "poll",
) -> dict[str, float]:
    """A producer burst, with a live consumer (``live``) or followed by a late consumer.

    CPU figures are per record: the producer process, the store process(es) while the
    producer ran, and the consumer process from its start (late) or readiness (live).
    """
    port, beacon = cluster.port, cluster.beacon_interval
    out: Results = ctx.Queue()
    go = ctx.Event()
    if client == "records":
        producer = ctx.Process(
            target=produce_burst, args=(port, beacon, topic, records, size, go, out)
        )
    else:
        producer = ctx.Process(
            target=produce_messages,
            args=(port, beacon, topic, records, size, go, out, client),
        )
    producer.start()
    _expect(out, "producer-ready")
    consumer = None
    if live:
        peers = 1 + 2 * cluster.stores  # the producer, each store's writer and reader
        consumer = ctx.Process(
            target=consume_count,
            args=(port, beacon, topic, peers, out, client == "async", mode),
        )
        consumer.start()
        _expect(out, "consumer-ready")
    store_pids = [pid for name, pid in cluster.pids.items() if name.startswith("store")]
    store_cpu = sum(cpu_seconds(pid) for pid in store_pids)
    go.set()
    got: dict[str, tuple[Any, ...]] = {}
    for _ in range(2 if live else 1):
        message = out.get(timeout=600)
        got[message[0]] = message
    store_cpu = sum(cpu_seconds(pid) for pid in store_pids) - store_cpu
    producer.join()
    _, started, finished, acked, total, ok, producer_cpu, resent = got["produced"]
    if not ok or acked != total:
        print(f"  ! only {acked}/{total} records ACKed")
    result = {
        "produce": records / ((finished - started) / 1e9),
        "producer_us": producer_cpu / records * 1e6,
        "store_us": store_cpu / records * 1e6,
        "resent": resent,
    }
    if consumer is None:
        consumer = ctx.Process(
            target=consume_count, args=(port, beacon, topic, 0, out, client == "async", mode)
        )
        consumer.start()
        _expect(out, "consumer-ready")
        got["consumed"] = _expect(out, "consumed", 600)
    consumer.join()
    _, consumer_started, first, last, count, consumer_cpu, fetches, ahead, ratio = got["consumed"]
    if count != total:
        print(f"  ! the consumer got {count} of {total} records")
    result["consumer_us"] = consumer_cpu / count * 1e6
    result["fetches"] = fetches
    result["arrived_ahead"] = ahead
    result["received_ratio"] = ratio
    if live:
        result["consume"] = records / ((last - started) / 1e9)
    else:
        result["consume"] = count / ((last - consumer_started) / 1e9)
        result["first_ms"] = (first - consumer_started) / 1e6
    return result


def latency(
    ctx: Any, cluster: ProcessCluster, rate: float, seconds: float, size: int
) -> tuple[Any, ...]:
    port, beacon = cluster.port, cluster.beacon_interval
    out: Results = ctx.Queue()
    stop = ctx.Event()
    samples = int(rate * seconds)
    warmup = int(rate * 0.5)
    consumer = ctx.Process(
        target=consume_latency, args=(port, beacon, "latency", warmup, samples, out)
    )
    consumer.start()
    producer = ctx.Process(
        target=produce_steady, args=(port, beacon, "latency", rate, size, stop, out)
    )
    producer.start()
    _expect(out, "producer-ready")
    result = _expect(out, "latency", 300)
    stop.set()
    _expect(out, "steady-sent")
    producer.join()
    consumer.join()
    return result


def latency_one_process(
    ctx: Any, cluster: ProcessCluster, rate: float, seconds: float, size: int
) -> tuple[Any, ...]:
    """:func:`latency` with the producer and the consumer in one process (as the C
    reference's ``c_latency``): each hop of the other is a wake-up of another process,
    which a busy machine's scheduler delays far more often (p99 2-50x at load 35)."""
    out: Results = ctx.Queue()
    proc = ctx.Process(
        target=latency_in_one_process,
        args=(cluster.port, cluster.beacon_interval, "latency", rate, seconds, size, out),
    )
    proc.start()
    result = _expect(out, "latency", 300)
    proc.join()
    return result


def produce_acked(port: int, beacon: float, samples: int, rate: float, out: Results) -> None:
    """Publish one record at a time and wait for its ACK (``flush``): the durability latency."""
    waits: list[float] = []
    with PartitionProducer("acked", transport(port, beacon)) as producer:
        producer.publish(b"w")
        producer.flush(60)
        interval = 1.0 / rate
        for _ in range(samples):
            started = time.monotonic()
            producer.publish(b"a" * 100)
            producer.flush(10)
            waits.append((time.monotonic() - started) * 1e6)
            delay = started + interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    waits.sort()
    out.put(("acked", percentile(waits, 0.5), percentile(waits, 0.99), waits[-1]))


def ack_latency(ctx: Any, cluster: ProcessCluster, samples: int, rate: float) -> tuple[Any, ...]:
    out: Results = ctx.Queue()
    producer = ctx.Process(
        target=produce_acked, args=(cluster.port, cluster.beacon_interval, samples, rate, out)
    )
    producer.start()
    result = _expect(out, "acked", 300)
    producer.join()
    return result


def first_record(ctx: Any, cluster: ProcessCluster, rate: float, trials: int) -> list[float]:
    port, beacon = cluster.port, cluster.beacon_interval
    out: Results = ctx.Queue()
    stop = ctx.Event()
    producer = ctx.Process(
        target=produce_steady, args=(port, beacon, "steady", rate, 100, stop, out)
    )
    producer.start()
    _expect(out, "producer-ready")
    consumer = ctx.Process(target=consume_first, args=(port, beacon, "steady", trials, out))
    consumer.start()
    times: list[float] = list(_expect(out, "first", 300)[1])
    stop.set()
    _expect(out, "steady-sent")
    producer.join()
    consumer.join()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true", help="fewer records, one policy")
    parser.add_argument(
        "--fsync", default="batch,ms:5,os", help="store fsync policies, comma-separated"
    )
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--stores", type=int, default=1)
    parser.add_argument("--beacon-interval", type=float, default=1.0)
    parser.add_argument("--rate", type=float, default=2000, help="records/s for the latency run")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the latency run")
    parser.add_argument("--trials", type=int, default=5, help="consumers timed to first record")
    parser.add_argument("--skip", default="", help="comma-separated: throughput,latency,ack,first")
    parser.add_argument(
        "--clients",
        default="records",
        help="comma-separated producers to run the throughput with: records (PartitionProducer,"
        " one RECORD per publish), unbatched and batched (Producer.produce, one RECORD per "
        "message or many), many (produce_many), futures (send), async (AsyncProducer and "
        "AsyncConsumer)",
    )
    parser.add_argument(
        "--consumers",
        default="poll",
        help="comma-separated consumer modes, each run with every client: poll (Records), "
        "columns (poll_columns, sum(map(len, values))), arrow (poll_columns().to_arrow(), "
        "value bytes summed by Arrow)",
    )
    args = parser.parse_args()
    policies = args.fsync.split(",")
    records = args.records
    if args.quick:
        records = min(records, 50_000)
        policies = policies[:1]
        args.seconds = min(args.seconds, 2.0)
        args.trials = min(args.trials, 3)
    skip = set(filter(None, args.skip.split(",")))
    sizes = [int(s) for s in args.sizes.split(",")]
    ctx = multiprocessing.get_context("spawn")
    print(
        f"cluster: tower + {args.stores} store process(es), producer and consumer processes; "
        f"beacon interval {args.beacon_interval:g} s; {os.cpu_count()} CPUs; load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} (1, 5, 15 min)"
    )
    if "throughput" not in skip:
        print(f"\nthroughput, {records:,} records per run (payload MB/s):")
        for policy in policies:
            for size in sizes:
                runs = itertools.product(
                    args.clients.split(","), args.consumers.split(","), (False, True)
                )
                for client, mode, live in runs:
                    with ProcessCluster(
                        stores=args.stores, fsync=policy, beacon_interval=args.beacon_interval
                    ) as cluster:
                        r = throughput(ctx, cluster, records, size, f"t{size}", live, client, mode)
                    line = (
                        f"  {client:<9} {mode:<7} fsync {policy:<6} {size:>5} B, "
                        + ("with a live consumer: " if live else "producer alone:      ")
                        + f"producer->ACKed {r['produce']:>9,.0f} rec/s "
                        f"{r['produce'] * size / MB:6.1f} MB/s | "
                        + ("live" if live else "late")
                        + f" consumer {r['consume']:>9,.0f} rec/s "
                        f"{r['consume'] * size / MB:6.1f} MB/s"
                        + (
                            ""
                            if live
                            else f" (first after {r['first_ms']:.0f} ms, received/delivered "
                            f"{r['received_ratio']:.2f})"
                        )
                        + f" [load {', '.join(f'{x:.1f}' for x in os.getloadavg())}]"
                        + f"\n{'':<26}CPU per record: producer {r['producer_us']:.1f} us, "
                        f"store {r['store_us']:.1f} us, consumer {r['consumer_us']:.1f} us; the "
                        f"consumer sent {r['fetches']:.0f} FETCHes, "
                        f"{r['arrived_ahead']:.0f} records arrived ahead of its position; the "
                        f"producer re-sent {r['resent']:.0f} (FETCH answers: warm-up records "
                        "published before a peer connected, or losses)"
                    )
                    print(line, flush=True)
    if skip >= {"latency", "ack", "first"}:
        return
    with ProcessCluster(
        stores=args.stores, fsync=policies[0], beacon_interval=args.beacon_interval
    ) as cluster:
        if "latency" not in skip:
            for size in sizes:
                _, n, p50, p99, p999, worst, fetches, ahead = latency(
                    ctx, cluster, args.rate, args.seconds, size
                )
                print(
                    f"\nlatency publish->poll at {args.rate:,.0f} rec/s, {size} B, {n} samples: "
                    f"p50 {p50:.0f} us, p99 {p99:.0f} us, p99.9 {p999:.0f} us, max {worst:.0f} us "
                    f"(consumer: {fetches} FETCHes, {ahead} arrived ahead)",
                    flush=True,
                )
        if "ack" not in skip:
            _, p50, p99, worst = ack_latency(ctx, cluster, 1000 if not args.quick else 300, 500)
            print(
                f"\nACK latency publish->flush() returns, one record at a time (500/s), fsync "
                f"{policies[0]}: p50 {p50:.0f} us, p99 {p99:.0f} us, max {worst:.0f} us",
                flush=True,
            )
        if "first" not in skip:
            times = first_record(ctx, cluster, 1000, args.trials)
            print(
                f"\nnew consumer -> first record (producer at 1,000 rec/s): median "
                f"{statistics.median(times):.0f} ms, max {max(times):.0f} ms "
                f"({', '.join(f'{t:.0f}' for t in times)})",
                flush=True,
            )


if __name__ == "__main__":
    main()
