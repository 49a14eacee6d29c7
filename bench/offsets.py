"""What a consumer group's committed offsets cost (tower + stores in processes).

    .venv/bin/python bench/offsets.py [--commits 200] [--stores 2] [--partitions 4]
        [--fsync ms:5] [--members 1,10]

On a fresh local cluster (``LocalCluster``, default fsync ``ms:5``):

* a group consumer's start: ``Consumer(assign=..., group_id=)`` constructed (it reads the
  group's commits before its node starts) against the same consumer without a group;
* ``commit()`` latency p50/p99: ``--commits`` synchronous commits, each of a changed offset
  of every partition (one RECORD of the committer's snapshot, returned once the stores
  hold it);
* ``commit_async()``: commits issued back to back, then the last one awaited (commits/s);
* ``committed()`` latency p50/p99 with the group's partitions of ``__dafka_offsets`` grown to
  each of ``--members`` committers (one per member instance ever started): the call asks the
  stores for the heads, waits 0.1 s of silence and reads the records that changed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from dafka import Consumer, LocalCluster, Producer


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _ms(values: list[float]) -> str:
    return (
        f"p50 {statistics.median(values) * 1000:.1f} ms, p99 {_pct(values, 0.99) * 1000:.1f} ms"
        f" (n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--stores", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--fsync", default="ms:5")
    parser.add_argument("--members", default="1,10")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as data,
        LocalCluster(data, stores=args.stores, beacon_interval=0.2, fsync=args.fsync) as cluster,
    ):
        common: dict[str, Any] = {"towers": cluster.towers, "beacon_interval": 0.2}
        with Producer("bench-in", name="src", partitions=args.partitions, **common) as p:
            p.send(b"x")
            p.flush(30)
            keys = {("bench-in", part): 0 for part in p.partitions}

        starts: dict[str, list[float]] = {"without a group": [], "with group_id": []}
        for _ in range(3):
            group: dict[str, Any] = {"group_id": "bench-start", "enable_auto_commit": False}
            for label, fields in (("without a group", {}), ("with group_id", group)):
                t0 = time.perf_counter()
                with Consumer(assign=keys, **fields, **common):
                    starts[label].append(time.perf_counter() - t0)
        for label, took in starts.items():
            print(f"consumer start, {label}: {_ms(took)}")

        with Consumer(
            assign=keys, group_id="bench", enable_auto_commit=False, **common
        ) as consumer:
            consumer.commit(dict.fromkeys(keys, 0))  # the commit producer is up
            latencies = []
            for i in range(1, args.commits + 1):
                t0 = time.perf_counter()
                consumer.commit(dict.fromkeys(keys, i))
                latencies.append(time.perf_counter() - t0)
            print(f"commit() of {len(keys)} partitions, {args.stores} stores: {_ms(latencies)}")

            t0 = time.perf_counter()
            futures = [
                consumer.commit_async(dict.fromkeys(keys, args.commits + i))
                for i in range(1, args.commits + 1)
            ]
            futures[-1].result(60)
            rate = args.commits / (time.perf_counter() - t0)
            print(f"commit_async(): {rate:,.0f} commits/s")

            members = sorted({int(m) for m in args.members.split(",")})
            started = 1
            for target in members:
                while started < target:  # more committers: each its own partition
                    with Consumer(
                        assign=keys, group_id="bench", enable_auto_commit=False, **common
                    ) as other:
                        other.commit(dict.fromkeys(keys, 0))
                    started += 1
                consumer.committed(keys)  # the new partitions read once
                reads = []
                for _ in range(20):
                    t0 = time.perf_counter()
                    consumer.committed(keys)
                    reads.append(time.perf_counter() - t0)
                print(f"committed(), {target} committer partition(s): {_ms(reads)}")


if __name__ == "__main__":
    main()
