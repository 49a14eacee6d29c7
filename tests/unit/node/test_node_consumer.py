"""ConsumerMachine: ordering, gaps, FETCH windows and retries, offsets, exact filtering."""

from __future__ import annotations

import pytest

from dafka.errors import ConfigError
from dafka.node import (
    ConsumerConfig,
    ConsumerMachine,
    Deliver,
    FetchPolicy,
    NodeArgumentError,
    PartitionPosition,
    ProducerMachine,
    StoreMachine,
    Subscribe,
    Unsubscribe,
)
from dafka.protocol import (
    ConsumerHello,
    DirectHead,
    DirectRecord,
    Fetch,
    GetHeads,
    Head,
    HeadsEnd,
    Record,
    StoreHello,
)
from dafka.testing import MemoryLog, ScriptedPeer

CID = "C0C0C0C0C0C0C0C0C0C0C0C0C0C0C0C0"


def make(
    reset: str = "earliest",
    window: int = 10_000,
    topic: str | None = "hello",
    refresh: float | None = None,
) -> tuple[ConsumerMachine, ScriptedPeer]:
    policy = FetchPolicy(window=window, retry_initial=0.5, retry_max=5.0)
    config = ConsumerConfig(offset_reset=reset, fetch=policy, heads_refresh=refresh)  # type: ignore[arg-type]
    consumer = ConsumerMachine(CID, config)
    peer = ScriptedPeer(consumer)
    if topic is not None:
        consumer.subscribe(topic, peer.clock.now)
        peer.drain()
        peer.expect(GetHeads)
    return consumer, peer


def test_subscriptions() -> None:
    consumer, peer = make(topic=None)
    # D, E, L as a C consumer; S and A for dafka's LOG-START and HEADS-END (docs/protocol.md)
    assert peer.subscriptions == {c + CID.encode() for c in (b"D", b"E", b"L", b"S", b"A")}
    consumer.subscribe("hello", 0.0)
    consumer.subscribe("hello", 0.0)  # idempotent
    peer.drain()
    assert peer.recv_all() == [GetHeads("hello", CID)]
    assert {b"Mhello", b"Hhello"} <= peer.subscriptions
    consumer.unsubscribe("hello", 0.0)
    peer.drain()
    assert b"Mhello" not in peer.subscriptions
    peer.send_record("hello", 0)
    assert peer.delivered == []


def test_in_order_records_become_one_deliver_per_batch() -> None:
    consumer, peer = make()
    peer.send(*(Record("hello", "P", s, bytes([s])) for s in range(3)))
    assert [d.sequence for d in peer.delivered] == [0, 1, 2]
    consumer.on_message(Record("hello", "P", 3, b"a"), 0.0)
    consumer.on_message(Record("hello", "Q", 0, b"b"), 0.0)
    consumer.on_message(Record("hello", "P", 4, b"c"), 0.0)
    assert consumer.take_actions() == [
        Deliver("hello", "P", 3, (b"a", b"c")),
        Deliver("hello", "Q", 0, (b"b",)),
    ]
    assert consumer.statistics().delivered == 6


def test_prefix_leaks_are_filtered_after_receipt() -> None:
    consumer, peer = make()
    peer.send_record("hello2", 0)  # 'M' + 'hello' matches 'hello2'
    peer.send_head("hello2", 5)
    peer.send_direct_record(CID + "X", "hello", 0)  # 'D' + our id matches longer ids
    peer.send_direct_head(CID + "X", "hello", 5)
    peer.send(StoreHello(CID + "X", "STORE"))
    peer.expect_nothing()
    assert peer.delivered == []
    stats = consumer.statistics()
    assert (stats.dropped_foreign, stats.partitions) == (5, 0)


def test_behind_is_dropped_and_ahead_fetches_once() -> None:
    consumer, peer = make()
    peer.send_record("hello", 0)
    peer.send_record("hello", 0)  # duplicate
    for sequence in range(3, 8):  # a burst ahead: one FETCH, not five
        peer.send_record("hello", sequence)
    fetch = peer.expect(Fetch)
    assert (fetch.sequence, fetch.count, fetch.requester) == (1, 3, CID)
    peer.expect_nothing()
    stats = consumer.statistics()
    assert (stats.dropped_duplicates, stats.arrived_ahead, stats.fetches_sent) == (1, 5, 1)
    # The records that arrived ahead (3..7) are kept: once 1 and 2 arrive, all is delivered
    # and nothing more is fetched (C dropped them and fetched them again).
    peer.send_direct_record(CID, "hello", 1)
    peer.send_direct_record(CID, "hello", 2)
    peer.expect_nothing()
    assert [d.sequence for d in peer.delivered] == list(range(8))
    assert consumer.statistics().fetches_in_flight == 0


