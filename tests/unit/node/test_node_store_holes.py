"""Issue 18 path 4: a store whose log has holes serves around them and fills them from peers.

A hole is a range below the head that the log does not hold (records lost to damage, or
recorded as gone). The store answers FETCHes with exactly what it holds (never a record it
lost), fetches each hole from its peers (its own cursor, backing off up to
``hole_retry_max``), and writes what arrives into the hole. A gap that no peer can fill is
recorded as a hole, and the rest of the partition is replicated anyway.
"""

from __future__ import annotations

from dafka.node import ConsumerConfig, ConsumerMachine, StoreConfig, StoreMachine
from dafka.protocol import DirectHead, DirectRecord, Fetch, GetHeads, Head
from dafka.testing import ManualClock, MemoryLog, MemoryNetwork, ScriptedPeer

from .conftest import make_id

WID = "57000000000000000000000000000001"
RID = "52000000000000000000000000000002"
P = "5C21B7E0A3F94D6C8E1F0A2B3C4D5E6F"
CONFIG = StoreConfig(heads_refresh=None)


def log_with_hole(count: int = 100, hole: tuple[int, int] = (40, 45)) -> MemoryLog:
    log = MemoryLog()
    log.append("t", P, 0, [b"r%d" % s for s in range(count)])
    log.punch("t", P, *hole)
    return log


def test_a_fetch_across_a_hole_gets_exactly_what_the_store_holds() -> None:
    store = StoreMachine(WID, RID, log_with_hole(), CONFIG)
    peer = ScriptedPeer(store)
    peer.recv_all()
    peer.send(Fetch(P, "CONSUMER", "t", 30, 30))
    peer.advance(0.0)
    sent = [m for m in peer.recv_all() if isinstance(m, DirectRecord)]
    assert [m.sequence for m in sent] == [*range(30, 40), *range(45, 60)]
    assert all(m.content == b"r%d" % m.sequence for m in sent)
    peer.send(GetHeads("t", "CONSUMER"))
    assert [m for m in peer.recv_all() if isinstance(m, DirectHead)] == [
        DirectHead("CONSUMER", "t", P, 99)  # it does hold its head
    ]


def test_holes_found_at_open_are_fetched_and_filled() -> None:
    log = log_with_hole()
    store = StoreMachine(WID, RID, log, CONFIG)
    peer = ScriptedPeer(store, log=log)
    peer.recv_all()
    assert store.statistics().holes == 1
    assert store.next_deadline() is not None
    peer.tick()  # the first timer tick starts the hole's FETCH
    (fetch,) = [m for m in peer.recv_all() if isinstance(m, Fetch)]
    assert (fetch.producer, fetch.requester, fetch.sequence, fetch.count) == (P, WID, 40, 5)
    peer.send(*[DirectRecord(WID, "t", P, s, b"r%d" % s) for s in range(40, 45)])
    (fill,) = [p for p in peer.persisted if p.placement == "fill"]
    assert (fill.first_sequence, len(fill.contents)) == (40, 5)
    assert log.holes("t", P) == []
    assert log.contents("t", P) == [b"r%d" % s for s in range(100)]
    stats = store.statistics()
    assert (stats.holes, stats.records_filled, stats.fetches_in_flight) == (0, 5, 0)
    assert not [m for m in peer.recv_all() if isinstance(m, Fetch)]


def test_a_hole_reported_at_run_time_is_fetched_at_once_and_its_fill_can_be_partial() -> None:
    log = MemoryLog()
    log.append("t", P, 0, [b"r%d" % s for s in range(100)])
    store = StoreMachine(WID, RID, log, CONFIG)
    peer = ScriptedPeer(store, log=log)
    peer.recv_all()
    log.punch("t", P, 10, 20)  # a read met damage: the driver says so
    store.on_holes("t", P, log.holes("t", P), peer.clock.now)
    peer.drain()
    (fetch,) = peer.recv_all()
    assert isinstance(fetch, Fetch)
    assert (fetch.sequence, fetch.count) == (10, 10)
    peer.send(*[DirectRecord(WID, "t", P, s, b"r%d" % s) for s in range(10, 14)])
    assert log.holes("t", P) == [(14, 20)]
    assert store.statistics().hole_records == 6
    peer.advance(0.6)  # no progress: the retry asks for the rest only
    (retry,) = [m for m in peer.recv_all() if isinstance(m, Fetch)]
    assert (retry.sequence, retry.count) == (14, 6)
    peer.send(*[DirectRecord(WID, "t", P, s, b"r%d" % s) for s in range(14, 20)])
    assert log.contents("t", P) == [b"r%d" % s for s in range(100)]


