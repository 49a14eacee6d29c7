"""StoreMachine's reader as a consumer sees it: streamed FETCH replies, addressed FETCHes."""

from __future__ import annotations

from dafka.node import StoreConfig, StoreMachine
from dafka.protocol import DirectRecord, Fetch, Record
from dafka.testing import MemoryLog, ScriptedPeer

WID, RID = "W" * 32, "R" * 32


def filled(count: int) -> MemoryLog:
    log = MemoryLog()
    log.append("t", "P", 0, [bytes([i % 256]) for i in range(count)])
    return log


def make(log: MemoryLog, slice_: int = 100) -> tuple[StoreMachine, ScriptedPeer]:
    store = StoreMachine(WID, RID, log, StoreConfig(fetch_reply_slice=slice_, heads_refresh=None))
    peer = ScriptedPeer(store, log=log)
    peer.recv_all()
    return store, peer


def records(peer: ScriptedPeer) -> list[int]:
    return [m.sequence for m in peer.recv_all() if isinstance(m, DirectRecord)]


def test_a_big_reply_streams_in_slices_across_turns() -> None:
    store, peer = make(filled(1000), slice_=300)
    peer.send(Fetch("P", "C", "t", 50, 700))
    assert records(peer) == list(range(50, 350))  # the first slice leaves at once
    assert store.next_deadline() == peer.clock.now  # and asks for another turn now
    assert store.statistics().fetch_replies_pending == 1
    peer.tick()
    assert records(peer) == list(range(350, 650))
    peer.tick()
    assert records(peer) == list(range(650, 750))
    assert store.statistics().fetch_replies_pending == 0
    assert store.next_deadline() is None
    assert store.statistics().records_served == 700


def test_replies_share_the_turn_budget_oldest_first() -> None:
    _, peer = make(filled(1000), slice_=100)
    peer.send(Fetch("P", "A", "t", 0, 150), Fetch("P", "B", "t", 500, 50))
    sent = [(m.recipient, m.sequence) for m in peer.recv_all() if isinstance(m, DirectRecord)]
    assert sent == [("A", s) for s in range(100)]
    peer.tick()
    sent = [(m.recipient, m.sequence) for m in peer.recv_all() if isinstance(m, DirectRecord)]
    assert sent == [("A", s) for s in range(100, 150)] + [("B", s) for s in range(500, 550)]


def test_a_reply_covers_records_taken_in_the_same_turn_once_durable() -> None:
    log = filled(10)
    store = StoreMachine(WID, RID, log, StoreConfig(heads_refresh=None))
    peer = ScriptedPeer(store)  # no log: persists are not made durable by the peer
    peer.recv_all()
    now = peer.clock.now
    # records 10..12 arrive with a FETCH that asks past them, in the same turn
    for s in range(10, 13):
        store.on_message(Record("t", "P", s, b"new"), now)
    store.on_message(Fetch("P", "C", "t", 8, 100), now)
    peer.drain()
    assert records(peer) == [8, 9]  # durable ones at once
    persist = peer.persisted[-1]
    log.append("t", "P", persist.first_sequence, persist.contents)
    store.on_durable("t", "P", 12, peer.clock.now)
    peer.tick()
    assert records(peer) == [10, 11, 12]  # the reply ran past the live records
    assert store.statistics().fetch_replies_pending == 1  # and waits for more, bounded
    peer.tick()
    assert records(peer) == []
    assert store.statistics().fetch_replies_pending == 0


def test_a_reply_waiting_for_durability_leaves_at_the_durable_event() -> None:
    """Not ``fetch_reply_wait`` later: a C consumer never retries a FETCH, so a reply whose
    tail waited a second for the fsync lost that tail to the next live records (issue 18)."""
    log = filled(10)
    store = StoreMachine(WID, RID, log, StoreConfig(heads_refresh=None, fetch_reply_wait=1.0))
    peer = ScriptedPeer(store)  # no log: the test says when the persist is durable
    peer.recv_all()
    for s in range(10, 13):
        store.on_message(Record("t", "P", s, b"new"), peer.clock.now)
    store.on_message(Fetch("P", "C", "t", 8, 100), peer.clock.now)
    peer.drain()
    assert records(peer) == [8, 9]
    assert store.next_deadline() == peer.clock.now + 1.0  # the reply waits, bounded
    peer.advance(0.005)  # the fsync (store/fsync ms:5) lands
    persist = peer.persisted[-1]
    log.append("t", "P", persist.first_sequence, persist.contents)
    store.on_durable("t", "P", 12, peer.clock.now)
    assert store.next_deadline() == peer.clock.now  # the reply is due at once
    peer.advance(0)
    assert records(peer) == [10, 11, 12]


def test_a_reply_follows_the_records_the_writer_takes_after_the_fetch() -> None:
    """A C consumer asks up to the next multiple of 100,000 and never asks again: the reply
    runs on with what is stored after the FETCH came (issue 18: a late C consumer was left
    short of every record published while its reply streamed, once the producer left)."""
    log = filled(10)
    store = StoreMachine(WID, RID, log, StoreConfig(heads_refresh=None, fetch_reply_wait=1.0))
    peer = ScriptedPeer(store, log=log)  # persists are durable at once
    peer.recv_all()
    peer.send(Fetch("P", "C", "t", 0, 100_000))
    assert records(peer) == list(range(10))
    for second in range(3):  # the producer goes on, a record every 0.4 s, then leaves
        peer.advance(0.4)
        peer.send(Record("t", "P", 10 + second, b"later"))  # persisted, durable at once
        assert store.next_deadline() == peer.clock.now
        peer.advance(0)  # the runner's next turn
        assert records(peer) == [10 + second]
    assert store.statistics().fetch_replies_pending == 1
    peer.advance(0.99)
    assert store.statistics().fetch_replies_pending == 1
    peer.tick()  # fetch_reply_wait without anything new: the reply ends
    assert records(peer) == []
    assert store.statistics().fetch_replies_pending == 0
    assert store.next_deadline() is None


def test_a_reply_waiting_for_durability_gives_up() -> None:
    log = filled(5)
    store = StoreMachine(WID, RID, log, StoreConfig(heads_refresh=None, fetch_reply_wait=1.0))
    peer = ScriptedPeer(store)
    peer.recv_all()
    store.on_message(Record("t", "P", 5, b"new"), peer.clock.now)
    store.on_message(Fetch("P", "C", "t", 4, 10), peer.clock.now)
    peer.drain()
    assert records(peer) == [4]
    assert store.next_deadline() == peer.clock.now + 1.0
    peer.tick()
    assert records(peer) == []
    assert store.statistics().fetch_replies_pending == 0
    assert store.next_deadline() is None


def test_addressed_fetches_are_answered_by_the_named_store_only() -> None:
    store, peer = make(filled(10))
    peer.send(Fetch("P", f"C@{RID}", "t", 0, 2))
    sent = [(m.recipient, m.sequence) for m in peer.recv_all() if isinstance(m, DirectRecord)]
    assert sent == [("C", 0), ("C", 1)]
    peer.send(Fetch("P", "C@OTHERSTORE", "t", 0, 2))
    peer.expect_nothing()
    assert store.statistics().fetches_declined == 1
    peer.send(Fetch("P", "C", "t", 0, 1))  # plain: every store answers, as C expects
    assert records(peer) == [0]
