"""ConsumerMachine and producer runs (docs/guarantees.md, "A reused sequence: run epochs").

A consumer that knows a newer run drops an older run's records from that run's start on (a
lagging store's, or a zombie's); one that delivered an older run's records where a newer run
resumed reads the partition again from that start, so that the newer run's (acknowledged)
records are delivered at those offsets, not dropped as duplicates.
"""

from __future__ import annotations

from dafka.node import ConsumerConfig, ConsumerMachine, FetchPolicy
from dafka.protocol import DirectRecord, Fetch, GetHeads, Head, Record
from dafka.testing import ScriptedPeer

CID = "C0C0C0C0C0C0C0C0C0C0C0C0C0C0C0C0"
T, P = "hello", "w.0"


def make() -> tuple[ConsumerMachine, ScriptedPeer]:
    policy = FetchPolicy(window=10_000, retry_initial=0.5, retry_max=5.0)
    consumer = ConsumerMachine(CID, ConsumerConfig(offset_reset="earliest", fetch=policy))
    peer = ScriptedPeer(consumer)
    consumer.subscribe(T, peer.clock.now)
    peer.drain()
    peer.expect(GetHeads)
    return consumer, peer


def records(run: str, epoch: int, start: int, first: int, end: int) -> list[Record]:
    return [Record(T, P, s, f"{run}:{s}".encode(), epoch, start) for s in range(first, end)]


def delivered(peer: ScriptedPeer) -> list[tuple[int, bytes]]:
    return [(d.sequence, d.content) for d in peer.delivered]


def test_a_newer_run_that_resumed_below_what_was_delivered_is_read_from_its_start() -> None:
    """Run 1's records 3..5 were delivered live and never acknowledged; run 2 resumed at 3:
    its records at 3.. are delivered too (before, they were dropped as duplicates and the
    acknowledged records never reached this consumer)."""
    consumer, peer = make()
    peer.send(*records("g1", 1, 0, 0, 6))
    peer.send(*records("g2", 2, 3, 3, 6))
    assert delivered(peer) == [
        *[(s, f"g1:{s}".encode()) for s in range(6)],
        *[(s, f"g2:{s}".encode()) for s in range(3, 6)],
    ]
    assert consumer.statistics().records_replaced == 3


def test_the_newer_runs_head_rewinds_and_its_records_are_fetched() -> None:
    consumer, peer = make()
    peer.send(*records("g1", 1, 0, 0, 6))
    peer.recv_all()
    peer.send(Head(T, P, 4, 2, 3))  # run 2 resumed at 3 and published 3..4
    fetches = [m for m in peer.recv_all() if isinstance(m, Fetch)]
    assert fetches
    assert fetches[0].sequence == 3
    peer.send(*[DirectRecord(CID, T, P, s, f"g2:{s}".encode(), 2, 3) for s in (3, 4)])
    assert delivered(peer)[-2:] == [(3, b"g2:3"), (4, b"g2:4")]
    assert consumer.statistics().records_replaced == 3


def test_an_older_runs_records_past_a_newer_runs_start_are_never_delivered() -> None:
    """A lagging store answers a FETCH with run 1's records where run 2 resumed."""
    consumer, peer = make()
    peer.send(*records("g1", 1, 0, 0, 3), *records("g2", 2, 3, 3, 4))
    peer.send(*[DirectRecord(CID, T, P, s, f"g1:{s}".encode(), 1, 0) for s in range(4, 7)])
    peer.send(Record(T, P, 4, b"g1:4", 1, 0))  # a zombie of run 1
    assert delivered(peer) == [(0, b"g1:0"), (1, b"g1:1"), (2, b"g1:2"), (3, b"g2:3")]
    assert consumer.statistics().records_fenced == 4
    assert consumer.statistics().records_replaced == 0


def test_records_without_a_run_are_read_as_before() -> None:
    consumer, peer = make()
    peer.send(Record(T, P, 0, b"c:0"), *records("g1", 1, 0, 1, 3), Record(T, P, 3, b"c:3"))
    assert [s for s, _ in delivered(peer)] == [0, 1, 2, 3]
    assert consumer.statistics().records_fenced == 0
