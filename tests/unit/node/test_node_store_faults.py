"""StoreMachine under storage faults: a failed append and a cut log heal without a restart."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from dafka.node import StoreConfig, StoreMachine
from dafka.protocol import Ack, DirectHead, DirectRecord, Fetch, GetHeads, Head, Record
from dafka.storage import StorageIOError
from dafka.testing import MemoryLog, ScriptedPeer

WID = "57000000000000000000000000000001"
RID = "52000000000000000000000000000002"
P = "5C21B7E0A3F94D6C8E1F0A2B3C4D5E6F"  # the ScriptedPeer's id: the producer


class FlakyLog(MemoryLog):
    """A MemoryLog whose appends fail while ``full`` (as the engine's do on ENOSPC)."""

    full = False
    failed = 0

    def append(
        self,
        topic: str,
        partition: str,
        first: int,
        payloads: Sequence[bytes],
        *,
        after_gap: bool = False,
    ) -> int:
        if self.full:
            self.failed += 1
            raise StorageIOError("No space left on device")
        return super().append(topic, partition, first, payloads, after_gap=after_gap)

    def cut(self, topic: str, partition: str, head: int) -> None:
        end = self.head(topic, partition)
        assert end is not None
        self.punch(topic, partition, head + 1, end + 1)


def setup() -> tuple[StoreMachine, ScriptedPeer, FlakyLog]:
    log = FlakyLog()
    store = StoreMachine(WID, RID, log, StoreConfig(heads_refresh=None))
    peer = ScriptedPeer(store)  # Persists are executed by persist() below
    return store, peer, log


def persist(store: StoreMachine, peer: ScriptedPeer, log: FlakyLog) -> None:
    """The driver's part: run the Persists, report durable or failed with the true head."""
    actions, peer.persisted[:] = list(peer.persisted), []
    for action in actions:
        try:
            last = log.append(action.topic, action.producer, action.first_sequence, action.contents)
        except StorageIOError:
            head = log.head(action.topic, action.producer)
            store.on_append_failed(
                action.topic, action.producer, -1 if head is None else head, peer.clock.now
            )
        else:
            store.on_durable(action.topic, action.producer, last, peer.clock.now)
    peer.drain()


def records(first: int, stop: int) -> list[Record]:
    return [Record("t", P, s, b"r%d" % s) for s in range(first, stop)]


def answer(fetch: Fetch, stop: int) -> list[DirectRecord]:
    end = min(fetch.sequence + fetch.count, stop)
    return [DirectRecord(WID, "t", P, s, b"r%d" % s) for s in range(fetch.sequence, end)]


def test_a_failed_append_stops_acks_backs_off_and_heals_by_refetching() -> None:
    store, peer, log = setup()
    peer.send(*records(0, 10))
    persist(store, peer, log)
    assert peer.recv_all() == [Ack(P, "t", 9)]

    log.full = True
    peer.send(*records(10, 20))
    persist(store, peer, log)
    assert log.failed == 1
    stats = store.statistics()
    assert (stats.append_failures, stats.partitions_blocked, stats.dropped_unpersisted) == (
        1,
        1,
        10,
    )
    assert peer.recv_all() == []  # nothing ACKed past what the log holds

    peer.send(*records(20, 25), Head("t", P, 24))  # during the backoff: not even tried
    persist(store, peer, log)
    assert log.failed == 1
    assert peer.recv_all() == []  # no FETCH during the backoff either
    peer.send(Head("t", P, 5))
    assert peer.recv_all() == [Ack(P, "t", 9)]  # the truth is still ACKed again
    assert store.next_deadline() == pytest.approx(0.25)

    peer.advance(0.25)  # the backoff is over: fetch what was dropped (the retry)
    fetch = peer.expect(Fetch)
    assert (fetch.requester, fetch.sequence, fetch.count) == (WID, 10, 15)
    peer.send(*answer(fetch, 25))
    persist(store, peer, log)  # still full: fails again, the backoff doubles
    assert log.failed == 2
    assert store.next_deadline() == pytest.approx(0.25 + 0.5)
    assert peer.recv_all() == []

    log.full = False
    peer.advance(0.5)
    fetch = peer.expect(Fetch)
    assert (fetch.sequence, fetch.count) == (10, 15)
    peer.send(*answer(fetch, 25))
    persist(store, peer, log)
    assert peer.recv_all() == [Ack(P, "t", 24)]
    assert log.contents("t", P) == [b"r%d" % s for s in range(25)]
    assert store.statistics().partitions_blocked == 0
    peer.send(*records(25, 30))  # and live records flow again
    persist(store, peer, log)
    assert peer.recv_all() == [Ack(P, "t", 29)]


def test_the_backoff_is_capped_and_restarts_after_a_success() -> None:
    store, peer, log = setup()
    peer.send(*records(0, 1))
    persist(store, peer, log)
    peer.recv_all()
    log.full = True
    delays = []
    for _ in range(8):
        now = peer.clock.now
        peer.send(Head("t", P, 50))
        fetch_or_records = records(1, 5)
        peer.send(*fetch_or_records)
        persist(store, peer, log)
        due = store.next_deadline()
        assert due is not None
        delays.append(round(due - now, 6))
        peer.advance(due - now)
        peer.recv_all()
    assert delays[:6] == [0.25, 0.5, 1.0, 2.0, 4.0, 5.0]
    assert delays[-1] == 5.0


def test_a_cut_log_goes_back_to_its_true_head_and_refetches_the_lost_range() -> None:
    log = FlakyLog()
    log.append("t", P, 0, [b"r%d" % s for s in range(100)])
    store = StoreMachine(WID, RID, log, StoreConfig(heads_refresh=None))
    peer = ScriptedPeer(store)
    assert [type(m) for m in peer.recv_all()] == [GetHeads]
    log.cut("t", P, 49)  # what a read that met a corrupt record does
    store.on_truncated("t", P, 49, peer.clock.now)
    peer.drain()
    fetch = peer.expect(Fetch)
    assert (fetch.requester, fetch.sequence, fetch.count) == (WID, 50, 50)
    assert store.durable_heads() == {("t", P): 49}
    assert store.statistics().truncations == 1
    peer.send(GetHeads("t", "SOMEONE"))
    assert peer.recv_all() == [DirectHead("SOMEONE", "t", P, 49)]  # the true head
    peer.send(*answer(fetch, 100))
    persist(store, peer, log)
    assert peer.recv_all() == [Ack(P, "t", 99)]
    assert log.contents("t", P) == [b"r%d" % s for s in range(100)]


def test_a_cut_to_empty_refetches_from_zero() -> None:
    log = FlakyLog()
    log.append("t", P, 0, [b"r%d" % s for s in range(10)])
    store = StoreMachine(WID, RID, log, StoreConfig(heads_refresh=None))
    peer = ScriptedPeer(store)
    peer.recv_all()
    log.clear()
    store.on_truncated("t", P, -1, peer.clock.now)
    peer.drain()
    fetch = peer.expect(Fetch)
    assert (fetch.sequence, fetch.count) == (0, 10)
    assert store.durable_heads() == {}
