"""A store under the interval fsync reads what arrives within an interval of its last fsync in
one turn (issue 23: the store's CPU per record at 1,000 records/s).

Such records are synced and ACKed at that interval's end whenever they are read
(``Storage._arm``), so the runner leaves the writer's SUB unread until then
(``Persistence.hold_until``, ``_loop.py`` "Holding"): one wake-up, one append and one ACK
instead of one per record. Before, a record every millisecond was a turn of its own - 200
appends for 200 records.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dafka.client import PartitionProducer
from dafka.node import StoreConfig, StoreMachine
from dafka.server import StoreNode, StorePersistence
from dafka.server._persistence import HOLD_SECONDS
from dafka.storage import FsyncPolicy, Storage, StorageConfig
from dafka.testing import ManualClock
from dafka.transport.config import TransportConfig
from tests.integration.loopback import loopback_tower

RECORDS = 200


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[StoreNode, TransportConfig]]:
    """A tower and a store with the default fsync (``ms:5``), in this process."""
    with loopback_tower() as (_, transport):
        store = StoreNode(
            tmp_path / "store",
            transport,
            storage_config=StorageConfig(fsync=FsyncPolicy.interval(5)),
        )
        store.start()
        try:
            yield store, transport
        finally:
            store.stop()


def test_records_a_millisecond_apart_are_appended_and_acked_per_fsync_interval(
    cluster: tuple[StoreNode, TransportConfig],
) -> None:
    store, transport = cluster
    with PartitionProducer("paced", transport) as producer:
        producer.publish(b"first")  # the store has its first record, so it is subscribed
        assert producer.flush(10)
        started = time.monotonic()
        for i in range(RECORDS):  # one RECORD each (a lone record leaves at once)
            producer.publish(b"%05d" % i)
            pause = started + (i + 1) / 1000 - time.monotonic()  # the load: 1,000 records/s
            if pause > 0:
                time.sleep(pause)
        assert producer.flush(10), "not every record was ACKed"
        partition = producer.producer_id
    storage, runner, persistence = store.storage, store.runner, store.persistence
    assert storage is not None
    assert runner is not None
    assert persistence is not None
    stored, appends = runner.call(
        lambda _now: (
            storage.durable_offset("paced", partition),
            persistence.latencies()["append_seconds"].count,
        )
    )
    assert stored == RECORDS  # the first record and the 200 after it, all durable
    print(f"{appends} appends for {RECORDS + 1} records")
    assert appends <= RECORDS // 2, f"{appends} appends for {RECORDS + 1} records: one per record"


@pytest.mark.parametrize(
    ("policy", "held_for"),
    [("ms:5", 0.005), ("ms:2", 0.002), ("ms:50", HOLD_SECONDS), ("batch", None), ("os", None)],
)
def test_the_persistence_holds_an_interval_after_an_fsync_at_most_five_ms(
    tmp_path: Path, policy: str, held_for: float | None
) -> None:
    """A longer interval holds 5 ms only (the records wait in ZeroMQ's queue meanwhile);
    a policy that may sync on an append holds nothing."""
    clock = ManualClock(100.0)
    config = StorageConfig(fsync=FsyncPolicy.parse(policy), clock=clock)
    with Storage.open(tmp_path, config) as storage:
        machine = StoreMachine("57" + "0" * 30, "52" + "0" * 30, storage, StoreConfig())
        persistence = StorePersistence(storage, machine, clock=clock)
        assert persistence.hold_until() is None  # no fsync yet: nothing to wait for
        storage.append("t", "p", 0, [b"r"])
        persistence.report_durable(clock.advance(0.001))
        hold = persistence.hold_until()
        assert (hold is None) if held_for is None else hold == pytest.approx(100.001 + held_for)
