"""A producer or consumer *process* for the cluster tests, reporting JSON lines on stdout.

The cluster tests need clients that live and die on their own (a producer that exits after
``flush()``, a consumer that reads slowly in another address space), and a way to watch them
without sharing memory: every line this script prints is one JSON object with an ``event``
key (``ready``, ``progress`` every ``--report`` seconds, ``paused``, ``done``).

    python cluster_client.py produce --tower 127.0.0.1:SUB:PUB --topic t --records 1000
    python cluster_client.py consume --tower 127.0.0.1:SUB:PUB --topic t --expect 1000

    python cluster_client.py produce-named --tower 127.0.0.1:SUB:SUB+1 --topic t --name w \
        --records 1000 --tag g2

Record contents are :func:`payload` so that any reader can check each one. ``produce-named``
runs a named, unbatched one-partition :class:`dafka.Producer` (it resumes its partition):
its contents are :func:`named_payload`, the sequence and a ``--tag`` naming the run, so that
a check of the stores' logs tells which run's content a sequence holds.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from dafka.client import Consumer, PartitionProducer, Producer
from dafka.node import ConsumerConfig, ProducerConfig
from dafka.testing import lossy_records
from dafka.transport.config import TransportConfig


def payload(sequence: int, size: int = 100) -> bytes:
    """The content of record ``sequence``: its number, padded to ``size`` bytes."""
    head = b"%d:" % sequence
    return head + b"." * max(0, size - len(head))


def named_payload(sequence: int, tag: str, size: int = 100) -> bytes:
    """A ``produce-named`` content: ``sequence:tag:`` padded to ``size`` bytes."""
    head = b"%d:%s:" % (sequence, tag.encode())
    return head + b"." * max(0, size - len(head))


def tag_of(content: bytes) -> str:
    """The run tag of a :func:`named_payload` content ("" for a :func:`payload`)."""
    parts = content.split(b":", 2)
    return parts[1].decode() if len(parts) == 3 else ""


def sequence_of(content: bytes) -> int:
    """The sequence a :func:`payload` content was built for."""
    return int(content.split(b":", 1)[0])


def rss_kb(pid: int | str = "self") -> int:
    """Resident set size of a process (``VmRSS`` of /proc/PID/status) in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def transport(towers: list[str], beacon_interval: float) -> TransportConfig:
    """Client transport for towers given as ``HOST:SUBPORT:PUBPORT``."""
    subs, pubs = [], []
    for tower in towers:
        host, sub, pub = tower.split(":")
        subs.append(f"tcp://{host}:{sub}")
        pubs.append(f"tcp://{host}:{pub}")
    return TransportConfig(
        tower_sub_addresses=tuple(subs),
        tower_pub_addresses=tuple(pubs),
        advertised_host="127.0.0.1",
        bind_host="127.0.0.1",
        beacon_interval=beacon_interval,
        beacon_timeout=4 * beacon_interval,
    )


def emit(event: str, **fields: Any) -> None:
    """One JSON line on stdout, flushed at once (the test reads it while we run)."""
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


class _Reporter:
    """Prints ``progress`` lines from a thread until stopped (the main thread may block)."""

    def __init__(self, interval: float, sample: Any) -> None:
        self._interval = interval
        self._sample = sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Reporter:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            emit("progress", **self._sample())


def produce(args: argparse.Namespace) -> int:
    config = ProducerConfig(head_interval=0.2)
    with PartitionProducer(
        args.topic,
        transport(args.tower, args.beacon_interval),
        config,
        ready_timeout=30.0,
    ) as producer:
        emit("ready", id=producer.producer_id)
        peak = 0

        def sample() -> dict[str, Any]:
            nonlocal peak
            published, acked = producer.next_sequence, producer.acked
            peak = max(peak, published - acked)
            return {
                "published": published,
                "acked": acked,
                "peak_unacked": peak,
                "rss_kb": rss_kb(),
            }

        with _Reporter(args.report, sample):
            started = time.monotonic()
            for sequence in range(args.records):
                if sequence == args.pause_at:
                    emit("paused", **sample())
                    sys.stdin.readline()  # the test says when to go on
                if args.rate:
                    ahead = sequence / args.rate - (time.monotonic() - started)
                    if ahead > 0.01:
                        time.sleep(ahead)  # pacing, so that records keep flowing for a while
                producer.publish(payload(sequence, args.size))
            emit("published", **sample())
            flushed = producer.flush(args.flush_timeout)
        emit("done", flushed=flushed, **sample())
    return 0 if flushed else 1


