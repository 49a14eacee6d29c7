"""Exactly-once costs against the plain paths of the same run (tower + stores in processes).

    .venv/bin/python bench/eos.py [--messages 100000] [--txn 100,1000,10000] [--stores 1,2]
        [--partitions 4] [--size 100] [--lease 1.0] [--call produce_many|send] [--rounds 3]
        [--reads 5] [--modes commit,nowait]

For each store count (a fresh local cluster each, default fsync ``ms:5``) and transaction
size, ``--rounds`` rounds, each alternating the plain path with the transactional one -
``baseline, commit, baseline, nowait`` - so that the shared machine's load falls on both
alike (one baseline per store count moved 9x between two of them once):

* ``baseline``: the batched producer (``produce_many`` in calls of ``--txn`` messages,
  flushed at the end), the plain rate the transactional run after it is a ratio of;
* ``commit`` (``commit_transaction()`` after each transaction) and ``nowait`` (pipelined,
  ``commit_transaction_nowait()``, group commits): a fresh transactional id, its ready time
  (constructor) and its first commit, then ``--messages`` messages with ``produce_many``
  in transactions of that size: msg/s, the ratio to the baseline just before it, commit
  latency p50/p99 (flush the data, INTENT stored; the ACKs are stored in the background;
  for ``nowait`` from the request to the decision).

Each round prints its line; then the medians over the rounds: msg/s of each, the median of
the rounds' ratios (issue 25's aims: transactions of 1,000 >= 0.5x, of 100 >= 0.2x), and the
CPU per message of the producer's process and of the cluster's processes (tower and stores,
from /proc) beside the batched producer's: on the shared machine single rounds scatter (one
baseline ran at 90k, another at 1.13M msg/s), the CPU per message much less. For the
pipelined ratio, rounds long enough to measure: ``--modes nowait --messages 1000000 --rounds
5 --reads 0`` (docs/exactly-once.md, "Pipelined commits with 2 stores").

Then the topic of the largest transaction size (both runs of the first round) is read from
the start by a fresh consumer each time, ``--reads`` rounds of four reads alternated - read
uncommitted and read committed, with ``poll`` and with ``poll_columns``, each kind first in
every other round: the median messages/s of each, the ratio of the medians committed /
uncommitted (wall time), the load average, the consumer's CPU per message (this process's
CPU time during the read: steadier than wall time on a loaded machine), and how many spans
the read-committed consumer replayed from the stores because they left its ring.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from concurrent.futures import Future
from functools import partial
from typing import Any

from dafka import Consumer, LocalCluster, Producer, ReadCommittedConsumer, TransactionalProducer


def _read(
    common: dict[str, Any], topic: str, committed: bool, columns: bool, expect: int
) -> tuple[float, float, int]:
    """Messages/s reading ``expect`` messages with a value from ``topic`` (wall time), the
    CPU seconds this process spent meanwhile (the consumer's threads: the cluster runs in
    processes of its own), and the spans a read-committed consumer replayed from the stores
    (they left its ring)."""
    kind = ReadCommittedConsumer if committed else Consumer
    with kind([topic], offset_reset="earliest", **common) as c:
        got = 0
        deadline = time.monotonic() + 300
        cpu = time.process_time()
        start = time.perf_counter()
        while got < expect and time.monotonic() < deadline:
            if columns:
                batch = c.poll_columns(0.2)
                got += sum(1 for v in batch.values if v)
            else:
                got += sum(1 for r in c.poll(0.2) if r.value)
        took = time.perf_counter() - start
        cpu = time.process_time() - cpu
        if got < expect:
            raise SystemExit(f"read {got} of {expect} messages of {topic} within 300 s")
        return got / took, cpu, c.replays if isinstance(c, ReadCommittedConsumer) else 0


class _Cpu:
    """CPU seconds spent meanwhile by this process (the producer's threads) and by the
    cluster's processes (tower and stores, read from /proc): on a shared machine the CPU per
    message is steadier than the wall-clock rate."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._pids = [m.pid for m in cluster.members if m.pid is not None]
        self._start = self._now()

    def _now(self) -> tuple[float, float]:
        ticks = os.sysconf("SC_CLK_TCK")
        cluster = 0.0
        for pid in self._pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            cluster += (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
        return time.process_time(), cluster

    def per_message(self, messages: int) -> tuple[float, float]:
        """(producer, cluster) microseconds of CPU per message since construction."""
        now = self._now()
        return tuple((b - a) / messages * 1e6 for a, b in zip(self._start, now, strict=True))  # type: ignore[return-value]


def _plain(
    common: dict[str, Any],
    args: argparse.Namespace,
    chunk: int,
    value: bytes,
    cluster: LocalCluster,
) -> tuple[float, tuple[float, float]]:
    """The batched producer's msg/s: ``produce_many`` of ``chunk`` keyed messages per call,
    and its CPU per message (producer, cluster)."""
    keys = [b"%d" % i for i in range(chunk)]
    with Producer("bench-plain", partitions=args.partitions, **common) as p:
        cpu = _Cpu(cluster)
        start = time.perf_counter()
        sent = 0
        while sent < args.messages:
            n = min(chunk, args.messages - sent)
            p.produce_many([value] * n, keys[:n])
            sent += n
        left = p.flush(120)
        took = time.perf_counter() - start
        if left:
            raise SystemExit(f"{left} plain messages not stored")
        return sent / took, cpu.per_message(sent)


def _topic(txn: int, round_: int) -> str:
    """The topic the transactional runs of ``txn`` write in round ``round_``."""
    return f"bench-eos-{txn}-{round_}"


def _transactional(
    common: dict[str, Any],
    args: argparse.Namespace,
    txn: int,
    value: bytes,
    nowait: bool,
    round_: int,
    cluster: LocalCluster,
) -> tuple[float, float, float, list[float], tuple[float, float]]:
    """(ready s, first commit s, msg/s, commit latencies) of one fresh transactional id;
    ``nowait``: pipelined commits (``commit_transaction_nowait``, all awaited at the end;
    the latencies are then request to decision), and the CPU per message (producer,
    cluster)."""
    keys = [b"%d" % i for i in range(txn)]
    t0 = time.perf_counter()
    producer = TransactionalProducer(
        _topic(txn, round_),
        transactional_id=f"bench-{txn}-{'nowait' if nowait else 'sync'}-{round_}",
        partitions=args.partitions,
        txn_lease=args.lease,
        **common,
    )
    ready = time.perf_counter() - t0
    commits: list[float] = []
    with producer:
        with producer.transaction():
            producer.send(value, key=b"first")
        first = time.perf_counter() - t0
        cpu = _Cpu(cluster)
        start = time.perf_counter()
        sent = 0
        while sent < args.messages:
            n = min(txn, args.messages - sent)
            producer.begin_transaction()
            if args.call == "send":
                for key in keys[:n]:
                    producer.send(value, key=key)
            else:
                producer.produce_many([value] * n, keys[:n])
            sent += n
            c0 = time.perf_counter()
            if nowait:
                future = producer.commit_transaction_nowait()
                future.add_done_callback(partial(_decided, commits, c0))
            else:
                producer.commit_transaction()
                commits.append(time.perf_counter() - c0)
        producer.flush()  # every pipelined commit decided
        took = time.perf_counter() - start
        used = cpu.per_message(sent)
    return ready, first, sent / took, commits, used


def _decided(commits: list[float], requested: float, _future: Future[None]) -> None:
    commits.append(time.perf_counter() - requested)


def _ms(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] * 1000
    return statistics.quantiles(values, n=100)[q - 1] * 1000


def _produce_rounds(
    common: dict[str, Any], args: argparse.Namespace, txn: int, value: bytes, cluster: LocalCluster
) -> None:
    """``--rounds`` rounds of baseline, commit, baseline, nowait (``--modes``) for
    transactions of ``txn``: each round's line, then the medians (rates, the rounds' ratios,
    CPU per message of the producer's process and of the cluster's)."""
    modes = args.modes.split(",")
    rates: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    cpus: dict[str, list[tuple[float, float]]] = {}
    latencies: dict[str, list[float]] = {}
    for round_ in range(args.rounds):
        for how in modes:
            plain, plain_cpu = _plain(common, args, txn, value, cluster)
            ready, first, rate, commits, cpu = _transactional(
                common, args, txn, value, how == "nowait", round_, cluster
            )
            rates.setdefault("baseline", []).append(plain)
            cpus.setdefault("baseline", []).append(plain_cpu)
            rates.setdefault(how, []).append(rate)
            cpus.setdefault(how, []).append(cpu)
            ratios.setdefault(how, []).append(rate / plain)
            latencies.setdefault(how, []).extend(commits)
            print(
                f"txn {txn:>6} round {round_ + 1} {how}: {rate:>10,.0f} msg/s = "
                f"{rate / plain:.2f}x batched ({plain:,.0f} msg/s just before); CPU us/msg "
                f"producer+cluster {cpu[0]:.2f}+{cpu[1]:.2f} (batched {plain_cpu[0]:.2f}+"
                f"{plain_cpu[1]:.2f}); commit p50 {_ms(commits, 50):.1f} ms, p99 "
                f"{_ms(commits, 99):.1f} ms ({len(commits)} commits); ready {ready:.2f} s, "
                f"first commit done {first:.2f} s [load {os.getloadavg()[0]:.1f}]",
                flush=True,
            )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    median = statistics.median

    def cpu_of(how: str) -> tuple[float, float]:
        return median(c[0] for c in cpus[how]), median(c[1] for c in cpus[how])

    base_cpu = cpu_of("baseline")
    for how in modes:
        cpu = cpu_of(how)
        print(
            f"txn {txn:>6} {how}, medians of {args.rounds} rounds: {median(rates[how]):,.0f} "
            f"msg/s, batched {median(rates['baseline']):,.0f} msg/s, ratio "
            f"{median(ratios[how]):.2f}x (rounds: "
            f"{', '.join(f'{r:.2f}' for r in sorted(ratios[how]))}); CPU us/msg producer+cluster "
            f"{cpu[0]:.2f}+{cpu[1]:.2f} against batched {base_cpu[0]:.2f}+{base_cpu[1]:.2f} "
            f"({sum(base_cpu) / sum(cpu):.2f}x); commit p50 {_ms(latencies[how], 50):.1f} ms, "
            f"p99 {_ms(latencies[how], 99):.1f} ms (all rounds) [load {load}]",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--txn", default="100,1000,10000", help="messages per transaction")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--size", type=int, default=100, help="value bytes")
    parser.add_argument("--stores", default="1,2", help="store counts, one cluster each")
    parser.add_argument("--lease", type=float, default=1.0, help="txn_lease seconds")
    parser.add_argument(
        "--call", choices=("produce_many", "send"), default="produce_many", help="in a txn"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="alternated produce rounds (medians printed)"
    )
    parser.add_argument(
        "--reads", type=int, default=5, help="alternated read rounds (medians printed; 0: none)"
    )
    parser.add_argument(
        "--modes", default="commit,nowait", help="transactional runs per round: commit,nowait"
    )
    args = parser.parse_args()
    if args.reads < 0 or args.rounds < 1:
        parser.error("--reads must be at least 0 and --rounds at least 1")
    if not args.modes or not set(args.modes.split(",")) <= {"commit", "nowait"}:
        parser.error(f"--modes: commit and/or nowait, got {args.modes!r}")
    sizes = [int(t) for t in args.txn.split(",")]
    value = os.urandom(args.size)
    print(
        f"{args.messages} messages of {args.size} B per figure, {args.partitions} partitions, "
        f"txn_lease {args.lease}s, transactional {args.call}"
    )
    for stores in (int(n) for n in args.stores.split(",")):
        with LocalCluster(stores=stores, beacon_interval=0.2) as cluster:
            common: dict[str, Any] = {
                "towers": cluster.towers,
                "advertised_host": "127.0.0.1",
                "bind_host": "127.0.0.1",
                "beacon_interval": 0.2,
                "beacon_timeout": 0.8,
                "ready_timeout": 30.0,
            }
            print(f"-- {stores} store(s)")
            for txn in sizes:
                _produce_rounds(common, args, txn, value, cluster)
            if not args.reads:
                continue
            topic = _topic(sizes[-1], 0)
            expect = len(args.modes.split(",")) * (args.messages + 1)
            rates: dict[tuple[bool, bool], list[float]] = {}
            cpus: dict[tuple[bool, bool], list[float]] = {}
            replayed = 0
            for round_ in range(args.reads):
                for columns in (False, True):
                    # ABBA: each kind reads first in every other round (no order bias).
                    for committed in (False, True) if round_ % 2 == 0 else (True, False):
                        rate, cpu, replays = _read(common, topic, committed, columns, expect)
                        rates.setdefault((columns, committed), []).append(rate)
                        cpus.setdefault((columns, committed), []).append(cpu)
                        replayed += replays
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            for columns in (False, True):
                call = "poll_columns" if columns else "poll"
                rate_u = statistics.median(rates[(columns, False)])
                rate_c = statistics.median(rates[(columns, True)])
                cpu_u = statistics.median(cpus[(columns, False)]) / expect * 1e6
                cpu_c = statistics.median(cpus[(columns, True)]) / expect * 1e6
                print(
                    f"read committed {call}: {rate_c:,.0f} msg/s = {rate_c / rate_u:.2f}x "
                    f"read uncommitted ({rate_u:,.0f} msg/s), medians of {args.reads} "
                    f"alternated reads of {expect:,} messages [load {load}]; consumer CPU "
                    f"{cpu_c:.2f} against {cpu_u:.2f} us/msg ({cpu_u / cpu_c:.2f}x)"
                )
            print(f"spans replayed from the stores in those reads: {replayed}")


if __name__ == "__main__":
    main()
