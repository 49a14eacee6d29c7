"""Keyed routing across a real process restart: same name, same partitions, continued."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dafka import Consumer, LocalCluster

HERE = Path(__file__).resolve().parent
KEYS = [f"customer-{i}" for i in range(25)]


def run_producer(towers: str, value: str) -> dict[str, tuple[str, int]]:
    result = subprocess.run(
        [sys.executable, str(HERE / "producer_process.py"), towers, "writer", value, *KEYS],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = {}
    for line in result.stdout.splitlines():
        key, partition, offset, _index = line.split()
        out[key] = (partition, int(offset))
    assert sorted(out) == sorted(KEYS)
    return out


def test_keys_keep_their_partition_across_a_process_restart(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, stores=2, beacon_interval=0.2) as cluster:
        first = run_producer(cluster.towers, "one")
        second = run_producer(cluster.towers, "two")
        for key in KEYS:
            assert second[key][0] == first[key][0], key
            assert second[key][1] > first[key][1], key  # resumed after the stored head
        got: list[tuple[str, bytes]] = []
        with Consumer(
            "restart",
            towers=cluster.towers,
            offset_reset="earliest",
            beacon_interval=0.2,
            beacon_timeout=0.8,
        ) as consumer:
            while len(got) < 2 * len(KEYS):
                batch = consumer.poll(timeout=30)
                assert batch, f"stalled after {len(got)}"
                got += [((r.key or b"").decode(), r.value) for r in batch]
        for key in KEYS:
            assert [v for k, v in got if k == key] == [b"one", b"two"]
