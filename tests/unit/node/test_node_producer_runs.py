"""ProducerMachine.publish_many: a run of records is exactly what as many publish calls give."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dafka.node import BackpressureError, ProducerConfig, ProducerMachine, SendRecords
from dafka.protocol import Ack, Fetch, Record, StoreHello
from dafka.testing import ScriptedPeer

PID = "0123ABCD456789EF0123456789ABCDEF"


def one_by_one(machine: ProducerMachine, contents: list[bytes], now: float) -> int:
    published = 0
    for content in contents:
        try:
            machine.publish(content, now)
        except BackpressureError:
            break
        published += 1
    return published


contents_lists = st.lists(st.binary(max_size=40), max_size=30)


@settings(max_examples=200, deadline=None)
@given(
    before=contents_lists,
    acked=st.integers(min_value=-1, max_value=40),
    run=contents_lists,
    max_records=st.integers(min_value=1, max_value=40),
    max_bytes=st.integers(min_value=1, max_value=600),
)
def test_publish_many_equals_publish_one_by_one(
    before: list[bytes], acked: int, run: list[bytes], max_records: int, max_bytes: int
) -> None:
    """Same prefix admitted at the bounds, same sequences, same RECORDs on the wire, same
    held records (FETCH answers) and counters, whatever was held before."""
    config = ProducerConfig(max_unacked_records=max_records, max_unacked_bytes=max_bytes)
    machines = [ProducerMachine("hello", PID, config) for _ in range(2)]
    peers = [ScriptedPeer(m) for m in machines]
    for machine, peer in zip(machines, peers, strict=True):
        one_by_one(machine, before, 0.0)
        if acked >= 0:
            machine.on_message(StoreHello(PID, "STORE"), 0.0)
            machine.on_ack(Ack(PID, "hello", acked), 0.0, "STORE")
        sent(peer)
    bulk, single = machines
    first = bulk.next_sequence
    published = bulk.publish_many(list(run), 1.0)
    assert published == one_by_one(single, run, 1.0)
    assert bulk.next_sequence == single.next_sequence == first + published
    bulk_sent, single_sent = (sent(peer) for peer in peers)
    assert bulk_sent == single_sent
    assert bulk_sent == [
        Record("hello", PID, first + i, content) for i, content in enumerate(run[:published])
    ]
    assert bulk.statistics() == single.statistics()
    fetch = Fetch(PID, "FEEDFACEFEEDFACEFEEDFACEFEEDFACE", "hello", 0, 100)
    for machine in machines:
        machine.on_message(fetch, 2.0)
    answers = sent(peers[0])
    assert answers == sent(peers[1])
    assert len(answers) == bulk.unacked  # every held record, the run's included


def sent(peer: ScriptedPeer) -> list[object]:
    peer.drain()
    return list(peer.recv_all())


def test_publish_many_is_one_action_for_the_run() -> None:
    machine = ProducerMachine("hello", PID)
    assert machine.publish_many([b"a", b"b", b"c"], 0.0) == 3
    assert machine.publish_many([], 0.0) == 0
    actions = [a for a in machine.take_actions() if isinstance(a, SendRecords)]
    assert actions == [SendRecords("hello", PID, 0, [b"a", b"b", b"c"])]
    assert actions[0].messages() == [
        Record("hello", PID, 0, b"a"),
        Record("hello", PID, 1, b"b"),
        Record("hello", PID, 2, b"c"),
    ]
    assert machine.unacked == 3
    assert machine.next_deadline() is not None  # the HEAD clock started, as with publish


def test_publish_many_at_the_record_bound_takes_a_prefix_and_never_raises() -> None:
    machine = ProducerMachine("hello", PID, ProducerConfig(max_unacked_records=2))
    assert machine.publish_many([b"a", b"b", b"c"], 0.0) == 2
    assert machine.publish_many([b"d"], 0.0) == 0
    machine.on_message(StoreHello(PID, "STORE"), 0.0)
    machine.on_ack(Ack(PID, "hello", 0), 0.0, "STORE")
    assert machine.publish_many([b"d", b"e"], 0.0) == 1
    assert machine.next_sequence == 3
