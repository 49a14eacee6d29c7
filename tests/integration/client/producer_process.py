"""A producer process for the restart test: sends one message per key, prints metadata.

    python producer_process.py TOWERS NAME VALUE KEY...

Prints one line per key: ``key partition offset index``; exits 0 once all are stored.
"""

from __future__ import annotations

import sys

from dafka import Producer


def main() -> None:
    towers, name, value, *keys = sys.argv[1:]
    with Producer(
        "restart",
        towers=towers,
        name=name,
        partitions=4,
        beacon_interval=0.2,
        beacon_timeout=0.8,
    ) as producer:
        futures = [producer.send(value.encode(), key=key.encode()) for key in keys]
        for key, future in zip(keys, futures, strict=True):
            meta = future.result(timeout=30)
            print(key, meta.partition, meta.offset, meta.index, flush=True)


if __name__ == "__main__":
    main()
