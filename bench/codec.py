"""Encode and decode rates of the Dafka wire codec, per hot command.

    .venv/bin/python bench/codec.py [--count 200000] [--repeat 5]

Prints messages/s each way (best of ``--repeat`` runs over ``--count`` messages, one partition,
consecutive sequences, as a producer or a consumer sees them). The last line is the worst case
for the header caches: every message has a header never seen before.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from functools import partial

from dafka.protocol import (
    Ack,
    DataMessage,
    DirectHead,
    DirectRecord,
    Fetch,
    Head,
    Record,
    decode_data,
    encode,
)

PRODUCER = "0123456789ABCDEF0123456789ABCDEF"
CONSUMER = "FEDCBA9876543210FEDCBA9876543210"
CONTENT = b"x" * 100


def _cases(count: int) -> dict[str, list[DataMessage]]:
    seqs = range(count)
    return {
        "RECORD 100 B": [Record("hello", PRODUCER, s, CONTENT) for s in seqs],
        "DIRECT-RECORD 100 B": [
            DirectRecord(CONSUMER, "hello", PRODUCER, s, CONTENT) for s in seqs
        ],
        "ACK": [Ack(PRODUCER, "hello", s) for s in seqs],
        "HEAD": [Head("hello", PRODUCER, s) for s in seqs],
        "DIRECT-HEAD": [DirectHead(CONSUMER, "hello", PRODUCER, s) for s in seqs],
        "FETCH": [Fetch(PRODUCER, CONSUMER, "hello", s, 1000) for s in seqs],
        "RECORD 100 B, every header new": [
            Record(f"topic-{s}", PRODUCER, s, CONTENT) for s in seqs
        ],
    }


def _encode_all(messages: list[DataMessage]) -> list[list[bytes]]:
    return [encode(m) for m in messages]


def _decode_all(frames: list[list[bytes]]) -> list[DataMessage]:
    return [decode_data(f) for f in frames]


def _best_rate(run: Callable[[], object], count: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return count / best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200_000, help="messages per run")
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (best counts)")
    args = parser.parse_args(argv)
    print(f"dafka.protocol codec, Python {sys.version.split()[0]}, {args.count:,} messages/run")
    print(f"{'command':32s} {'encode msg/s':>14s} {'decode msg/s':>14s}")
    for label, messages in _cases(args.count).items():
        frames = [encode(m) for m in messages]
        assert [decode_data(f) for f in frames[:1000]] == messages[:1000]
        gc.collect()
        enc = _best_rate(partial(_encode_all, messages), args.count, args.repeat)
        dec = _best_rate(partial(_decode_all, frames), args.count, args.repeat)
        print(f"{label:32s} {enc:14,.0f} {dec:14,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
