"""Issue 8 item 5: the tower is for discovery, not for data.

A tower, a store, a producer and a consumer run as processes. Mid-stream every tower is
killed (SIGKILL): the producer and consumer keep exchanging data for several beacon
timeouts (before, they "lost" each other ~4 s later). A tower restarted on the same ports
lets a new consumer join and read everything.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dafka.server import free_port_pair
from tests.integration.cluster.cluster_procs import (
    _TOWER_READY,
    BEACON_INTERVAL,
    DAFKA,
    DEADLINE,
    Processes,
    TowerProc,
    wait_until,
)

TOPIC = "tower-down"
RECORDS = 30_000
RATE = 2_000
DOWN_FOR = 8 * 4 * float(BEACON_INTERVAL)
"""The tower stays dead for 8 beacon timeouts (timeout = 4 intervals)."""


def start_tower(procs: Processes, port: int) -> TowerProc:
    sub, pub = f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 1}"
    proc = procs.spawn("tower", [*DAFKA, "tower", "--sub", sub, "--pub", pub])
    proc.wait_log(_TOWER_READY)
    return TowerProc(proc, sub, pub)


def received(proc_events: list[dict[str, object]]) -> int:
    counts = [int(str(e["received"])) for e in proc_events if e["event"] == "progress"]
    return counts[-1] if counts else 0


@pytest.mark.timeout(240)
def test_the_flow_goes_on_without_towers_and_a_restarted_tower_lets_nodes_join(
    procs: Processes, tmp_path: Path
) -> None:
    port = free_port_pair()
    tower = start_tower(procs, port)
    procs.store(tmp_path / "store", [tower])
    consumer = procs.client("consumer", "consume", [tower], TOPIC, "--expect", str(RECORDS))
    consumer.wait_event("ready")
    producer = procs.client(
        "producer", "produce", [tower], TOPIC, "--records", str(RECORDS), "--rate", str(RATE)
    )
    consumer.wait_event("progress", lambda e: int(e["received"]) > 2_000)

    tower.proc.kill()
    killed_at = time.monotonic()
    at_kill = received(consumer.events())
    # Records keep arriving for many beacon timeouts with no tower at all.
    wait_until(
        lambda: (
            time.monotonic() - killed_at > DOWN_FOR
            and received(consumer.events()) > at_kill + int(RATE * DOWN_FOR / 2)
        ),
        "records to flow while the tower is down",
    )
    assert producer.running(), producer.tail()
    assert consumer.running(), consumer.tail()

    restarted = start_tower(procs, port)
    late = procs.client("late", "consume", [restarted], TOPIC, "--expect", str(RECORDS))
    assert producer.wait_exit(DEADLINE) == 0, procs.describe()
    assert producer.require("done")["acked"] == RECORDS
    for reader in (consumer, late):
        assert reader.wait_exit(DEADLINE) == 0, procs.describe()
        done = reader.require("done")
        assert done["received"] == RECORDS, done
        assert done["error_list"] == [], done