def test_lost_fetch_is_retried_with_backoff_until_caught_up() -> None:
    consumer, peer = make()
    peer.send_head("hello", 5)
    assert peer.expect(Fetch).sequence == 0
    times = []
    for _ in range(6):  # nobody answers
        assert peer.tick()
        fetch = peer.expect(Fetch)
        assert (fetch.sequence, fetch.count) == (0, 6)
        times.append(peer.clock.now)
    assert times == [0.5, 1.5, 3.5, 7.5, 12.5, 17.5]  # doubling, capped at retry_max
    assert consumer.statistics().fetch_retries == 6
    # Progress resets the backoff: the next retry is retry_initial after the last record.
    peer.send_direct_record(CID, "hello", 0)
    peer.send_direct_record(CID, "hello", 1)
    assert consumer.next_deadline() == pytest.approx(18.0)
    peer.tick()
    fetch = peer.expect(Fetch)
    assert (fetch.sequence, fetch.count) == (2, 4)
    for sequence in range(2, 6):
        peer.send_direct_record(CID, "hello", sequence)
    assert consumer.next_deadline() is None  # caught up: no more FETCH
    assert [d.sequence for d in peer.delivered] == list(range(6))
    assert not peer.tick()


def test_fetches_window_after_window_until_the_known_head() -> None:
    consumer, peer = make(window=10)
    peer.send_direct_head(CID, "hello", 24)
    starts = []
    while True:
        fetches = [m for m in peer.recv_all() if isinstance(m, Fetch)]
        if not fetches:
            break
        (fetch,) = fetches
        starts.append((fetch.sequence, fetch.count))
        peer.send(
            *(
                DirectRecord(CID, "hello", peer.peer_id, s, b"")
                for s in range(fetch.sequence, fetch.sequence + fetch.count)
            )
        )
    assert starts == [(0, 10), (10, 10), (20, 5)]
    assert len(peer.delivered) == 25
    assert consumer.statistics().fetches_in_flight == 0


def test_latest_starts_after_the_first_head_or_at_the_first_record() -> None:
    _, peer = make(reset="latest")
    peer.send_head("hello", 7)
    peer.expect_nothing()  # latest: nothing to fetch
    peer.send_record("hello", 8, b"eight")
    assert [(d.sequence, d.content) for d in peer.delivered] == [(8, b"eight")]
    consumer2, peer2 = make(reset="latest")
    peer2.send_record("hello", 5, b"five")
    peer2.send_record("hello", 7, b"seven")
    assert [d.sequence for d in peer2.delivered] == [5]
    assert peer2.expect(Fetch).sequence == 6
    assert consumer2.positions()[("hello", peer2.peer_id)] == PartitionPosition(5, 6, 7, True)


def test_earliest_direct_head_from_a_store_fetches_from_zero() -> None:
    _, peer = make()
    peer.send_direct_head(CID, "hello", 3)
    fetch = peer.expect(Fetch)
    assert (fetch.producer, fetch.sequence, fetch.count) == (peer.peer_id, 0, 4)


def test_explicit_start_positions() -> None:
    consumer, peer = make(reset="latest")
    consumer.seek("hello", peer.peer_id, 3, peer.clock.now)
    peer.send_head("hello", 10)
    fetch = peer.expect(Fetch)
    assert (fetch.sequence, fetch.count) == (3, 8)
    for sequence in range(3, 11):
        peer.send_direct_record(CID, "hello", sequence)
    assert [d.sequence for d in peer.delivered] == list(range(3, 11))
    consumer.seek("hello", peer.peer_id, 9, peer.clock.now)  # re-read the tail
    peer.drain()
    assert peer.expect(Fetch).sequence == 9
    peer.send_direct_record(CID, "hello", 9, b"again")
    assert peer.delivered[-1] == (("hello", peer.peer_id, 9, b"again"))
    with pytest.raises(ValueError, match="next_sequence"):
        consumer.seek("hello", "P", -1, 0.0)


