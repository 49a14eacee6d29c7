"""``--max-partitions`` (``store/max_partitions``) reaches a store process (issue 19): a
``dafka store`` allowed one partition stores the first producer's records and refuses the
second's (counted: ``partitions_refused`` in its /metrics), and ``dafka pipeline`` takes
the key flags, checked before anything starts."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from dafka.server import LocalCluster
from dafka.server._processes import free_port_pair
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import BEACON_INTERVAL


def _store_counter(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        for line in reply.read().decode().splitlines():
            metric, _, value = line.rpartition(" ")
            if not line.startswith("#") and metric.endswith(
                (f"store_{name}", f"store_{name}_total")
            ):
                return float(value)
    raise AssertionError(f"no store_{name} in /metrics")


def test_a_store_tracks_at_most_max_partitions(tmp_path: Path) -> None:
    metrics = free_port_pair()  # the tower's, store-0's
    with LocalCluster(
        tmp_path / "d",
        stores=1,
        beacon_interval=float(BEACON_INTERVAL),
        store_settings={"store/max_partitions": 1},
        metrics_port=metrics,
    ) as c:
        join = ["--tower", c.towers, "--beacon-interval", BEACON_INTERVAL]
        first = dafka("produce", "t", *join, "--name", "one", stdin=b"a\nb\n")
        assert first.code == 0, first.err
        second = dafka("produce", "t", *join, "--name", "two", "--flush-timeout", "3", stdin=b"c\n")
        assert second.code != 0, second.err
        assert _store_counter(metrics + 1, "partitions_refused") >= 1
        read = dafka("consume", "t", *join, "--earliest", "-e")
        assert read.out.splitlines() == [b"a", b"b"]


def test_pipeline_takes_the_key_flags_and_checks_them_first(tmp_path: Path) -> None:
    done = dafka("pipeline", "--data", str(tmp_path), "--key", str(tmp_path / "missing"))
    assert done.code == 2, done.err
    assert "--authorized-keys" in done.err
    assert "Traceback" not in done.err
