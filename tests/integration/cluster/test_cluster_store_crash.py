"""A store killed with SIGKILL while records flow keeps what it ACKed and catches up.

Two stores; a producer publishes at a steady pace. We watch store A's own ACKs on its writer
port (ACKs carry no store identity, so the producer's ``acked`` count alone cannot say which
store ACKed) and SIGKILL A mid-stream, before the producer publishes its second half. On A's
data directory, everything A ever ACKed must be there: ACKs cover durable records only. The
producer goes on with store B, flushes and exits; A restarts on the same directory and can
then catch up only from B. Finally both logs are identical and complete.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.cluster.cluster_probe import (
    AckWatch,
    check_partition,
    read_log,
    stopped_logs,
    wait_heads,
)
from tests.integration.cluster.cluster_procs import DEADLINE, Processes, wait_until

TOPIC = "crash"
RECORDS = 60_000
PAUSE_AT = 30_000


@pytest.mark.timeout(180)
def test_killed_store_keeps_acked_records_and_catches_up(procs: Processes, tmp_path: Path) -> None:
    tower = procs.tower()
    store_a = procs.store(tmp_path / "a", [tower], name="store-a")
    store_b = procs.store(tmp_path / "b", [tower], name="store-b")
    watch, watch_b = AckWatch(store_a.writer_port), AckWatch(store_b.writer_port)
    try:
        # The producer stops at PAUSE_AT until A is dead, so the records after it go to B
        # alone and A must catch up: at 15,000/s it had published all 60,000 before both
        # stores ACKed 10,000 at load ~30 (its ACKs lagged 46,000 behind), and A could have
        # stored all of them before the kill.
        producer = procs.client(
            "producer",
            "produce",
            [tower],
            TOPIC,
            "--records",
            str(RECORDS),
            "--rate",
            "15000",
            "--pause-at",
            str(PAUSE_AT),
        )
        pid = producer.wait_event("ready")["id"]
        key = (TOPIC, pid)
        # B too must have ACKed a contiguous start: a record that only A held (B missed it
        # while joining) and that the producer released on A's ACK would be gone with A,
        # and the producer could not finish before A came back.
        wait_until(
            lambda: min(watch.pump().get(key, -1), watch_b.pump().get(key, -1)) >= 10_000,
            "both stores to ACK 10,000 records",
        )
        store_a.proc.kill()  # SIGKILL
        acked_by_a = watch.pump()[key]
    finally:
        watch.close()
        watch_b.close()
    producer.wait_event("paused")
    producer.send_line("go")  # the rest of the records, with A dead

    # Everything A ACKed is on its disk (the process is dead: its lock is gone).
    on_disk = read_log(store_a.data_dir)[key]
    assert len(on_disk) >= acked_by_a + 1, f"A ACKed {acked_by_a} but holds {len(on_disk)}"
    check_partition(on_disk, len(on_disk))

    # The producer finishes with B alone and leaves: its records now live only in the stores.
    assert producer.wait_exit(DEADLINE) == 0, procs.describe()
    assert producer.require("done")["acked"] == RECORDS
    assert len(on_disk) < RECORDS, "A must have something to catch up"

    store_a = procs.store(store_a.data_dir, [tower], name="store-a")
    wait_heads(tower, [store_a, store_b], TOPIC, {pid: RECORDS - 1}, procs.describe)
    log = stopped_logs([store_a, store_b])
    check_partition(log[key], RECORDS)
