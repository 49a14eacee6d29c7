"""Issue 19: many new partitions from one peer (record 0 of each) no longer exhaust a
store's descriptors.

A ``dafka store`` runs under a 256-descriptor limit (``prlimit``: the scenario of 100,000
partitions against the usual 20,000-descriptor limit, at a size that runs in seconds); a peer
on real sockets publishes record 0 of 500 new partitions. Before, the store held 2
descriptors per partition and ran out at about 120; after a restart it could not take a new
partition. Now it stores all 500, restarts, and takes one more.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from dafka.protocol import Record
from tests.integration.cluster.cluster_procs import (
    _STORE_READY,
    BEACON_INTERVAL,
    DAFKA,
    DEADLINE,
    Proc,
    Processes,
    TowerProc,
)
from tests.integration.hardening.test_forged_ack import Forger

PARTITIONS = 500
TOPIC = "many"


def _store(procs: Processes, data: Path, tower: TowerProc) -> Proc:
    argv = ["prlimit", "--nofile=256:256", *DAFKA, "store", "--data", str(data)]
    argv += ["--tower", tower.spec, "--advertise", "127.0.0.1", "--bind", "127.0.0.1"]
    proc = procs.spawn("store", [*argv, "--beacon-interval", BEACON_INTERVAL])
    proc.wait_log(_STORE_READY)
    return proc


def _stored(data: Path) -> int:
    return sum(1 for d in (data / "log").glob("*/*") if d.is_dir() and list(d.glob("*.log")))


def _publish_until_stored(forger: Forger, store: Proc, data: Path, partitions: list[str]) -> None:
    records: list[object] = [Record(TOPIC, p, 0, b"record 0") for p in partitions]
    deadline = time.monotonic() + DEADLINE
    want = _stored(data) + len(partitions)
    while _stored(data) < want:
        assert store.running(), store.tail(40)
        assert time.monotonic() < deadline, f"{_stored(data)} of {want} partitions stored"
        sent = forger.sent
        forger.pump(b"M", records)
        if forger.sent > sent:
            records = []  # sent once: a store that lost them would not get them again
        time.sleep(0.05)


@pytest.mark.timeout(240)
def test_record_0_of_many_partitions_from_one_peer(procs: Processes, tmp_path: Path) -> None:
    tower = procs.tower()
    data = tmp_path / "store"
    store = _store(procs, data, tower)
    forger = Forger(tower.sub_endpoint)
    try:
        ids = [uuid.uuid4().hex.upper() for _ in range(PARTITIONS)]
        _publish_until_stored(forger, store, data, ids)
        assert store.stop() == 0, store.tail(40)
        store = _store(procs, data, tower)  # reopens 500 partitions under the same limit
        forger.subscribed.clear()
        _publish_until_stored(forger, store, data, [uuid.uuid4().hex.upper()])
        assert store.running(), store.tail(40)
        assert "Too many open files" not in store.stderr(), store.tail(40)
    finally:
        forger.close()
