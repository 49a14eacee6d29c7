"""Throughput of the exactly-once message layer (pure CPython).

Prints:

* sequencer: read-committed messages/s over a log of interleaved transactions of 100
  messages (99 CONTINUE + their ACK) from several producers, with 1% duplicates;
* the same end-to-end from JSON-lines bytes (decode + sequence);
* framing encode/decode rates for JSON lines, CSV and fixed frames.

Run: ``.venv/bin/python bench/message.py [--messages N] [--producers P]``.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from dafka.message import (
    BinaryMessage,
    CsvFraming,
    CsvRecord,
    Envelope,
    FixedFraming,
    Flags,
    JsonFraming,
    JsonMessage,
    ReadCommittedIter,
    ReadUncommittedIter,
    Sequencer,
    build_uuid,
    new_producer_id,
)

PARTITION = "bench/partition"


def build_log(
    messages: int, producers: int, txn: int, dup_rate: float
) -> list[Envelope[JsonMessage]]:
    """An at-least-once log: producers' transactions interleaved, with duplicates."""
    # Duplicates are retried appends: the same message again, later in the log but before
    # that producer's next message.
    rng = random.Random(7)
    ids = [new_producer_id() for _ in range(producers)]
    clocks = [1 << 60] * producers
    in_txn = [0] * producers
    log: list[Envelope[JsonMessage]] = []
    offset = 0
    last: list[JsonMessage | None] = [None] * producers
    while len(log) < messages:
        p = rng.randrange(producers)
        previous = last[p]
        if previous is not None and rng.random() < dup_rate:
            # An append retried: the producer's last message again (as an ACK must reach
            # the log before the producer's next transaction, a retry comes before it too).
            message = JsonMessage(previous.body, previous.uuid)
        else:
            clocks[p] += 1
            in_txn[p] += 1
            flags = Flags.CONTINUE_TXN
            if in_txn[p] == txn:
                flags, in_txn[p] = Flags.ACK_TXN, 0
            message = JsonMessage({"n": len(log)}, build_uuid(ids[p], clocks[p], flags))
            last[p] = message
        log.append(Envelope(PARTITION, offset, offset + 60, message))
        offset += 60
    return log


def timed(label: str, count: int, fn: Callable[[], int], repeat: int = 3) -> None:
    best = float("inf")
    result = 0
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    print(f"{label:<52} {count / best:>12,.0f} msg/s   ({result:,} out, best of {repeat})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--producers", type=int, default=4)
    args = parser.parse_args()
    n = args.messages
    log = build_log(n, args.producers, txn=100, dup_rate=0.01)
    print(
        f"{n:,} messages, {args.producers} producers on one partition, transactions of 100 "
        "(99 CONTINUE + ACK), 1% retried appends"
    )

    def sequence() -> int:
        return sum(1 for _ in ReadCommittedIter(log, Sequencer()))

    timed("sequencer, read-committed (ReadCommittedIter)", n, sequence)

    def sequence_raw() -> int:
        seq: Sequencer[JsonMessage] = Sequencer()
        queue, drain = seq.queue_uncommitted, seq.drain
        out = 0
        for env in log:
            queue(env)
            if seq.committing:
                out += len(drain())
        return out

    timed("sequencer, read-committed (queue + drain)", n, sequence_raw)

    json_framing: JsonFraming[JsonMessage] = JsonFraming()
    data = b"".join(json_framing.encode(e.message) for e in log)
    chunks = [(i, data[i : i + 65536]) for i in range(0, len(data), 65536)]

    def end_to_end() -> int:
        it = ReadUncommittedIter(chunks, json_framing, PARTITION)
        return sum(1 for _ in ReadCommittedIter(it, Sequencer()))

    timed("JSON bytes -> decode -> read-committed", n, end_to_end, repeat=1)

    framings: list[tuple[str, object, list[object]]] = [
        ("json", json_framing, [e.message for e in log[:50_000]]),
        (
            "csv",
            CsvFraming(),
            [CsvRecord([str(e.message.uuid), "field", str(i)]) for i, e in enumerate(log[:50_000])],
        ),
        (
            "fixed",
            FixedFraming(),
            [BinaryMessage(b"x" * 40, e.message.uuid) for e in log[:50_000]],
        ),
    ]
    for name, framing, messages in framings:
        encode = framing.encode  # type: ignore[attr-defined]
        frames = [encode(m) for m in messages]
        blob = b"".join(frames)

        def encode_all(
            encode: Callable[[object], bytes] = encode, messages: list[object] = messages
        ) -> int:
            return len([encode(m) for m in messages])

        timed(f"framing {name}: encode", len(messages), encode_all)

        def decode(framing: object = framing, blob: bytes = blob) -> int:
            decoder = framing.new_decoder()  # type: ignore[attr-defined]
            decoder.feed(0, blob)
            decoder.close()
            count = 0
            while decoder.next() is not None:
                count += 1
            return count

        timed(f"framing {name}: decode", len(messages), decode)


if __name__ == "__main__":
    main()
