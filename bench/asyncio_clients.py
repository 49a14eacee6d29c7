"""The asyncio clients against the blocking ones, alternated on one cluster (same load).

A tower and two stores (``dafka store`` processes, ``bench/_procs.py``); this process runs,
``--rounds`` times, one after the other:

* ``send``: ``--messages`` 100 B messages with a future each, until all are stored -
  ``Producer.send`` then every ``result()``, against ``AsyncProducer.send_nowait`` then
  ``await flush()`` and every ``result()``;
* ``read``: a late consumer reading those messages back (batched RECORDs, two stores) -
  ``Consumer.poll`` against ``await AsyncConsumer.poll``.

It prints messages/s per round and the asyncio/blocking ratio of each round (the machine may
be shared: compare within a round), with the load average.

Run: ``.venv/bin/python bench/asyncio_clients.py [--messages 200000] [--rounds 3]``.
Target (issue 9): asyncio within 80 % of blocking.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _procs import ProcessCluster
from dafka import AsyncConsumer, AsyncProducer, Consumer, Producer

PAYLOAD = b"x" * 100
OPTIONS: dict[str, Any] = {
    "beacon_interval": 1.0,
    "beacon_timeout": 4.0,
    "bind_host": "127.0.0.1",
    "advertised_host": "127.0.0.1",
}


def blocking_send(towers: str, topic: str, n: int) -> float:
    with Producer(topic, towers=towers, **OPTIONS) as p:
        p.send(b"w").result(60)
        started = time.perf_counter()
        futures = [p.send(PAYLOAD) for _ in range(n)]
        assert p.flush(300) == 0
        assert all(f.result(0) for f in futures)
        return n / (time.perf_counter() - started)


async def async_send(towers: str, topic: str, n: int) -> float:
    async with AsyncProducer(topic, towers=towers, **OPTIONS) as p:
        await p.send(b"w")
        started = time.perf_counter()
        futures = [p.send_nowait(PAYLOAD) for _ in range(n)]
        assert await p.flush(300) == 0
        assert all(f.result() for f in futures)
        return n / (time.perf_counter() - started)


def blocking_read(towers: str, topic: str, n: int) -> float:
    started = time.perf_counter()
    got = 0
    with Consumer(topic, towers=towers, offset_reset="earliest", **OPTIONS) as c:
        while got < n:
            got += len(c.poll(1.0))
        return got / (time.perf_counter() - started)


async def async_read(towers: str, topic: str, n: int) -> float:
    started = time.perf_counter()
    got = 0
    async with AsyncConsumer(topic, towers=towers, offset_reset="earliest", **OPTIONS) as c:
        while got < n:
            got += len(await c.poll(1.0))
        return got / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n = args.messages
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{n:,} messages of 100 B per run, 2 stores, {os.cpu_count()} CPUs; load {load}")
    with ProcessCluster(stores=2, fsync="ms:5") as cluster:
        for r in range(args.rounds):
            towers = cluster.tower
            send_b = blocking_send(towers, f"b{r}", n)
            send_a = asyncio.run(async_send(towers, f"a{r}", n))
            # both topics hold n + 1 messages (the warm-up one)
            read_b = blocking_read(towers, f"b{r}", n + 1)
            read_a = asyncio.run(async_read(towers, f"a{r}", n + 1))
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            print(
                f"round {r + 1}: send+stored blocking {send_b:>9,.0f}/s asyncio {send_a:>9,.0f}/s "
                f"({send_a / send_b:.2f}x) | late read blocking {read_b:>9,.0f}/s asyncio "
                f"{read_a:>9,.0f}/s ({read_a / read_b:.2f}x) [load {load}]",
                flush=True,
            )


if __name__ == "__main__":
    main()
