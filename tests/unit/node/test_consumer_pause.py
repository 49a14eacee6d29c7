"""ConsumerMachine.pause/resume: a paused partition is not read (no FETCH, records dropped),
others go on; resume reads on from where it stopped, what it missed fetched."""

from __future__ import annotations

from dafka.node import ConsumerConfig, ConsumerMachine, FetchPolicy
from dafka.protocol import DirectHead, DirectRecord, Fetch, GetHeads, Head, Record
from dafka.testing import ScriptedPeer

CID = "C0C0C0C0C0C0C0C0C0C0C0C0C0C0C0C0"


def make() -> tuple[ConsumerMachine, ScriptedPeer]:
    config = ConsumerConfig(
        offset_reset="earliest",
        fetch=FetchPolicy(window=100, retry_initial=0.5, retry_max=5.0),
        heads_refresh=None,
        latest_settle=0.0,
    )
    consumer = ConsumerMachine(CID, config)
    return consumer, ScriptedPeer(consumer)


def sequences(peer: ScriptedPeer, producer: str) -> list[int]:
    return [d.sequence for d in peer.delivered if d.producer == producer]


def test_a_paused_partition_is_not_read_and_resumes_where_it_stopped() -> None:
    consumer, peer = make()
    consumer.subscribe("t", peer.clock.now)
    peer.drain()
    peer.expect(GetHeads)
    peer.send(Record("t", "A", 0, b"a0"), Record("t", "B", 0, b"b0"))
    consumer.pause("t", "A", peer.clock.now)
    assert consumer.paused() == (("t", "A"),)
    peer.send(Record("t", "A", 1, b"a1"), Record("t", "B", 1, b"b1"), Head("t", "A", 5))
    peer.advance(10.0)  # no FETCH for A, not even a retry
    assert not [m for m in peer.recv_all() if isinstance(m, Fetch)]
    assert sequences(peer, "A") == [0]
    assert sequences(peer, "B") == [0, 1]
    assert consumer.statistics().dropped_paused == 1
    assert consumer.heads()[("t", "A")] == 5  # still known, with its position
    assert consumer.positions()[("t", "A")].next_sequence == 1
    assert consumer.at_end(peer.clock.now)  # a paused partition does not hold the end
    consumer.resume("t", "A", peer.clock.now)
    peer.drain()
    fetch = peer.expect(Fetch)
    assert (fetch.producer, fetch.sequence, fetch.count) == ("A", 1, 5)
    peer.send(*(DirectRecord(CID, "t", "A", s, b"a") for s in range(1, 6)))
    assert sequences(peer, "A") == [0, 1, 2, 3, 4, 5]
    assert consumer.paused() == ()


def test_pause_before_the_partition_is_known_and_seek_while_paused() -> None:
    consumer, peer = make()
    consumer.subscribe("t", peer.clock.now)
    consumer.pause("t", "A", peer.clock.now)
    peer.drain()
    peer.send(DirectHead(CID, "t", "A", 9), Record("t", "A", 10, b"x"))
    assert sequences(peer, "A") == []
    assert not [m for m in peer.recv_all() if isinstance(m, Fetch)]
    assert consumer.heads() == {("t", "A"): 10}
    consumer.seek("t", "A", 7, peer.clock.now)
    consumer.resume("t", "A", peer.clock.now)
    peer.drain()
    fetch = peer.expect(Fetch)
    assert (fetch.sequence, fetch.count) == (7, 4)


def test_unsubscribe_forgets_paused_partitions() -> None:
    consumer, peer = make()
    consumer.subscribe("t", peer.clock.now)
    peer.send(Record("t", "A", 0, b"a0"))
    consumer.pause("t", "A", peer.clock.now)
    consumer.unsubscribe("t", peer.clock.now)
    assert consumer.paused() == ()
    assert consumer.positions() == {}
