"""Exactly-once costs on a real local cluster (tower + stores in their own processes).

    .venv/bin/python bench/eos.py [--messages 100000] [--txn 1000] [--partitions 4] [--size 100]
        [--lease 1.0]

Prints the time the constructor takes to be ready (a fresh transactional id: read the
logs, claim, one ``txn_lease``, the data producer's resume), then writes ``--messages``
messages in transactions of ``--txn`` messages (commit latency p50/p99:
``commit_transaction()`` = flush, INTENT stored, ACKs stored), then reads the topic from
the start twice in the same run, one after the other: read uncommitted and read committed.
Prints messages/s of each and their ratio, by wall time and by the reading process's CPU
time (steadier on a shared machine).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from dafka import Consumer, LocalCluster, ReadCommittedConsumer, TransactionalProducer


def _read(
    common: dict[str, Any], topic: str, level: str, expect: int
) -> tuple[int, float, float, str]:
    """Messages with a value read from ``topic``: count, wall seconds, CPU seconds, notes."""
    kind = ReadCommittedConsumer if level == "read_committed" else Consumer
    with kind([topic], offset_reset="earliest", **common) as c:
        start = time.perf_counter()
        cpu = time.process_time()
        got = 0
        deadline = time.monotonic() + 300
        while got < expect and time.monotonic() < deadline:
            got += sum(1 for r in c.poll(0.2) if r.value)
        took = time.perf_counter() - start
        used = time.process_time() - cpu
        notes = f"{used:.2f} s CPU"
        if isinstance(c, ReadCommittedConsumer):
            notes += f", {c.replays} replays"
        return got, took, used, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--txn", type=int, default=1000, help="messages per transaction")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--size", type=int, default=100, help="value bytes")
    parser.add_argument("--stores", type=int, default=1)
    parser.add_argument("--lease", type=float, default=1.0, help="txn_lease seconds")
    args = parser.parse_args()
    value = os.urandom(args.size)
    with LocalCluster(stores=args.stores, beacon_interval=0.2) as cluster:
        common: dict[str, Any] = {
            "towers": cluster.towers,
            "advertised_host": "127.0.0.1",
            "bind_host": "127.0.0.1",
            "beacon_interval": 0.2,
            "beacon_timeout": 0.8,
            "ready_timeout": 30.0,
        }
        t_ready = time.perf_counter()
        producer = TransactionalProducer(
            "bench-eos",
            transactional_id="bench",
            partitions=args.partitions,
            txn_lease=args.lease,
            **common,
        )
        ready = time.perf_counter() - t_ready
        commits: list[float] = []
        start = time.perf_counter()
        sent = 0
        with producer:
            while sent < args.messages:
                producer.begin_transaction()
                for i in range(min(args.txn, args.messages - sent)):
                    producer.send(value, key=b"%d" % (sent + i))
                sent += min(args.txn, args.messages - sent)
                t0 = time.perf_counter()
                producer.commit_transaction()
                commits.append(time.perf_counter() - t0)
        wrote = time.perf_counter() - start
        n_uncommitted, t_uncommitted, cpu_u, notes_u = _read(
            common, "bench-eos", "read_uncommitted", sent
        )
        n_committed, t_committed, cpu_c, notes_c = _read(
            common, "bench-eos", "read_committed", sent
        )
    q = statistics.quantiles(commits, n=100) if len(commits) > 1 else commits * 99
    rate_u = n_uncommitted / t_uncommitted
    rate_c = n_committed / t_committed
    print(
        f"transactional produce: {sent} messages of {args.size} B in transactions of "
        f"{args.txn} over {args.partitions} partitions, {args.stores} store(s): "
        f"{sent / wrote:,.0f} msg/s"
    )
    print(f"ready (constructor, txn_lease={args.lease}s): {ready:.2f} s")
    print(
        f"commit latency ({len(commits)} commits): p50 {q[49] * 1000:.1f} ms, "
        f"p99 {q[98] * 1000:.1f} ms"
    )
    print(f"read uncommitted: {n_uncommitted} messages, {rate_u:,.0f} msg/s ({notes_u})")
    print(f"read committed:   {n_committed} messages, {rate_c:,.0f} msg/s ({notes_c})")
    print(
        f"read committed / read uncommitted: {rate_c / rate_u:.0%} (wall), "
        f"{cpu_u / cpu_c:.0%} (CPU per message)"
    )


if __name__ == "__main__":
    main()
