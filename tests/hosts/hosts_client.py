"""A Python client *process* on one host of the multi-host tests: JSON lines on stdout.

It uses the front door only (``from dafka import ...``) and names nothing but the towers,
as the README's examples do: where it listens and what it advertises are the defaults.

    python hosts_client.py produce --towers 10.77.1.2:5556 --topic t --count 2000 [--rate 100]
    python hosts_client.py consume --towers 10.77.1.2:5556 --topic t --expect 2000 [--committed]
    python hosts_client.py txn-loop --towers ... --topic in --out out --expect 1000 --per-txn 50

With ``--warmup`` a producer first sends one message (index -1, which readers skip) and waits
until it is stored, so that its figures are those of a producer the stores already found.
Each message's value is ``INDEX:SENT_NS`` (``time.time_ns()`` when it was sent: namespaces
share the clock, so a reader on another host measures the latency end to end). Events:
``ready``, ``progress`` (every ``--report`` s), ``done`` with the counts and figures. A
consumer's ``done`` says how many indexes it received, how many twice (``duplicates``), out
of order (``reordered``) and never (``missing``), and the p50/p99 latency.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

from dafka import Consumer, Producer, ReadCommittedConsumer, TransactionalProducer


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def produce(args: argparse.Namespace) -> int:
    acked: list[float] = []
    lock = threading.Lock()
    with Producer(args.topic, towers=args.towers, batching=not args.no_batching) as producer:
        emit("ready")
        if args.warmup:  # stored once the stores found this producer: then the timed run
            producer.send(b"-1:0").result(timeout=args.timeout)
        started = time.monotonic()
        last_report = started
        for i in range(args.count):
            if args.rate:
                lag = started + i / args.rate - time.monotonic()
                if lag > 0:
                    time.sleep(lag)
            sent = time.monotonic()
            future = producer.send(b"%d:%d" % (i, time.time_ns()))

            def done(_f: Any, sent: float = sent) -> None:
                with lock:
                    acked.append(time.monotonic() - sent)

            future.add_done_callback(done)
            if time.monotonic() - last_report >= args.report:
                last_report = time.monotonic()
                with lock:
                    emit("progress", sent=i + 1, acked=len(acked))
        left = producer.flush(timeout=args.timeout)
        seconds = time.monotonic() - started
    with lock:
        latencies = [a * 1000 for a in acked]
    emit(
        "done",
        sent=args.count,
        acked=len(latencies),
        not_acked=left,
        seconds=round(seconds, 3),
        rate=round(args.count / seconds),
        ack_p50_ms=round(percentile(latencies, 0.5), 2),
        ack_p99_ms=round(percentile(latencies, 0.99), 2),
    )
    return 0 if left == 0 else 1


class _Tally:
    """Indexes received: duplicates, reordering, latency."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.received = 0
        self.duplicates = 0
        self.reordered = 0
        self.last = -1
        self.latencies: list[float] = []

    def add(self, value: bytes) -> None:
        index_text, _, sent_text = value.partition(b":")
        index = int(index_text)
        if index < 0:  # a producer's warm-up message
            return
        self.received += 1
        self.latencies.append((time.time_ns() - int(sent_text)) / 1e6)
        if index in self.seen:
            self.duplicates += 1
        elif index < self.last:
            self.reordered += 1
        self.seen.add(index)
        self.last = max(self.last, index)


def consume(args: argparse.Namespace) -> int:
    kind = ReadCommittedConsumer if args.committed else Consumer
    tally = _Tally()
    with kind([args.topic], towers=args.towers, offset_reset="earliest") as consumer:
        emit("ready")
        started = time.monotonic()
        first: float | None = None
        last_report = started
        deadline = started + args.timeout
        while len(tally.seen) < args.expect and time.monotonic() < deadline:
            for record in consumer.poll(timeout=0.2):
                if first is None:
                    first = time.monotonic()
                tally.add(record.value)
            if time.monotonic() - last_report >= args.report:
                last_report = time.monotonic()
                emit("progress", received=tally.received, unique=len(tally.seen))
        # anything more would be a duplicate: listen a little longer to catch one
        settle = time.monotonic() + args.settle
        while time.monotonic() < settle:
            for record in consumer.poll(timeout=0.1):
                tally.add(record.value)
        seconds = time.monotonic() - (first or started)
    emit(
        "done",
        received=tally.received,
        unique=len(tally.seen),
        duplicates=tally.duplicates,
        reordered=tally.reordered,
        missing=len(set(range(args.expect)) - tally.seen),
        seconds=round(seconds, 3),
        rate=round(len(tally.seen) / seconds) if seconds > 0 else 0,
        p50_ms=round(percentile(tally.latencies, 0.5), 2),
        p99_ms=round(percentile(tally.latencies, 0.99), 2),
    )
    return 0


def txn_loop(args: argparse.Namespace) -> int:
    """Read ``--topic`` committed, write each value to ``--out`` in transactions of
    ``--per-txn`` messages, until ``--expect`` messages went through."""
    done = 0
    started = time.monotonic()
    with (
        ReadCommittedConsumer([args.topic], towers=args.towers, offset_reset="earliest") as source,
        TransactionalProducer(args.out, transactional_id=args.tid, towers=args.towers) as sink,
    ):
        emit("ready")
        pending: list[bytes] = []
        deadline = started + args.timeout
        while done < args.expect and time.monotonic() < deadline:
            pending += [r.value for r in source.poll(timeout=0.2)]
            while pending and (len(pending) >= args.per_txn or done + len(pending) >= args.expect):
                chunk, pending = pending[: args.per_txn], pending[args.per_txn :]
                with sink.transaction():
                    for value in chunk:
                        sink.send(value)
                done += len(chunk)
                emit("progress", committed=done)
        sink.flush(timeout=args.timeout)
    emit("done", committed=done, seconds=round(time.monotonic() - started, 3))
    return 0 if done >= args.expect else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["produce", "consume", "txn-loop"])
    parser.add_argument("--towers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, default=0, help="produce: how many messages")
    parser.add_argument("--rate", type=float, default=0.0, help="produce: messages/s (0: all)")
    parser.add_argument("--no-batching", action="store_true", help="produce: one per RECORD")
    parser.add_argument(
        "--warmup", action="store_true", help="produce: one message stored first (index -1)"
    )
    parser.add_argument("--expect", type=int, default=0, help="consume, txn-loop: how many")
    parser.add_argument("--committed", action="store_true", help="consume: read committed")
    parser.add_argument("--settle", type=float, default=1.0, help="consume: listen on after")
    parser.add_argument("--out", default="", help="txn-loop: the topic written")
    parser.add_argument("--tid", default="loop", help="txn-loop: the transactional id")
    parser.add_argument("--per-txn", type=int, default=50, help="txn-loop: messages each")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--report", type=float, default=0.5)
    args = parser.parse_args(argv)
    if args.mode == "produce":
        return produce(args)
    if args.mode == "consume":
        return consume(args)
    return txn_loop(args)


if __name__ == "__main__":
    sys.exit(main())
