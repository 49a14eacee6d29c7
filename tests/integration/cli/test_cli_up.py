"""``dafka up`` and ``LocalCluster``: one process per member, supervised."""

from __future__ import annotations

import json
import os
import re
import signal
import urllib.request
from pathlib import Path

import pytest

from dafka.client import Consumer, PartitionProducer
from dafka.errors import NodeFailedError
from dafka.node import ConsumerConfig
from dafka.server import ClusterError, LocalCluster, free_port_pair
from dafka.server._processes import GIVE_UP_AFTER
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


def _break_data_dir(data: Path) -> None:
    """Put a plain file where a store's data directory is: every start of it fails."""
    data.rename(data.with_name(data.name + ".moved"))
    data.write_bytes(b"not a directory")


def test_up_gives_up_on_a_store_that_keeps_dying_young_and_exits_1_saying_why(
    procs: Processes, tmp_path: Path
) -> None:
    port = free_port_pair()
    up = procs.spawn(
        "up",
        [*DAFKA, "up", "--stores", "1", "--port", str(port), "--data", str(tmp_path / "d")],
    )
    pid = int(up.wait_log(_STORE_LINE).group(1))
    _break_data_dir(tmp_path / "d" / "store-0")
    os.kill(pid, signal.SIGKILL)  # restarted into a data directory it cannot open
    assert up.wait_exit(timeout=120) == 1  # before: restarted every 10 s, for ever
    err = up.stderr()
    assert f"store-0 died {GIVE_UP_AFTER} times in a row" in err
    assert "is not a directory" in err  # the member's own last lines say why
    # the kill after ready does not count: GIVE_UP_AFTER deaths before ready, the last not
    # restarted
    assert err.count("exited with code 2; restarting") == GIVE_UP_AFTER - 1


def test_local_cluster_kills_it_asked_for_are_no_crash_loop_but_a_broken_store_is(
    tmp_path: Path,
) -> None:
    failures: list[NodeFailedError] = []
    with LocalCluster(tmp_path, stores=1, on_failure=failures.append) as cluster:
        for restart in range(1, GIVE_UP_AFTER + 1):  # each young, each asked for
            cluster.kill("store-0")
            cluster.wait_restarted("store-0", restart)
        assert cluster.failure is None
        assert failures == []
        assert cluster.stores[0].running

        _break_data_dir(tmp_path / "store-0")
        pid = cluster.stores[0].pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # not through the cluster: the member's own death
        with pytest.raises(ClusterError, match=f"died {GIVE_UP_AFTER} times in a row"):
            cluster.wait_restarted("store-0", GIVE_UP_AFTER + GIVE_UP_AFTER, timeout=120)
        assert failures == [cluster.failure]
        assert "is not a directory" in str(cluster.failure)
        assert not cluster.stores[0].running


def test_local_cluster_restarts_a_store_that_dies_after_it_was_ready_however_often(
    tmp_path: Path,
) -> None:
    """A store that was ready and then dies (a crash while serving: SIGKILL here, libzmq's
    abort that a stranger can set off on a plaintext node, docs/nodes.md) started fine: it
    is no member that cannot start. Giving up on it after 5 such deaths let a stranger who
    can crash a store end a whole `dafka up` cluster (098b4df gave up here)."""
    failures: list[NodeFailedError] = []
    with LocalCluster(tmp_path, stores=1, on_failure=failures.append) as cluster:
        for restart in range(1, GIVE_UP_AFTER + 2):  # each young, each after ready
            pid = cluster.stores[0].pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)  # not through the cluster: the member's own death
            cluster.wait_restarted("store-0", restart)
        assert cluster.failure is None
        assert failures == []
        assert cluster.stores[0].running