def test_seek_back_with_undrained_records_keeps_runs_consistent() -> None:
    consumer, _ = make()
    consumer.take_actions()
    consumer.on_message(Record("hello", "P", 0, b"0"), 0.0)
    consumer.on_message(Record("hello", "P", 1, b"1"), 0.0)
    consumer.seek("hello", "P", 0, 0.0)
    consumer.on_message(DirectRecord(CID, "hello", "P", 0, b"0"), 0.0)
    delivers = [a for a in consumer.take_actions() if isinstance(a, Deliver)]
    assert delivers == [Deliver("hello", "P", 0, (b"0", b"1")), Deliver("hello", "P", 0, (b"0",))]


def test_store_hello_is_answered_with_our_topics() -> None:
    consumer, peer = make()
    consumer.subscribe("world", 0.0)
    peer.drain()
    peer.recv_all()
    peer.send(StoreHello(CID, "STORE"))
    assert peer.recv() == ConsumerHello("STORE", CID, ("hello", "world"))
    _, silent = make(topic=None)
    silent.send(StoreHello(CID, "STORE"))
    silent.expect_nothing()


def test_a_store_subscribing_to_its_hellos_after_greeting_is_said_hello_again() -> None:
    """The store greeted (STORE-HELLO came through the consumer's SUB) before its own SUB had
    joined the consumer's PUB: the CONSUMER-HELLO answering it was lost, and the consumer
    waited for its heads until ``heads_refresh`` (10 s; bench/security.py's first secured
    consumer did). Its subscription to ``W`` + its id says it hears hellos now."""
    consumer, peer = make()
    consumer.on_subscription(b"WSTORE", True, 0.0)  # not greeted yet: its greeting will do
    peer.drain()
    peer.expect_nothing()
    peer.send(StoreHello(CID, "STORE"))
    assert peer.recv() == ConsumerHello("STORE", CID, ("hello",))  # lost on the wire
    consumer.on_subscription(b"WSTORE", True, 0.0)
    peer.drain()
    assert peer.recv() == ConsumerHello("STORE", CID, ("hello",))
    for prefix, subscribed in ((b"WSTORE", False), (b"W", True), (b"LSTORE", True)):
        consumer.on_subscription(prefix, subscribed, 0.0)
    peer.drain()
    peer.expect_nothing()


def test_messages_for_other_roles_are_counted_drops() -> None:
    consumer, peer = make()
    peer.send(Fetch("P", "X", "hello", 0, 1), GetHeads("hello", "X"))
    peer.expect_nothing()
    assert consumer.statistics().dropped_unexpected == 2


def test_head_at_or_below_position_does_nothing() -> None:
    consumer, peer = make()
    peer.send_record("hello", 0)
    peer.send_head("hello", 0)
    peer.send(Head("hello", peer.peer_id, 0))
    peer.expect_nothing()
    assert consumer.next_deadline() is None


def test_config_is_validated() -> None:
    with pytest.raises(ConfigError):
        ConsumerConfig(offset_reset="middle")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        FetchPolicy(window=0)
    with pytest.raises(ConfigError):
        FetchPolicy(retry_initial=2.0, retry_max=1.0)


def test_unsubscribe_action_prefixes() -> None:
    consumer, _ = make()
    consumer.unsubscribe("hello", 0.0)
    consumer.unsubscribe("hello", 0.0)
    assert consumer.take_actions() == [Unsubscribe(b"Mhello"), Unsubscribe(b"Hhello")]
    assert Subscribe(b"Mhello") not in consumer.take_actions()


def test_heads_are_refreshed_for_every_topic() -> None:
    consumer, peer = make(refresh=10.0)
    consumer.subscribe("world", peer.clock.now)
    peer.drain()
    assert peer.recv_all() == [GetHeads("world", CID)]
    assert consumer.next_deadline() == 10.0
    peer.tick()
    assert peer.recv_all() == [GetHeads("hello", CID), GetHeads("world", CID)]
    assert consumer.next_deadline() == 20.0


