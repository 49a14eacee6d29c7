"""ProducerMachine: sequences, HEADs, ACKs, FETCH answers, GET-HEADS, bounded memory, restart."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dafka.errors import ConfigError, DafkaError
from dafka.node import (
    BackpressureError,
    ProducerConfig,
    ProducerMachine,
    Send,
    Subscribe,
    Unsubscribe,
)
from dafka.protocol import (
    Ack,
    DirectHead,
    DirectRecord,
    Fetch,
    GetHeads,
    Head,
    Record,
    StoreHello,
)
from dafka.testing import ScriptedPeer

PID = "0123ABCD456789EF0123456789ABCDEF"


def make(
    config: ProducerConfig | None = None, next_sequence: int = 0, now: float | None = None
) -> tuple[ProducerMachine, ScriptedPeer]:
    """A producer and a peer that introduced itself as a store (its ACKs count)."""
    producer = ProducerMachine("hello", PID, config, next_sequence=next_sequence, now=now)
    peer = ScriptedPeer(producer)
    peer.send(StoreHello(PID, peer.peer_id))
    return producer, peer


def test_publish_numbers_records_from_zero() -> None:
    producer, peer = make()
    assert [producer.publish(c, 0.0) for c in (b"a", b"b", b"")] == [0, 1, 2]
    peer.drain()
    assert peer.recv_all() == [
        Record("hello", PID, 0, b"a"),
        Record("hello", PID, 1, b"b"),
        Record("hello", PID, 2, b""),
    ]
    assert producer.unacked == 3


def test_head_every_interval_after_first_record_without_bursts() -> None:
    producer, peer = make(ProducerConfig(head_interval=1.0))
    assert producer.next_deadline() is None
    producer.publish(b"x", peer.clock.now)
    peer.drain()
    peer.recv()
    assert producer.next_deadline() == 1.0
    peer.tick()
    assert peer.expect(Head) == Head("hello", PID, 0)
    producer.publish(b"y", peer.clock.now)
    peer.drain()
    peer.recv()
    peer.tick()
    assert peer.clock.now == 2.0
    assert peer.expect(Head).sequence == 1
    peer.advance(10.5)  # a late driver gets one HEAD, not ten
    assert peer.expect(Head).sequence == 1
    peer.expect_nothing()
    assert producer.next_deadline() == pytest.approx(13.5)


def test_ack_is_cumulative_and_exact_about_producer_and_topic() -> None:
    producer, peer = make()
    for i in range(5):
        producer.publish(bytes([i]), 0.0)
    peer.drain()
    peer.recv_all()
    peer.send(Ack(PID + "X", "hello", 4))  # prefix leak: another producer's ACK
    peer.send(Ack(PID, "hello2", 4))  # another topic
    assert producer.unacked == 5
    peer.send(Ack(PID, "hello", 2))
    assert producer.unacked == 2
    peer.send(Ack(PID, "hello", 1))  # older ACK changes nothing
    assert producer.unacked == 2
    peer.send(Ack(PID, "hello", 99))  # beyond the last record sent: no store of ours
    assert producer.unacked == 2
    peer.send(Ack(PID, "hello", 4))
    assert producer.unacked == 0
    stats = producer.statistics()
    assert (stats.acked_through, stats.unacked_bytes, stats.dropped_messages) == (4, 0, 2)
    assert (stats.acks_received, stats.acks_beyond_sent, producer.rejected) == (3, 1, 1)
    assert "beyond the last sequence sent (4)" in producer.last_rejection


def test_fetch_after_partial_ack_returns_the_requested_records() -> None:
    """The C producer sent wrong content after a partial ACK; ours sends what was asked."""
    producer, peer = make()
    for i in range(10):
        producer.publish(f"record {i}".encode(), 0.0)
    peer.drain()
    peer.recv_all()
    peer.send(Ack(PID, "hello", 4))
    peer.send(Fetch(PID, "CONSUMER", "hello", 2, 6))  # [2, 8): 2..4 are gone
    assert peer.recv_all() == [
        DirectRecord("CONSUMER", "hello", PID, s, f"record {s}".encode()) for s in (5, 6, 7)
    ]
    peer.send(Fetch(PID, "CONSUMER", "hello", 8, 1000))  # beyond the last: what is held
    assert [m.sequence for m in peer.recv_all() if isinstance(m, DirectRecord)] == [8, 9]
    peer.send(Fetch(PID, "CONSUMER", "hello", 3, 0))
    peer.send(Fetch(PID, "CONSUMER", "other", 5, 5))
    peer.send(Fetch(PID + "0", "CONSUMER", "hello", 5, 5))
    peer.expect_nothing()


def test_get_heads_is_answered_unlike_the_c_producer() -> None:
    producer, peer = make()
    peer.send(GetHeads("hello", "CONSUMER"))
    peer.expect_nothing()  # nothing published yet
    producer.publish(b"x", 0.0)
    producer.publish(b"y", 0.0)
    peer.drain()
    peer.recv_all()
    peer.send(GetHeads("hello", "CONSUMER"))
    assert peer.recv() == DirectHead("CONSUMER", "hello", PID, 1)
    peer.send(GetHeads("hello2", "CONSUMER"))  # 'G' + 'hello' leaks 'hello2'
    peer.expect_nothing()
    assert producer.statistics().get_heads_answered == 1


def test_backpressure_by_records() -> None:
    producer, peer = make(ProducerConfig(max_unacked_records=3, backpressure="error"))
    for _ in range(3):
        producer.publish(b"x", 0.0)
    assert not producer.can_publish()
    with pytest.raises(BackpressureError) as raised:
        producer.publish(b"x", 0.0)
    assert isinstance(raised.value, DafkaError)
    assert raised.value.unacked_records == 3
    assert producer.next_sequence == 3  # the refused record used no sequence
    peer.send(Ack(PID, "hello", 0))
    assert producer.can_publish()
    assert producer.publish(b"x", 0.0) == 3


def test_backpressure_by_bytes_still_lets_one_large_record_through() -> None:
    producer, peer = make(ProducerConfig(max_unacked_bytes=10))
    producer.publish(b"12345678", 0.0)
    assert producer.can_publish(2)
    assert not producer.can_publish(3)
    with pytest.raises(BackpressureError):
        producer.publish(b"123", 0.0)
    peer.send(Ack(PID, "hello", 0))
    producer.publish(b"x" * 100, 0.0)  # alone it may exceed the limit, or it could never go
    assert producer.statistics().unacked_bytes == 100


def test_min_stores_counts_distinct_identified_stores() -> None:
    producer, peer = make(ProducerConfig(min_stores=2))
    peer.send(StoreHello(PID, "STORE-A"), StoreHello(PID, "STORE-B"))
    for _ in range(10):
        producer.publish(b"x", 0.0)
    peer.drain()
    peer.send(Ack(PID, "hello", 9))
    peer.send(Ack(PID, "hello", 9))  # one store's ACKs count as one store, however many
    assert producer.unacked == 10
    producer.on_ack(Ack(PID, "hello", 5), 0.0, store="STORE-A")
    assert producer.unacked == 4  # the peer (9) and A (5): both hold 0..5
    producer.on_ack(Ack(PID, "hello", 7), 0.0, store="STORE-B")
    assert producer.unacked == 2  # second best is now 7
    producer.on_ack(Ack(PID, "hello", 9), 0.0, store="STORE-A")
    assert producer.unacked == 0


def test_anonymous_acks_count_as_one_store_with_acks_from_any() -> None:
    """A driver that cannot tell senders apart (C stores: ``acks_from="any"``)."""
    producer = ProducerMachine("hello", PID, ProducerConfig(min_stores=2, acks_from="any"))
    for _ in range(10):
        producer.publish(b"x", 0.0)
    producer.on_message(Ack(PID, "hello", 9), 0.0)
    producer.on_message(Ack(PID, "hello", 9), 0.0)  # however many: one store
    assert producer.unacked == 10
    producer.on_ack(Ack(PID, "hello", 5), 0.0, store="NEVER-GREETED")  # any sender counts
    assert producer.unacked == 4
    producer.on_message(Ack(PID, "hello", 10), 0.0)  # still: only what was sent
    assert producer.statistics().acks_beyond_sent == 1


def test_acks_count_only_from_stores_that_greeted_this_producer() -> None:
    """Issue 18, path 2: a forged or stray ACK must not mark records stored."""
    producer = ProducerMachine("hello", PID)
    peer = ScriptedPeer(producer, peer_id="STRANGER")
    assert b"L" + PID.encode() in peer.subscriptions  # where stores greet it
    for _ in range(5):
        producer.publish(b"x", 0.0)
    peer.drain()
    peer.send(Ack(PID, "hello", 4))  # from a peer that never greeted it: held, not counted
    producer.on_message(Ack(PID, "hello", 4), 0.0)  # from nobody knows whom
    peer.send(StoreHello(PID + "0", "STRANGER"))  # a greeting for another producer (leak)
    peer.advance(producer.config.head_interval + 0.1)  # its grace is over
    peer.send(Ack(PID, "hello", 4))
    peer.send(Ack(PID, "hello", 4))
    assert producer.unacked == 5
    stats = producer.statistics()
    assert (stats.acks_from_unknown, stats.acks_received, stats.stores_known) == (3, 0, 0)
    assert producer.rejected == 3
    assert "'STRANGER': not a store that greeted this producer" in producer.last_rejection
    peer.send(StoreHello(PID, "STRANGER"))  # it introduces itself as a store
    assert producer.unacked == 0  # the ACK it held counts now
    assert producer.stores == frozenset({"STRANGER"})


def test_an_ack_that_overtakes_its_stores_greeting_is_held_not_refused() -> None:
    """A store greets from its reader and ACKs from its writer: the ACK can come first.
    Old code: refused and logged on every ordinary produce, counted only at the next ACK."""
    producer = ProducerMachine("hello", PID)
    for _ in range(3):
        producer.publish(b"x", 0.0)
    producer.take_actions()
    producer.on_ack(Ack(PID, "hello", 1), 0.01, "STORE")
    producer.on_ack(Ack(PID, "hello", 2), 0.02, "STORE")
    assert (producer.unacked, producer.rejected) == (3, 0)
    producer.on_message(StoreHello(PID, "STORE"), 0.03)
    assert (producer.unacked, producer.rejected) == (0, 0)
    assert producer.statistics().acks_received == 1


def test_restart_continues_the_sequence_and_announces_its_head() -> None:
    producer, peer = make(next_sequence=10, now=100.0)
    assert peer.recv() == Head("hello", PID, 9)
    assert producer.next_deadline() == 101.0
    peer.send(Fetch(PID, "CONSUMER", "hello", 0, 10))
    peer.expect_nothing()  # the old records are the stores' business
    assert producer.publish(b"x", 100.0) == 10
    peer.send(Ack(PID, "hello", 5))  # an ACK of the earlier life
    assert producer.unacked == 1
    peer.send(Ack(PID, "hello", 10))
    assert producer.unacked == 0


def test_config_is_validated() -> None:
    with pytest.raises(ConfigError):
        ProducerConfig(min_stores=0)
    with pytest.raises(ConfigError):
        ProducerConfig(backpressure="drop")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        ProducerConfig(head_interval=0)


def test_unexpected_messages_are_counted_drops() -> None:
    producer, peer = make()
    peer.send(Head("hello", "OTHER", 3), Record("hello", "OTHER", 0, b""))
    peer.expect_nothing()
    assert producer.statistics().dropped_messages == 2


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("publish"), st.integers(1, 300), st.just(0)),
            st.tuples(st.just("ack"), st.integers(-1, 5000), st.just(0)),
            st.tuples(st.just("fetch"), st.integers(0, 5000), st.integers(0, 400)),
        ),
        max_size=60,
    )
)
def test_held_records_always_match_a_simple_model(ops: list[tuple[str, int, int]]) -> None:
    producer = ProducerMachine("t", PID, ProducerConfig())
    producer.on_message(StoreHello(PID, "STORE"), 0.0)
    producer.take_actions()
    published: list[bytes] = []
    acked = -1
    for kind, a, b in ops:
        if kind == "publish":
            for _ in range(a):
                content = str(len(published)).encode()
                producer.publish(content, 0.0)
                published.append(content)
            producer.take_actions()
        elif kind == "ack":
            producer.on_ack(Ack(PID, "t", max(a, 0)), 0.0, "STORE")
            if max(a, 0) < len(published):  # beyond what was sent: refused
                acked = max(acked, a, 0)
        else:
            producer.on_message(Fetch(PID, "C", "t", a, b), 0.0)
            got = [
                (m.sequence, m.content)
                for action in producer.take_actions()
                if isinstance(action, Send) and isinstance(m := action.message, DirectRecord)
            ]
            held = range(max(a, acked + 1), min(a + b, len(published)))
            assert got == [(s, published[s]) for s in held]
        assert producer.unacked == len(published) - (acked + 1)
        assert producer.statistics().unacked_bytes == sum(len(p) for p in published[acked + 1 :])


def test_an_ack_from_an_unknown_sender_asks_the_stores_to_greet_again() -> None:
    """A lost STORE-HELLO must not leave a store's ACKs refused forever: the producer
    re-subscribes to its greetings (a new XPUB notice at every store), at most once per
    head_interval."""
    producer = ProducerMachine("hello", PID, ProducerConfig(head_interval=1.0))
    producer.publish(b"x", 0.0)
    producer.take_actions()
    hello = b"L" + PID.encode()
    producer.on_ack(Ack(PID, "hello", 0), 5.0, "STORE")  # held: its greeting may be late
    assert producer.take_actions() == [Unsubscribe(hello), Subscribe(hello)]
    producer.on_ack(Ack(PID, "hello", 0), 5.5, "STORE")  # within head_interval: once
    producer.on_message(Ack(PID, "hello", 0), 6.0)  # no sender: nobody to greet
    assert producer.take_actions() == []
    producer.on_ack(Ack(PID, "hello", 0), 6.1, "STORE")  # refused: its grace is over
    assert producer.take_actions() == [Unsubscribe(hello), Subscribe(hello)]
    assert producer.statistics().acks_from_unknown == 2
    producer.on_message(StoreHello(PID, "STORE"), 6.2)
    assert producer.unacked == 0
