"""Issue 8 item 4: ``min_stores`` works.

A tower and two stores run as processes; the producer (this process) asks for
``min_stores=2``. Its runner reads each peer on its own socket, so every ACK names the store
that sent it. With both stores up it flushes; with one killed, records are held (one store's
ACKs are not enough); when the second store comes back on its data directory and catches
up, they are released.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dafka import Producer
from dafka.server import free_port_pair
from tests.integration.cluster.cluster_procs import (
    _TOWER_READY,
    DAFKA,
    DEADLINE,
    Processes,
    TowerProc,
)

TOPIC = "min-stores"
BATCH = 500
HOLD = 3.0
"""Seconds the second batch must stay unreleased with one store (it would take ~10 ms)."""
FAST: dict[str, Any] = {
    "beacon_interval": 0.2,
    "beacon_timeout": 0.8,
    "advertised_host": "127.0.0.1",
    "bind_host": "127.0.0.1",
    "linger_ms": 1,
}


def tower_on_port_pair(procs: Processes) -> tuple[TowerProc, str]:
    port = free_port_pair()
    sub, pub = f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 1}"
    proc = procs.spawn("tower", [*DAFKA, "tower", "--sub", sub, "--pub", pub])
    proc.wait_log(_TOWER_READY)
    return TowerProc(proc, sub, pub), f"127.0.0.1:{port}"


@pytest.mark.timeout(180)
def test_min_stores_two_holds_with_one_store_and_releases_on_catch_up(
    procs: Processes, tmp_path: Path
) -> None:
    tower, towers = tower_on_port_pair(procs)
    procs.store(tmp_path / "a", [tower])
    b = procs.store(tmp_path / "b", [tower])
    with Producer(TOPIC, towers=towers, name="ms", min_stores=2, **FAST) as producer:
        first = [producer.send(b"a%d" % i) for i in range(BATCH)]
        assert producer.flush(DEADLINE) == 0, "two stores up: min_stores=2 must flush"
        assert all(f.result(0).offset >= 0 for f in first)

        b.proc.kill()  # SIGKILL: store B ACKs nothing more
        second = [producer.send(b"b%d" % i) for i in range(BATCH)]
        assert producer.flush(HOLD) == BATCH, "one store's ACKs released records"
        assert not any(f.done() for f in second)

        procs.store(b.data_dir, [tower], name="store-b-again")  # same data, same ids
        assert producer.flush(DEADLINE) == 0, "the second store caught up: release"
        assert all(f.result(0).offset >= 0 for f in second)
