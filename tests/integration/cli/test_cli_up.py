"""``dafka up`` and ``LocalCluster``: one process per member, supervised."""

from __future__ import annotations

import json
import os
import re
import signal
import urllib.request
from pathlib import Path

from dafka.client import Consumer, PartitionProducer
from dafka.node import ConsumerConfig
from dafka.server import LocalCluster, free_port_pair
from tests.integration.cluster.cluster_procs import DAFKA, Processes, wait_until

_STORE_LINE = re.compile(r"store-0: pid (\d+), data \S+, writer :(\d+), reader :(\d+)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_up_restarts_a_killed_store_and_stops_all_on_ctrl_c(
    procs: Processes, tmp_path: Path
) -> None:
    port, metrics = free_port_pair(), free_port_pair()
    up = procs.spawn(
        "up",
        [
            *DAFKA,
            "up",
            "--stores",
            "2",
            "--port",
            str(port),
            "--data",
            str(tmp_path / "d"),
            "--metrics-port",
            str(metrics),
            "--log-format",
            "json",
        ],
    )
    first = up.wait_log(_STORE_LINE)
    pid = int(first.group(1))
    assert f"tower 127.0.0.1:{port}" in up.stderr()
    assert pid != up.pid
    assert _alive(pid)

    os.kill(pid, signal.SIGKILL)
    up.wait_log(re.compile(rf"store-0 \(pid {pid}\) exited with code -9; restarting"))
    restarted = up.wait_log(re.compile(r"store-0 restarted \(pid (\d+), restart 1\)"))
    new_pid = int(restarted.group(1))
    assert new_pid != pid
    # It came back ready, with the same node ids (same data directory).
    wait_until(lambda: _ready_count(up.stderr()) >= 2, "store-0 ready again")

    children = [new_pid, *[int(p) for p in re.findall(r"store-1: pid (\d+)", up.stderr())]]
    # Children log JSON lines (prefixed with their name by the supervisor).
    line = next(x for x in up.stderr().splitlines() if x.startswith("store-1 | {"))
    assert json.loads(line.split(" | ", 1)[1])["level"] == "info"
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/healthz", timeout=5) as reply:
        assert reply.read() == b"ok\n"  # the tower's metrics port
    assert up.stop(signal.SIGINT) == 0
    wait_until(lambda: not any(_alive(c) for c in children), "every member gone", timeout=10)


def _ready_count(stderr: str) -> int:
    return len(re.findall(r"store-0 \| .* ready \(writer", stderr))


def test_local_cluster_serves_clients_and_restarts_a_store(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, stores=1, beacon_interval=0.2) as cluster:
        store = cluster.stores[0]
        assert store.running
        assert store.pid != os.getpid()
        with PartitionProducer("t", cluster.transport) as producer:
            for i in range(100):
                producer.publish(b"%d" % i)
            assert producer.flush(30)
        cluster.kill("store-0")
        cluster.wait_restarted("store-0", 1)
        with Consumer(
            "t", transport=cluster.transport, config=ConsumerConfig(offset_reset="earliest")
        ) as c:
            got: list[bytes] = []
            deadline_rounds = 60
            while len(got) < 100 and deadline_rounds:
                got += [r.value for r in c.poll(timeout=1.0)]
                deadline_rounds -= 1
        assert got == [b"%d" % i for i in range(100)]
