"""A fenced producer: ACKs name the run of the record they acknowledge.

Two runs of one named producer alive at once (a zombie predecessor, two Spark task attempts
writing one partition): the stores take the newer run's records from its start and refuse
the older's, so an ACK through N sent for the newer run's record N must never release the
older run's record N - the older run would report delivered a record no store holds
(docs/guarantees.md, "A fenced producer").
"""

from __future__ import annotations

from dafka.node import ProducerMachine, StoreConfig, StoreMachine
from dafka.protocol import Ack, GetHeads, Record, StoreHello
from dafka.testing import MemoryLog, ScriptedPeer

WID = "57000000000000000000000000000001"
RID = "52000000000000000000000000000002"
T, P = "hello", "w.0"


def a_store() -> ScriptedPeer:
    log = MemoryLog()
    store = StoreMachine(WID, RID, log, StoreConfig(heads_refresh=None))
    peer = ScriptedPeer(store, log=log)
    assert all(isinstance(m, GetHeads) for m in peer.recv_all())
    return peer


def acks(peer: ScriptedPeer, *records: Record) -> list[Ack]:
    peer.send(*records)
    return [m for m in peer.recv_all() if isinstance(m, Ack)]


def greeted(machine: ProducerMachine) -> ProducerMachine:
    machine.on_message(StoreHello(P, WID), 0.0)
    machine.take_actions()
    return machine


def test_an_ack_of_the_newer_run_fences_the_older_run_and_releases_nothing() -> None:
    old = greeted(ProducerMachine(T, P, epoch=1, next_sequence=0))
    new = greeted(ProducerMachine(T, P, epoch=2, next_sequence=3))
    old_records = [Record(T, P, s, f"g1:{s}".encode(), 1, 0) for s in range(6)]
    for record in old_records:
        old.publish(record.content, 0.0)
    new_records = [Record(T, P, s, f"g2:{s}".encode(), 2, 3) for s in range(3, 6)]
    for record in new_records:
        new.publish(record.content, 0.0)
    # the store took run 1's 0..2, then run 2 from 3 on (run 1's 3..5 never reached it)
    store = a_store()
    first = acks(store, *old_records[:3])
    assert first[-1] == Ack(P, T, 2, 1, 0)
    second = acks(store, *new_records)
    assert second[-1] == Ack(P, T, 5, 2, 3)
    for ack in first + second:
        old.on_ack(ack, 1.0, WID)
        new.on_ack(ack, 1.0, WID)
    assert new.unacked == 0  # its own run's ACKs count
    assert old.unacked == 3  # 3..5 are run 2's in the store: never reported stored
    assert old.fenced_by == (2, 3)
    assert old.statistics().fenced_by == (2, 3)
    assert old.statistics().acks_other_run >= 1
    assert "newer than this producer's run (epoch 1, start 0): this run is fenced" in (
        old.last_rejection
    )


def test_an_ack_without_a_run_counts_as_before() -> None:
    """A C store's ACK names no run: counted, as before run epochs."""
    machine = greeted(ProducerMachine(T, P, epoch=4, next_sequence=10))
    machine.publish(b"x", 0.0)
    machine.on_ack(Ack(P, T, 10), 1.0, WID)
    assert machine.unacked == 0
    assert machine.fenced_by is None


def test_an_ack_of_an_older_run_is_not_counted_and_does_not_fence() -> None:
    machine = greeted(ProducerMachine(T, P, epoch=4, next_sequence=10))
    machine.publish(b"x", 0.0)
    machine.on_ack(Ack(P, T, 10, 3, 0), 1.0, WID)  # a store that has not seen run 4 yet
    assert machine.unacked == 1
    assert machine.fenced_by is None
    assert machine.statistics().acks_other_run == 1
