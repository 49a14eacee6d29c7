"""How long a client waits for the stores' heads before it is ready (tower + stores in processes).

    .venv/bin/python bench/resume.py [--runs 5] [--stores 2] [--beacon 1.0] [--lease 1.0]
        [--commits 0]

On a fresh local cluster (``LocalCluster``; its stores have run past their ``peers_settle``
before the first measurement), each figure is the time a constructor or call takes:

* a named producer restarted (``Producer(topic, name=...)``, 2 partitions, one holding
  records and one nothing): its resume;
* a transactional producer (``TransactionalProducer``, ``--lease`` its ``txn_lease``), a new
  instance of the same id each run: ready (the constructor), and ready with its first
  transaction (one message) committed. Before the fencing claim (docs/exactly-once.md,
  "Fencing") the constructor waited one ``txn_lease``; now it waits none;
  With ``--commits N`` an instance of the id first commits N transactions (one INTENT
  each in the shared log ``bench-id~.0``, which every new instance reads): the ready time
  with a long log;
* a group member's fence of that id's log (``fence_log``: the claim a take makes when the
  partition's last commit is another member's undecided transaction, docs/groups.md
  "Fencing the previous owner's log"), and a take's whole read of the commits when the
  partition's last commit is such a transaction (``GroupOffsets.committed_for_take``:
  the fence, the decision, the commits read again; its reader warm): what such a take
  costs;
* ``committed()`` of a group consumer (after a commit);
* ``offsets_for_times`` of one partition.

Before HEADS-END ("that is all", docs/protocol.md) the resumes waited a settle window of
``max(0.5, 1.5 * beacon)`` seconds after the last store greeted them and ``committed()``
0.1 s of silence; run this with ``PYTHONPATH`` pointing at an older tree for its figures.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

from dafka import Consumer, ConsumerSettings, LocalCluster, Producer, TransactionalProducer
from dafka.client._offsets import GroupOffsets, fence_log


def _timed(runs: int, call: Callable[[], object]) -> list[float]:
    out: list[float] = []
    for _ in range(runs):
        started = time.monotonic()
        call()
        out.append(time.monotonic() - started)
    return out


def _show(name: str, values: list[float]) -> None:
    print(
        f"{name:<44} p50 {statistics.median(values) * 1000:7.1f} ms   "
        f"max {max(values) * 1000:7.1f} ms   (n={len(values)})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stores", type=int, default=2)
    parser.add_argument("--beacon", type=float, default=1.0)
    parser.add_argument("--lease", type=float, default=1.0)
    parser.add_argument("--commits", type=int, default=0)
    args = parser.parse_args()
    beacon = {"beacon_interval": args.beacon, "beacon_timeout": 4 * args.beacon}
    with (
        tempfile.TemporaryDirectory() as root,
        LocalCluster(root, stores=args.stores, beacon_interval=args.beacon) as cluster,
    ):
        common = {"towers": cluster.towers, **beacon}
        with Producer("bench-resume", name="w", partitions=2, **common) as p:
            key = next(k for k in (b"%d" % i for i in range(99)) if p.partition_for(k) == "w.0")
            for _ in range(10):
                p.send(b"x", key=key)
            assert p.flush(30) == 0
        time.sleep(2 * args.beacon)  # the stores' peers_settle (a bench, not a test)

        def restart() -> None:
            with Producer("bench-resume", name="w", partitions=2, **common) as again:
                assert again.start_offsets["w.0"] > 0  # resumed after what is stored

        _show("named producer restart (resume)", _timed(args.runs, restart))

        if args.commits:
            started = time.monotonic()
            with TransactionalProducer(
                "bench-txn", "bench-id", partitions=2, txn_lease=args.lease, **common
            ) as txn:
                for n in range(args.commits):
                    txn.begin_transaction()
                    txn.send(b"x", key=b"k%d" % (n % 2))
                    txn.commit_transaction()
            took = time.monotonic() - started
            print(f"{args.commits} transactions committed first in {took:.1f} s", flush=True)
        ready: list[float] = []
        first: list[float] = []
        for _ in range(args.runs):
            started = time.monotonic()
            with TransactionalProducer(
                "bench-txn",
                "bench-id",
                partitions=2,
                txn_lease=args.lease,
                **common,
            ) as txn:
                ready.append(time.monotonic() - started)
                with txn.transaction():
                    txn.send(b"x", key=b"k")
                first.append(time.monotonic() - started)
        _show(f"transactional producer ready (txn_lease {args.lease:g} s)", ready)
        _show("  ready and its first transaction committed", first)
        settings = ConsumerSettings(**common)
        fences = _timed(args.runs, lambda: fence_log("bench-id~.0", settings, context=None))
        _show("a group taker's fence of that log", fences)
        takes: list[float] = []
        taken = ("bench-resume", "w.0")
        for run in range(args.runs):
            group = f"bench-take-{run}"
            with TransactionalProducer(
                "bench-txn", f"bench-take-{run}", partitions=1, txn_lease=args.lease, **common
            ) as zombie:
                zombie.begin_transaction()
                zombie.send(b"x")
                zombie.send_offsets_to_transaction({taken: 5}, group)  # undecided: no INTENT
                with GroupOffsets(group, settings, writer="taker") as taker:
                    taker.committed([taken])  # the reader warm, as a member's
                    started = time.monotonic()
                    taker.committed_for_take([taken])
                    takes.append(time.monotonic() - started)
                    assert taker.logs_fenced == [f"bench-take-{run}~.0"], taker.logs_fenced
        _show("  a take's commit read with that fence", takes)

        keys = {("bench-resume", "w.0"): 0}
        with Consumer(
            assign=keys,
            group_id="bench-g",
            enable_auto_commit=False,
            **common,
        ) as consumer:
            consumer.commit({("bench-resume", "w.0"): 5})
            _show("committed()", _timed(args.runs, lambda: consumer.committed(keys)))
            times = {("bench-resume", "w.0"): 0}
            found = _timed(args.runs, lambda: consumer.offsets_for_times(times))
            _show("offsets_for_times (one partition)", found)


if __name__ == "__main__":
    main()
