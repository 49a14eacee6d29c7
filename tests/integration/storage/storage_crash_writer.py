"""A writer process for the crash tests: appends forever, reports each durable advance.

Run as ``python storage_crash_writer.py DATA_DIR POLICY SEED``. It resumes every partition at
its next offset, appends random batches of payloads that only the right (partition, offset)
can have, and after each batch writes one line per durable advance to stdout (unbuffered):
``<topic hex> <partition hex> <offset>``. A first line ``ready`` says recovery is done. The
test kills it with SIGKILL at random moments.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import time
from pathlib import Path

from dafka.storage import FsyncPolicy, Storage, StorageConfig

KEYS = [("t", "p0"), ("t", "../p1"), ("é/\udcff", "p2")]


def payload(partition: str, offset: int) -> bytes:
    """Deterministic content of a record: 20-300 bytes derived from where it belongs."""
    seed = hashlib.blake2b(f"{partition}/{offset}".encode("utf-8", "surrogateescape")).digest()
    length = 20 + seed[0] + seed[1] % 45
    return (seed * (length // len(seed) + 1))[:length]


def config(policy: str) -> StorageConfig:
    return StorageConfig(
        segment_bytes=32 * 1024,
        index_interval_bytes=512,
        index_flush_entries=4,
        fsync=FsyncPolicy.parse(policy),
    )


def line(topic: str, partition: str, offset: int) -> bytes:
    t = topic.encode("utf-8", "surrogateescape").hex()
    p = partition.encode("utf-8", "surrogateescape").hex()
    return f"{t} {p} {offset}\n".encode()


def main() -> None:
    root, policy, seed = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    storage = Storage.open(root, config(policy))
    out = sys.stdout.fileno()
    report = [line(t, p, d) for t, p in KEYS if (d := storage.durable_offset(t, p)) is not None]
    os.write(out, b"".join(report) + b"ready\n")
    while True:
        topic, partition = rng.choice(KEYS)
        first = storage.next_offset(topic, partition) or 0
        count = rng.randint(1, 150)
        storage.append(
            topic, partition, first, [payload(partition, o) for o in range(first, first + count)]
        )
        advances = storage.sync_due(time.monotonic())
        if advances:
            os.write(out, b"".join(line(t, p, d) for (t, p), d in advances.items()))


if __name__ == "__main__":
    main()
