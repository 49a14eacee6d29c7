"""A consumer group member or a producer *process* for the group tests (and scripts/chaos.py,
bench/groups.py), reporting JSON lines on stdout.

    python group_client.py member --tower 127.0.0.1:SUB:PUB --topic t --group g
    python group_client.py produce --tower 127.0.0.1:SUB:PUB --topic t --records 6000 --rate 2000

A member prints ``start`` before it builds its consumer, ``ready`` once built, ``assigned``
/ ``revoked`` / ``lost`` with the partitions and the wall-clock time (``t``) from its
rebalance callbacks, ``records`` (lists of ``[partition, offset, index, value]``) after
every poll that returned some, and ``done``
after a clean ``close()`` on SIGTERM (a leave: its partitions are handed over); with
``--quiet`` no ``records`` but a ``count`` line every 0.2 s (messages read by partition,
the times of the first and last). A producer
sends the values ``b"0"``, ``b"1"``... keyed by themselves over ``--partitions`` partitions
at ``--rate`` messages per second, and prints ``done`` once every one is stored.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections import Counter
from typing import Any

from dafka import Consumer, Producer


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "t": time.time(), **fields}), flush=True)


def _parts(keys: set[tuple[str, str]]) -> list[str]:
    return sorted(p for _, p in keys)


def member(args: argparse.Namespace) -> int:
    stop = {"now": False}

    def on_term(_signum: int, _frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_term)
    fields: dict[str, Any] = {}
    if args.session_ms:
        fields["session_timeout_ms"] = args.session_ms
    if args.heartbeat_ms:
        fields["heartbeat_interval_ms"] = args.heartbeat_ms
    if args.instance:
        fields["group_instance_id"] = args.instance
    emit("start")
    consumer = Consumer(
        [args.topic],
        towers=",".join(args.tower),
        beacon_interval=args.beacon_interval,
        group_id=args.group,
        offset_reset="earliest",
        auto_commit_interval_ms=args.commit_ms,
        on_assign=lambda keys: emit("assigned", partitions=_parts(keys)),
        on_revoke=lambda keys: emit("revoked", partitions=_parts(keys)),
        on_lost=lambda keys: emit("lost", partitions=_parts(keys)),
        **fields,
    )
    emit("ready", member=consumer.consumer_id)
    counts: dict[str, int] = {}
    first = last = 0.0
    reported = time.monotonic()
    while not stop["now"]:
        if args.quiet:
            columns = consumer.poll_columns(0.1)
            if len(columns):
                last = time.time()
                first = first or last
                for partition, n in Counter(columns.partitions).items():
                    counts[partition] = counts.get(partition, 0) + n
            if time.monotonic() - reported > 0.2:
                reported = time.monotonic()
                emit("count", n=counts, first=first, last=last)
            continue
        records = consumer.poll(0.1)
        if records:
            emit("records", r=[[r.partition, r.offset, r.index, r.value.decode()] for r in records])
    if args.quiet:
        emit("count", n=counts, first=first, last=last)
    consumer.close()
    emit("done")
    return 0


def produce(args: argparse.Namespace) -> int:
    with Producer(
        args.topic,
        towers=",".join(args.tower),
        beacon_interval=args.beacon_interval,
        partitions=args.partitions,
        name=args.name,
        linger_ms=2,
        max_in_flight=args.max_in_flight,
    ) as producer:
        emit("ready", partitions=list(producer.partitions))
        start = time.monotonic()
        for i in range(args.records):
            due = start + i / args.rate if args.rate else 0.0
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            value = b"%d" % i
            producer.produce(value, key=value)
            if i % 500 == 0:
                emit("progress", sent=i)
        left = producer.flush(60)
        emit("done", sent=args.records, unstored=left)
        return 0 if left == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["member", "produce"])
    parser.add_argument("--tower", action="append", required=True, help="HOST:SUBPORT:PUBPORT")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--beacon-interval", type=float, default=0.2)
    parser.add_argument("--group", default="g")
    parser.add_argument("--session-ms", type=float, default=0.0, help="member: 0 = default")
    parser.add_argument("--heartbeat-ms", type=float, default=0.0, help="member: 0 = default")
    parser.add_argument("--commit-ms", type=float, default=200.0, help="member: auto-commit")
    parser.add_argument("--instance", default="", help="member: group_instance_id")
    parser.add_argument("--quiet", action="store_true", help="member: counts, not records")
    parser.add_argument("--records", type=int, default=0, help="produce: how many")
    parser.add_argument("--rate", type=float, default=2000.0, help="produce: msg/s (0: flat out)")
    parser.add_argument("--max-in-flight", type=int, default=100_000, help="produce")
    parser.add_argument("--partitions", type=int, default=6, help="produce")
    parser.add_argument("--name", default="w", help="produce: the producer's name")
    args = parser.parse_args(argv)
    return member(args) if args.mode == "member" else produce(args)


if __name__ == "__main__":
    sys.exit(main())
