"""Retention is a setting of stores (issue 22): flags, config keys and ``dafka config``, and
a running store applies it.

Before, no flag or key set a ``RetentionPolicy``, so daemons kept everything whatever
docs/storage.md said. Here ``dafka up`` (real processes: it passes the settings to its
``dafka store`` members) runs a store with 4 KiB segments, keeping 8 KiB per partition,
checked every 0.2 s; 2,000 RECORDs of ~100 B produced by ``dafka produce --no-batching``
must leave only the last ones on disk, the older segment files deleted; what is left is
still served, from a named offset and from ``-o earliest``.

Before LOG-START (docs/protocol.md) the stores answered a FETCH below their first record
with nothing, and ``dafka consume -o earliest -e`` retried ten times (~37 s) before it
started at the first record still held. Now each store says where its log starts and the
consumer goes on from there: the same output, well within a deadline far below the old wait.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from dafka.server import free_port_pair
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import DAFKA, Processes, wait_until

RECORDS = 2_000
SEGMENT = 4096
KEEP = 8192
OLD_WAIT = 37.0
"""The FETCH retries a consumer needed to give up on records retention removed."""
_MOVED = re.compile(r"retention: numbers/(\S+) now starts at (\d+)")


def _segments(partition_dir: Path) -> dict[int, int]:
    """Start offset -> size of each segment file of a partition."""
    return {int(p.stem): p.stat().st_size for p in partition_dir.glob("*.log")}


def test_retention_set_from_the_command_line_removes_old_segments_and_serves_the_rest(
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
    partition = moved.group(1)
    (partition_dir,) = (data / "store-0" / "log" / "numbers").iterdir()
    assert partition_dir.name == partition

    def trimmed() -> dict[int, int] | None:
        found = _segments(partition_dir)
        return found if min(found) > 0 and sum(found.values()) <= KEEP + 2 * SEGMENT else None

    kept = wait_until(trimmed, "retention after the last record")
    assert len(kept) <= KEEP // SEGMENT + 2
    # what is left is the end of the partition, still served from where it starts
    start = min(_segments(partition_dir))
    read = dafka(
        "consume",
        "numbers",
        "--tower",
        f"127.0.0.1:{port}",
        "-o",
        json.dumps({partition: start}),
        "-e",
        "-f",
        "%o\n",
    )
    assert read.code == 0, read.err
    assert [int(x) for x in read.out.split()] == list(range(start, RECORDS))

    try:  # a deadline, not a measured time: the old code's FETCH retries took OLD_WAIT
        earliest = dafka(
            "consume",
            "numbers",
            "--tower",
            f"127.0.0.1:{port}",
            "-o",
            "earliest",
            "-e",
            "-f",
            "%o\n",
            timeout=OLD_WAIT / 2,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"-o earliest not done within {OLD_WAIT / 2} s: the FETCH retries decided")
    assert earliest.code == 0, earliest.err
    offsets = [int(x) for x in earliest.out.split()]
    assert offsets == list(range(offsets[0], RECORDS))
    assert offsets[0] >= start  # retention may have moved on since


def test_retention_keys_are_shown_by_dafka_config_with_their_source(tmp_path: Path) -> None:
    config = tmp_path / "dafka.toml"
    config.write_text('[store]\nsegment_bytes = "1M"\n[store.retention]\nbytes = "1G"\n')
    shown = dafka(
        "--config", str(config), "config", "--json", env={"DAFKA_STORE_RETENTION_AGE": "7d"}
    )
    assert shown.code == 0, shown.err
    table = json.loads(shown.out)
    assert table["store/segment_bytes"]["value"] == str(1 << 20)
    assert table["store/retention/bytes"]["value"] == str(1 << 30)
    assert table["store/retention/bytes"]["source"].startswith("file")
    assert table["store/retention/age"] == {
        "value": "604800.0",
        "source": "env DAFKA_STORE_RETENTION_AGE",
        "env": "DAFKA_STORE_RETENTION_AGE",
        "flag": "--retention-age",
    }
    assert table["store/retention/check"]["value"] == "60.0"
    bad = dafka("store", "--data", str(tmp_path / "s"), "--retention-bytes", "lots")
    assert bad.code == 2
    assert "--retention-bytes" in bad.err
