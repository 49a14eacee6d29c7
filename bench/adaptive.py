"""The batching client's default settings: latency at a steady rate, throughput in a loop.

    .venv/bin/python bench/adaptive.py [--rate 1000] [--seconds 5] [--messages 300000]
        [--stores 2]

On a ``LocalCluster`` (tower and ``--stores`` stores in their own processes), with a default
``Producer`` (``linger_ms``, ``batch_size`` defaults):

* latency from ``produce()`` to ``poll()`` returning the message in a ``Consumer`` of this
  process, at a steady ``--rate`` messages/s (one partition; p50/p99 in microseconds), and
  RECORDs per message;
* throughput of ``produce()`` and of ``send()`` (a future each) in a loop, and of
  ``produce_many`` (10,000 values a call), producer -> stores -> a live consumer in its own
  process (``poll_columns``, subscribed before the producer starts): messages/s from the
  first call until ``flush()`` returns (every message stored) and until the consumer has
  every message (end to end), with how many RECORDs carried them and the CPU time of this
  process per message (which a busy machine does not inflate).

A lone message leaves at once when nothing of its partition is in flight; batches form
while RECORDs await their ACKs (see docs/client.md), which is what these figures show.

Each figure is printed next to the raw-pyzmq baseline of the same run
(``bench/zmq_floor.py``'s ``run_pubsub``: one PUB -> one SUB process, one message per send,
no ACK, no disk), at the same rate and size, with the ratio ours / raw.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import struct
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dafka import Consumer, LocalCluster, Producer
from zmq_floor import run_pubsub

_STAMP = struct.Struct(">q")


def live_consumer(common: dict[str, Any], topic: str, messages: int, out: Any) -> None:
    """Read ``topic`` (earliest) until ``messages`` arrived: puts "ready" once joined, then
    (messages, time.time_ns() of the last poll that brought some)."""
    with Consumer([topic], offset_reset="earliest", **common) as consumer:
        out.put(("ready",))
        count = 0
        last = 0
        deadline = time.monotonic() + 300
        while count < messages and time.monotonic() < deadline:
            got = len(consumer.poll_columns(1.0))
            if got:
                count += got
                last = time.time_ns()
    out.put((count, last))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--stores", type=int, default=2)
    args = parser.parse_args()
    padding = b"p" * max(0, args.size - _STAMP.size)
    total = int(args.rate * args.seconds)
    _, floor_latencies = run_pubsub(total, args.size, args.rate)
    floor_rate, _ = run_pubsub(args.messages, args.size)
    nf = len(floor_latencies)
    floor_p50, floor_p99 = floor_latencies[nf // 2], floor_latencies[int(nf * 0.99)]
    print(
        f"raw pyzmq PUB->SUB: latency at {args.rate:,.0f} msg/s p50 {floor_p50:.0f} us, p99 "
        f"{floor_p99:.0f} us; {floor_rate:,.0f} msg/s in a loop"
    )
    ctx = multiprocessing.get_context("spawn")
    with LocalCluster(stores=args.stores, beacon_interval=0.2) as cluster:
        common = {
            "towers": cluster.towers,
            "advertised_host": "127.0.0.1",
            "bind_host": "127.0.0.1",
            "beacon_interval": 0.2,
            "beacon_timeout": 0.8,
        }
        with (
            Consumer(["lat"], offset_reset="earliest", **common) as consumer,  # type: ignore[arg-type]
            Producer("lat", partitions=1, **common) as producer,  # type: ignore[arg-type]
        ):
            producer.send(_STAMP.pack(time.time_ns()) + padding).result(30)
            while not consumer.poll(1.0):
                pass
            latencies: list[float] = []
            interval = 1.0 / args.rate
            before = producer.metrics().records_published
            next_at = time.monotonic()
            for _ in range(total):
                producer.produce(_STAMP.pack(time.time_ns()) + padding)
                next_at += interval
                while True:
                    for record in consumer.poll(0):
                        now = time.time_ns()
                        latencies.append((now - _STAMP.unpack_from(record.value)[0]) / 1000)
                    delay = next_at - time.monotonic()
                    if delay <= 0:
                        break
                    time.sleep(min(delay, 0.0002))
            deadline = time.monotonic() + 30
            while len(latencies) < total and time.monotonic() < deadline:
                for record in consumer.poll(0.1):
                    now = time.time_ns()
                    latencies.append((now - _STAMP.unpack_from(record.value)[0]) / 1000)
            records = producer.metrics().records_published - before
        latencies.sort()
        n = len(latencies)
        p50, p99 = latencies[n // 2], latencies[int(n * 0.99)]
        print(
            f"latency produce->poll at {args.rate:,.0f} msg/s, {args.size} B, {n} samples: "
            f"p50 {p50:.0f} us, p99 {p99:.0f} us ({records / max(1, total):.2f} RECORDs per "
            f"message; raw pyzmq x{p50 / floor_p50:.1f} / x{p99 / floor_p99:.1f})"
        )
        value = os.urandom(args.size)
        for mode in ("produce", "send", "produce_many"):
            n = args.messages - args.messages % 10_000 if mode == "produce_many" else args.messages
            results: Any = ctx.Queue()
            reader = ctx.Process(target=live_consumer, args=(common, f"tp-{mode}", n, results))
            reader.start()
            if results.get(timeout=120)[0] != "ready":
                raise RuntimeError("the live consumer did not start")
            with Producer(f"tp-{mode}", partitions=4, **common) as producer:  # type: ignore[arg-type]
                started = time.time_ns()
                cpu = time.process_time()
                if mode == "produce":
                    for _ in range(n):
                        producer.produce(value)
                elif mode == "send":
                    futures = [producer.send(value) for _ in range(n)]
                else:
                    chunk = [value] * 10_000
                    for _ in range(n // 10_000):
                        producer.produce_many(chunk)
                producer.flush(120)
                stored = time.time_ns()
                cpu = time.process_time() - cpu
                if mode == "send":
                    assert all(f.done() for f in futures)
                records = producer.metrics().records_published
                count, last = results.get(timeout=300)
            reader.join(30)
            if count != n:
                print(f"  ! the live consumer got {count:,} of {n:,} messages")
            rate = n / ((stored - started) / 1e9)
            end_to_end = count / ((last - started) / 1e9)
            print(
                f"{mode:>12} in a loop, {args.stores} stores: {rate:,.0f} msg/s stored "
                f"({rate / floor_rate:.2f} x raw pyzmq), {end_to_end:,.0f} msg/s end to end "
                f"({end_to_end / floor_rate:.2f} x raw pyzmq); {records} RECORDs "
                f"({n / max(1, records):,.0f} messages per RECORD); CPU of this process "
                f"{cpu / n * 1e6:.2f} us/msg, which a busy machine does not inflate"
            )
        print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
