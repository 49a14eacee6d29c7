"""``dafka tower`` and ``dafka store`` as daemons: ready lines, clean stops, a final flush.

Both log a ready line (the fixtures wait for it and read the ports from it). SIGTERM and
SIGINT stop them within a few seconds with exit code 0. A store flushes before it exits: with
``--fsync records:1000`` a partition is synced (and ACKed) only once it holds 1,000 unsynced
records, so the last of the producer's 1,500 records normally wait, unsynced, for the stop.
Watching the store's own ACKs, its last ACK must then cover everything its log holds, and
everything ACKed must be readable from the data directory and from the restarted store.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from dafka.client import Consumer
from dafka.node import ConsumerConfig
from tests.integration.cluster.cluster_client import payload, transport
from tests.integration.cluster.cluster_probe import AckWatch, check_partition, read_log
from tests.integration.cluster.cluster_procs import DEADLINE, Processes, wait_until

TOPIC = "daemons"
RECORDS = 1_500
STOP_WITHIN = 5.0


def stop_timed(proc_stop: float) -> None:
    assert time.monotonic() - proc_stop < STOP_WITHIN, f"took more than {STOP_WITHIN}s to stop"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_daemons_stop_cleanly_and_the_store_flushes(
    procs: Processes, tmp_path: Path, signum: int
) -> None:
    tower = procs.tower()
    store = procs.store(tmp_path / "store", [tower], fsync="records:1000")
    watch = AckWatch(store.writer_port)
    try:
        producer = procs.client("producer", "produce", [tower], TOPIC, "--records", str(RECORDS))
        pid = producer.wait_event("ready")["id"]
        key = (TOPIC, pid)
        # The first thousand-odd records are synced by count and ACKed; the rest wait.
        wait_until(lambda: watch.pump().get(key, -1) >= 999, "the first sync by count")

        started = time.monotonic()
        assert store.proc.stop(signum) == 0, store.proc.tail()
        stop_timed(started)
        on_disk = read_log(store.data_dir)[key]
        check_partition(on_disk, len(on_disk))
        # The flush at stop made everything the store held durable, and ACKed it.
        last_ack = len(on_disk) - 1
        wait_until(lambda: watch.pump()[key] == last_ack, f"the store's final ACK of {last_ack}")
    finally:
        watch.close()

    # The restarted store serves them: all of them, ACKed before the stop or fetched since.
    store = procs.store(store.data_dir, [tower])
    config = ConsumerConfig(offset_reset="earliest")
    got: list[int] = []
    with Consumer(TOPIC, transport=transport([tower.spec], 0.2), config=config) as consumer:
        deadline = time.monotonic() + DEADLINE
        while len(got) < RECORDS and time.monotonic() < deadline:
            for record in consumer.poll(timeout=0.5):
                assert record.value == payload(record.offset)
                got.append(record.offset)
    assert got == list(range(RECORDS))
    # Whatever the stopped store had not received, the restarted one fetched from the producer.
    assert producer.wait_exit() == 0, procs.describe()
    assert producer.require("done")["acked"] == RECORDS

    for proc in (store.proc, tower.proc):
        started = time.monotonic()
        assert proc.stop(signum) == 0, proc.tail()
        stop_timed(started)
    assert "signal" in tower.proc.stderr(), "the tower logs why it stops"
