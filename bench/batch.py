"""Encode/decode speed of the batch format (dafka.records), pure Python.

    .venv/bin/python bench/batch.py [--messages 1000] [--size 100] [--rounds 200]

Prints messages/s for bare values and for messages with keys, headers, timestamps and UUIDs.
"""

from __future__ import annotations

import argparse
import os
import time

from dafka.records import decode_batch, encode_batch


def _rate(fn: object, rounds: int, messages: int) -> float:
    assert callable(fn)
    start = time.perf_counter()
    for _ in range(rounds):
        fn()
    return rounds * messages / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=1000, help="messages per batch")
    parser.add_argument("--size", type=int, default=100, help="value bytes")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    n = args.messages
    values = [os.urandom(args.size) for _ in range(n)]
    keys: list[bytes | None] = [b"key-%d" % (i % 97) for i in range(n)]
    headers = [(("trace", b"abc"),)] * n
    stamps = [1_700_000_000_000 + i for i in range(n)]
    uuids = [os.urandom(16) for _ in range(n)]
    cases = {
        "values only": {"values": values},
        "keys+timestamps": {"values": values, "keys": keys, "timestamps": stamps},
        "everything": {
            "values": values,
            "keys": keys,
            "headers": headers,
            "timestamps": stamps,
            "uuids": uuids,
        },
    }
    print(f"{n} messages of {args.size} B per batch, {args.rounds} rounds")
    for name, columns in cases.items():
        content = encode_batch(**columns)  # type: ignore[arg-type]
        enc = _rate(lambda c=columns: encode_batch(**c), args.rounds, n)
        dec = _rate(lambda b=content: decode_batch(b), args.rounds, n)
        overhead = (len(content) - n * args.size) / n
        print(
            f"{name:16} encode {enc / 1e6:6.2f} M msgs/s  decode {dec / 1e6:6.2f} M msgs/s  "
            f"overhead {overhead:5.1f} B/msg"
        )


if __name__ == "__main__":
    main()