def test_a_hole_in_a_fetch_reply_is_re_fetched_at_once_but_only_once() -> None:
    consumer, peer = make()
    peer.send_head("hello", 9)
    assert peer.expect(Fetch).sequence == 0
    peer.send_direct_record(CID, "hello", 0)
    peer.send_direct_record(CID, "hello", 1)
    peer.send_direct_record(CID, "hello", 3)  # 2 was lost on the way
    fetch = peer.expect(Fetch)
    assert (fetch.sequence, fetch.count, peer.clock.now) == (2, 1, 0.0)  # no timeout wait
    for sequence in range(4, 10):  # the rest of the broken reply: no FETCH storm
        peer.send_direct_record(CID, "hello", sequence)
    peer.expect_nothing()
    for sequence in range(2, 10):  # the answer to the re-fetch
        peer.send_direct_record(CID, "hello", sequence)
    assert [d.sequence for d in peer.delivered] == list(range(10))
    assert consumer.statistics().fetch_retries == 1


def test_start_positions_given_at_construction() -> None:
    consumer = ConsumerMachine(CID, ConsumerConfig("latest"), start_positions={("hello", "P"): 2})
    peer = ScriptedPeer(consumer)
    consumer.subscribe("hello", 0.0)
    peer.drain()
    peer.expect(GetHeads)
    peer.send(Head("hello", "P", 4), Head("hello", "Q", 4))
    fetch = peer.expect(Fetch)  # only P: Q follows 'latest'
    assert (fetch.producer, fetch.sequence, fetch.count) == ("P", 2, 3)
    peer.expect_nothing()
    with pytest.raises(ValueError, match="start position"):
        ConsumerMachine(CID, start_positions={("hello", "P"): -1})


def test_names_the_wire_cannot_carry_are_refused() -> None:
    with pytest.raises(NodeArgumentError, match="consumer id"):
        ConsumerMachine("")
    consumer = ConsumerMachine(CID)
    with pytest.raises(NodeArgumentError, match="topic"):
        consumer.subscribe("x" * 256, 0.0)
    with pytest.raises(NodeArgumentError, match="producer id"):
        ProducerMachine("hello", "")
    with pytest.raises(NodeArgumentError, match="reader id"):
        StoreMachine("W", "R" * 300, MemoryLog())
    with pytest.raises(NodeArgumentError):
        ProducerMachine("hello", "P", next_sequence=2**64)


def test_records_ahead_are_kept_only_within_one_window() -> None:
    _consumer, peer = make(window=4)
    peer.send_head("hello", 9)
    fetch = peer.expect(Fetch)
    assert (fetch.sequence, fetch.count) == (0, 4)
    for sequence in range(1, 10):  # 1..3 are within the window [0, 4); 4..9 are not
        peer.send_record("hello", sequence)
    peer.expect_nothing()
    peer.send_direct_record(CID, "hello", 0)
    assert [d.sequence for d in peer.delivered] == [0, 1, 2, 3]
    fetch = peer.expect(Fetch)  # 4..9 were not kept: they are fetched
    assert (fetch.sequence, fetch.count) == (4, 4)


def test_every_stores_that_is_all_ends_the_settle_window_for_at_end() -> None:
    """A topic's settle window kept ``at_end`` False for ``latest_settle`` (1 s) after
    subscribing; once every store said "that is all" (HEADS-END) every head is known."""
    consumer = ConsumerMachine(CID, ConsumerConfig(offset_reset="earliest"))
    consumer.subscribe("hello", 0.0)
    consumer.on_message(StoreHello(CID, "S1"), 0.0)
    consumer.on_message(StoreHello(CID, "S2"), 0.0)
    consumer.on_message(DirectHead(CID, "hello", "P", 0), 0.0)
    consumer.on_message(DirectRecord(CID, "hello", "P", 0, b"x"), 0.0)
    consumer.take_actions()
    assert not consumer.at_end(0.1)  # the window
    consumer.on_message(HeadsEnd(CID, "hello", "S1", "W1", 1, 3), 0.1)
    consumer.on_message(HeadsEnd(CID, "hello", "S2", "W2", 1, 3), 0.1)
    assert not consumer.at_end(0.1)  # S1 and S2 know a third store
    assert consumer.statistics().heads_answered == ()
    consumer.on_message(HeadsEnd(CID, "hello", "S3", "W3", 0, 3), 0.1)
    assert consumer.at_end(0.1)
    assert consumer.statistics().heads_answered == ("hello",)
    consumer.on_message(StoreHello(CID, "C-STORE"), 0.2)  # never says it
    assert not consumer.at_end(0.2)
    assert consumer.at_end(1.0)  # the window decides, as before