def test_records_above_a_hole_go_to_the_log_not_into_the_hole() -> None:
    log = log_with_hole()
    store = StoreMachine(WID, RID, log, CONFIG)
    peer = ScriptedPeer(store, log=log)
    peer.tick()
    peer.recv_all()
    peer.send_record("t", 100, b"r100")  # live, continues the head
    peer.send(DirectRecord(WID, "t", P, 60, b"dup"))  # held already: a duplicate
    appended = [p for p in peer.persisted if p.placement == "append"]
    assert [(p.first_sequence, p.contents) for p in appended] == [(100, (b"r100",))]
    assert log.holes("t", P) == [(40, 45)]
    assert store.statistics().dropped_duplicates == 1


def test_a_hole_no_peer_can_fill_is_asked_for_rarely() -> None:
    log = log_with_hole()
    store = StoreMachine(WID, RID, log, StoreConfig(heads_refresh=None, hole_retry_max=30.0))
    peer = ScriptedPeer(store, log=log)
    fetches = 0
    while peer.clock.now < 600.0:
        peer.tick()
        fetches += sum(isinstance(m, Fetch) for m in peer.recv_all())
    # 0.5, 1, 2, 4, 8, 16 s, then every 30 s: about 25 in ten minutes, not a storm
    assert 20 <= fetches <= 30
    store.on_peer("NEWPEER", peer.clock.now)  # a new peer may hold it: asked at once
    peer.drain()
    assert [m.sequence for m in peer.recv_all() if isinstance(m, Fetch)] == [40]


def add_store(net: MemoryNetwork, name: str, log: MemoryLog) -> StoreMachine:
    store = StoreMachine(make_id(), make_id(), log, StoreConfig(heads_refresh=1.0))
    net.add(name, store, log=log)
    return store


def test_a_store_fills_its_hole_from_a_peer_store_and_a_consumer_reads_everything() -> None:
    damaged = log_with_hole(1_000, (500, 501))
    healthy = MemoryLog()
    healthy.append("t", P, 0, [b"r%d" % s for s in range(1_000)])
    net = MemoryNetwork(ManualClock())
    add_store(net, "damaged", damaged)
    add_store(net, "healthy", healthy)
    consumer = ConsumerMachine(make_id(), ConsumerConfig(offset_reset="earliest"))
    net.add("consumer", consumer)
    consumer.subscribe("t", net.clock.now)
    net.run_until(lambda: len(net.delivered("consumer")) >= 1_000, within=60.0)
    assert net.contents("consumer") == [b"r%d" % s for s in range(1_000)]
    net.run_until(lambda: damaged.holes("t", P) == [], within=60.0)
    assert damaged.contents("t", P) == healthy.contents("t", P)


def test_a_late_store_replicates_past_a_hole_no_one_can_fill_and_records_it() -> None:
    """Before: a store behind a hole that no peer holds kept asking for it forever and held
    nothing past it."""
    source = log_with_hole(1_000, (500, 501))  # the only copy lost record 500
    late = MemoryLog()
    net = MemoryNetwork(ManualClock())
    add_store(net, "source", source)
    late_store = add_store(net, "late", late)
    late_store.on_message(Head("t", P, 999), net.clock.now)
    net.run_until(lambda: late.head("t", P) == 999, within=120.0)
    assert late.contents("t", P) == source.contents("t", P)
    assert late.holes("t", P) == [(500, 501)]
    stats = late_store.statistics()
    assert (stats.holes_recorded, stats.records_gone, stats.holes) == (1, 1, 1)
    persisted_after_gap = stats.stored  # it went on storing past the gap
    assert persisted_after_gap == 999
    # and it keeps trying to fill it: a store that holds record 500 comes, and fills it
    full = MemoryLog()
    full.append("t", P, 0, [b"r%d" % s for s in range(1_000)])
    add_store(net, "full", full)
    late_store.on_peer("FULL", net.clock.now)
    net.run_until(lambda: late.holes("t", P) == [], within=60.0)
    assert late.contents("t", P) == [b"r%d" % s for s in range(1_000)]


def test_a_consumer_meets_a_hole_no_store_can_fill_and_moves_past_it_after_ten_refusals() -> None:
    """The rule by which a consumer knows that no store can fill a hole: every FETCH retry
    is answered only from beyond it (``skip_unavailable_after``, 10). The machine then moves
    on; the client sees the jump and raises ``DataLossError`` (or counts it)."""
    only_copy = log_with_hole(1_000, (500, 501))
    net = MemoryNetwork(ManualClock())
    add_store(net, "store", only_copy)
    consumer = ConsumerMachine(make_id(), ConsumerConfig(offset_reset="earliest"))
    net.add("consumer", consumer)
    consumer.subscribe("t", net.clock.now)
    net.run_until(lambda: len(net.delivered("consumer")) >= 500, within=30.0)
    met = net.clock.now
    took = net.run_until(lambda: len(net.delivered("consumer")) >= 999, within=120.0)
    assert [d.sequence for d in net.delivered("consumer")] == [*range(500), *range(501, 1_000)]
    assert consumer.statistics().skipped_records == 1
    assert 30.0 <= net.clock.now - met <= 45.0  # ten refused retries: 0.5 + 1 + 2 + 4 + 6 * 5 s
    assert took > 0