def produce_named(args: argparse.Namespace) -> int:
    """A named producer run: resume, publish ``--records`` tagged records, flush, report.

    ``--wait-line``: print ``waiting`` and read a stdin line before joining the cluster (the
    test decides the moment the resume starts; the interpreter start is not part of it).
    """
    if args.wait_line:
        emit("waiting")
        sys.stdin.readline()
    towers = []
    for tower in args.tower:
        host, sub, pub = tower.split(":")
        if int(pub) != int(sub) + 1:
            raise SystemExit("produce-named: a tower's PUB port must be its SUB port + 1")
        towers.append(f"{host}:{sub}")
    with Producer(
        args.topic,
        towers=",".join(towers),
        name=args.name,
        batching=False,
        beacon_interval=args.beacon_interval,
        beacon_timeout=4 * args.beacon_interval,
        advertised_host="127.0.0.1",
        bind_host="127.0.0.1",
        resume_timeout=args.resume_timeout,
        head_interval=0.2,
        min_stores=args.min_stores,
    ) as producer:
        start = producer.start_offsets[producer.partitions[0]]
        emit("resumed", start=start, partition=producer.partitions[0])
        futures = []
        started = time.monotonic()
        for i in range(args.records):
            if args.rate:
                ahead = i / args.rate - (time.monotonic() - started)
                if ahead > 0.01:
                    time.sleep(ahead)  # pacing, so that records keep flowing for a while
            futures.append(producer.send(named_payload(start + i, args.tag, args.size)))
        left = producer.flush(args.flush_timeout)
        offsets = [f.result(0).offset for f in futures if f.done() and not f.exception()]
        emit(
            "done",
            start=start,
            end=start + args.records,
            acked=len(offsets),
            in_order=offsets == list(range(start, start + len(offsets))),
            flushed=left == 0,
        )
    return 0 if left == 0 else 1


def consume(args: argparse.Namespace) -> int:
    """Read until ``--expect`` records arrived, checking order and content per partition."""
    config = ConsumerConfig(offset_reset="earliest")
    next_expected: dict[str, int] = {}
    errors: list[str] = []
    received = 0
    drop = lossy_records(args.drop, args.drop_seed) if args.drop else None
    with Consumer(
        args.topic,
        transport=transport(args.tower, args.beacon_interval),
        config=config,
        max_queued=args.max_queued,
        ready_timeout=30.0,
        drop_inbound=drop,
    ) as consumer:
        emit("ready", id=consumer.consumer_id)

        def sample() -> dict[str, Any]:
            dropped = drop.dropped if drop is not None else 0
            return {
                "received": received,
                "errors": len(errors),
                "dropped": dropped,
                "rss_kb": rss_kb(),
            }

        with _Reporter(args.report, sample):
            deadline = time.monotonic() + args.timeout
            started: float | None = None  # the pace counts from the first record read
            while received < args.expect and time.monotonic() < deadline:
                records = consumer.poll(timeout=0.5, max_records=args.batch)
                if records and started is None:
                    started = time.monotonic()
                for record in records:
                    want = next_expected.get(record.partition, 0)
                    wrong = record.offset != want or sequence_of(record.value) != want
                    if wrong and len(errors) < 20:
                        errors.append(f"{record.partition}: got {record.offset}, want {want}")
                    next_expected[record.partition] = record.offset + 1
                    received += 1
                if args.rate and started is not None:
                    ahead = received / args.rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)  # the slow application
        emit("done", partitions=next_expected, error_list=errors, **sample())
    return 0 if received == args.expect and not errors else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["produce", "produce-named", "consume"])
    parser.add_argument("--tower", action="append", required=True, help="HOST:SUBPORT:PUBPORT")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--beacon-interval", type=float, default=0.2)
    parser.add_argument("--report", type=float, default=0.1, help="seconds between progress lines")
    parser.add_argument("--records", type=int, default=0, help="produce: how many")
    parser.add_argument("--size", type=int, default=100, help="produce: record size in bytes")
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="records/s (0: as fast as possible); consume: counted from the first record read",
    )
    parser.add_argument("--pause-at", type=int, default=-1, help="produce: wait for a stdin line")
    parser.add_argument("--flush-timeout", type=float, default=60.0)
    parser.add_argument("--name", default="named", help="produce-named: the producer's name")
    parser.add_argument("--tag", default="run", help="produce-named: this run's content tag")
    parser.add_argument(
        "--wait-line", action="store_true", help="produce-named: start on a stdin line"
    )
    parser.add_argument("--resume-timeout", type=float, default=30.0, help="produce-named")
    parser.add_argument(
        "--min-stores", type=int, default=1, help="produce-named: stores that must ACK a record"
    )
    parser.add_argument("--expect", type=int, default=0, help="consume: how many records")
    parser.add_argument("--max-queued", type=int, default=200_000, help="consume: Consumer bound")
    parser.add_argument("--batch", type=int, default=10_000, help="consume: records per poll")
    parser.add_argument("--timeout", type=float, default=90.0, help="consume: give up after")
    parser.add_argument(
        "--drop", type=float, default=0.0, help="consume: share of live RECORDs lost in transit"
    )
    parser.add_argument("--drop-seed", type=int, default=1, help="consume: seed of --drop")
    args = parser.parse_args(argv)
    if args.mode == "produce-named":
        return produce_named(args)
    return produce(args) if args.mode == "produce" else consume(args)


if __name__ == "__main__":
    sys.exit(main())
