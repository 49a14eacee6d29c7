"""``dafka consume -o earliest -e`` after retention starts where the log starts now, at once.

Before LOG-START (docs/protocol.md) the stores answered a FETCH below their first record
with nothing, and the consumer retried ten times (~37 s) before it started at the first
record still held. Now each store says where its log starts and the consumer goes on from
there: the same output, well within a deadline far below the old wait.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from dafka.server import free_port_pair
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import DAFKA, Processes, wait_until

RECORDS = 2_000
SEGMENT = 4096
OLD_WAIT = 37.0
"""The FETCH retries a consumer needed to give up on records retention removed."""
_MOVED = re.compile(r"retention: numbers/(\S+) now starts at (\d+)")


def test_consume_from_earliest_after_retention_starts_at_the_log_start(
    procs: Processes, tmp_path: Path
) -> None:
    port = free_port_pair()
    data = tmp_path / "d"
    up = procs.spawn(
        "up",
        [
            *DAFKA,
            "up",
            "--port",
            str(port),
            "--data",
            str(data),
            "--segment-bytes",
            str(SEGMENT),
            "--retention-bytes",
            "8K",
            "--retention-check",
            "0.2",
        ],
    )
    up.wait_log(re.compile(r"store-0: pid \d+"))
    lines = b"".join(b"%05d" % i + b"." * 95 + b"\n" for i in range(RECORDS))
    done = dafka("produce", "numbers", "--tower", f"127.0.0.1:{port}", "--no-batching", stdin=lines)
    assert done.code == 0, done.err
    moved = up.wait_log(_MOVED)
    (partition_dir,) = (data / "store-0" / "log" / "numbers").iterdir()
    assert partition_dir.name == moved.group(1)

    def start() -> int | None:
        found = [int(p.stem) for p in partition_dir.glob("*.log")]
        return min(found) if found and min(found) > 0 else None

    first = wait_until(start, "retention after the last record")
    began = time.monotonic()
    read = dafka(
        "consume",
        "numbers",
        "--tower",
        f"127.0.0.1:{port}",
        "-o",
        "earliest",
        "-e",
        "-f",
        "%o\n",
        timeout=OLD_WAIT,
    )
    took = time.monotonic() - began
    assert read.code == 0, read.err
    offsets = [int(x) for x in read.out.split()]
    assert offsets == list(range(offsets[0], RECORDS))
    assert offsets[0] >= first  # retention may have moved on since
    assert took < OLD_WAIT / 2, f"{took:.1f}s: the FETCH retries decided"
