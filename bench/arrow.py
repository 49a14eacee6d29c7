"""What ``RecordColumns.to_arrow()`` costs per RECORD and per message, by RECORD size.

    .venv/bin/python bench/arrow.py [--rows 4000]

Batched RECORDs of 1 to 1,024 messages (100-byte values, keys, timestamps), checked as a
consumer takes them, turned into one Arrow table (what the Spark source's tasks hand Spark):
the best of three rounds. Small RECORDs are what a slow producer sends (one message per
RECORD at ``linger_ms`` 5 and 150 msg/s): below ``SMALL_SLICE`` messages a slice is taken
from its decoded columns, joined with its neighbours (docs/spark.md, "Rows in bulk").
"""

from __future__ import annotations

import argparse
import os
import time

from dafka.records import BatchSlice, CheckedBatch, Part, RecordColumns, check_batch, encode_batch


def _parts(records: int, per: int) -> list[Part]:
    parts: list[Part] = []
    for i in range(records):
        values = [os.urandom(100) for _ in range(per)]
        keys = [b"device-%d" % i] * per
        content = encode_batch(values, keys, None, [1_767_225_600_000 + j for j in range(per)])
        layout, columns = check_batch(content)
        parts.append(BatchSlice(CheckedBatch("t", "p", i, content, layout, columns), 0, per))
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=4000, help="messages per round (about)")
    args = parser.parse_args()
    for per in (1, 2, 4, 16, 64, 1024):
        records = max(20, args.rows // per)
        best = float("inf")
        for _ in range(3):
            columns = RecordColumns(_parts(records, per))
            start = time.perf_counter()
            columns.to_arrow()
            best = min(best, time.perf_counter() - start)
        print(
            f"{per:5d} messages/RECORD: {best / records * 1e6:8.1f} us per RECORD, "
            f"{best / (records * per) * 1e6:7.2f} us per message"
        )
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
