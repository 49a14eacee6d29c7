"""StoreMachine: writer (ordering, gaps, Persist batches, durable ACKs) and reader (answers)."""

from __future__ import annotations

import dafka.node._store as store_module
from dafka.node import Persist, SendDirectRecords, StoreConfig, StoreMachine
from dafka.protocol import (
    Ack,
    ConsumerHello,
    DirectHead,
    DirectRecord,
    Fetch,
    GetHeads,
    Record,
    StoreHello,
)
from dafka.testing import MemoryLog, ScriptedPeer

WID = "57000000000000000000000000000001"
RID = "52000000000000000000000000000002"


def make(
    log: MemoryLog | None = None,
    *,
    durable: bool = True,
    max_reply: int = 100_000,
    refresh: float | None = None,
) -> tuple[StoreMachine, ScriptedPeer, MemoryLog]:
    log = log if log is not None else MemoryLog()
    config = StoreConfig(max_fetch_reply=max_reply, heads_refresh=refresh)
    store = StoreMachine(WID, RID, log, config)
    peer = ScriptedPeer(store, log=log if durable else None)
    for message in peer.recv_all():  # a restarted store first asks for heads
        assert isinstance(message, GetHeads)
    return store, peer, log


def filled_log(count: int, topic: str = "hello", producer: str = "P") -> MemoryLog:
    log = MemoryLog()
    log.append(topic, producer, 0, [f"{topic}-{s}".encode() for s in range(count)])
    return log


def test_in_order_records_become_one_persist_and_one_ack_per_partition() -> None:
    store, peer, log = make()
    peer.send(
        Record("hello", "P", 0, b"a"),
        Record("hello", "Q", 0, b"x"),
        Record("hello", "P", 1, b"b"),
        Record("hello", "P", 2, b"c"),
    )
    assert peer.persisted == [
        Persist("hello", "P", 0, (b"a", b"b", b"c")),
        Persist("hello", "Q", 0, (b"x",)),
    ]
    assert log.contents("hello", "P") == [b"a", b"b", b"c"]
    assert sorted(peer.recv_all(), key=repr) == [Ack("P", "hello", 2), Ack("Q", "hello", 0)]
    assert store.durable_heads() == {("hello", "P"): 2, ("hello", "Q"): 0}
    assert store.statistics().stored == 4


def test_ack_waits_for_durability() -> None:
    store, peer, _ = make(durable=False)
    peer.send_record("hello", 0)
    assert len(peer.persisted) == 1
    peer.expect_nothing()
    store.on_durable("hello", peer.peer_id, 0, 0.0)
    store.on_durable("hello", peer.peer_id, 0, 0.0)  # twice: one ACK
    peer.drain()
    assert peer.recv_all() == [Ack(peer.peer_id, "hello", 0)]
    store.on_durable("hello", "UNKNOWN", 5, 0.0)
    peer.drain()
    peer.expect_nothing()


def test_unknown_head_or_gap_fetches_and_retries_until_filled() -> None:
    store, peer, log = make()
    peer.send_record("hello", 3, bytes([3]))  # kept until 0..2 arrive
    fetch = peer.expect(Fetch)
    assert (fetch.producer, fetch.requester, fetch.sequence, fetch.count) == (
        peer.peer_id,
        WID,
        0,
        4,
    )
    assert peer.persisted == []
    peer.tick()  # the reply was lost: ask again
    assert peer.clock.now == 0.5
    assert peer.expect(Fetch).sequence == 0
    peer.tick()
    assert peer.clock.now == 1.5
    assert peer.expect(Fetch).sequence == 0
    peer.send(*(DirectRecord(WID, "hello", peer.peer_id, s, bytes([s])) for s in range(4)))
    assert log.contents("hello", peer.peer_id) == [bytes([s]) for s in range(4)]
    assert peer.recv_all() == [Ack(peer.peer_id, "hello", 3)]
    assert store.next_deadline() is None
    peer.send_record("hello", 2)  # behind: dropped
    peer.send_direct_record(WID + "0", "hello", 4)  # prefix leak: another writer's
    assert len(log.contents("hello", peer.peer_id)) == 4
    stats = store.statistics()
    # duplicates: the reply's 3 (already kept from the live RECORD) and the late 2
    assert (stats.dropped_duplicates, stats.dropped_foreign, stats.fetch_retries) == (2, 1, 2)


def test_head_above_fetches_and_head_at_durable_re_acks() -> None:
    store, peer, _ = make()
    peer.send_head("hello", 1)
    assert (peer.expect(Fetch).sequence, store.statistics().fetches_sent) == (0, 1)
    peer.send(Record("hello", peer.peer_id, 0, b""), Record("hello", peer.peer_id, 1, b""))
    assert peer.recv_all() == [Ack(peer.peer_id, "hello", 1)]  # one batch, one ACK
    peer.send_head("hello", 1)  # the producer may have lost our ACK: send it again
    assert peer.recv_all() == [Ack(peer.peer_id, "hello", 1)]


def test_fetch_is_answered_with_exactly_the_held_range() -> None:
    store, peer, _ = make(filled_log(10))
    peer.send(Fetch("P", "CONSUMER", "hello", 3, 4))
    assert peer.recv_all() == [
        DirectRecord("CONSUMER", "hello", "P", s, f"hello-{s}".encode()) for s in range(3, 7)
    ]
    peer.send(Fetch("P", "CONSUMER", "hello", 8, 10))
    assert [m.sequence for m in peer.recv_all() if isinstance(m, DirectRecord)] == [8, 9]
    peer.send(Fetch("P", "CONSUMER", "hello", 10, 5))  # nothing held there
    peer.send(Fetch("P", "CONSUMER", "hello", 0, 0))
    peer.send(Fetch("Q", "CONSUMER", "hello", 0, 5))
    peer.send(Fetch("P", WID, "hello", 0, 5))  # our own writer
    peer.expect_nothing()
    assert store.statistics().records_served == 6


def test_fetch_reply_is_bounded() -> None:
    _, peer, _ = make(filled_log(50), max_reply=20)
    peer.send(Fetch("P", "CONSUMER", "hello", 5, 1000))
    assert [m.sequence for m in peer.recv_all() if isinstance(m, DirectRecord)] == list(
        range(5, 25)
    )


def test_get_heads_and_consumer_hello_are_answered_per_partition() -> None:
    log = filled_log(10)
    log.append("hello", "Q", 0, [b"q"])
    log.append("world", "R", 0, [b"r", b"r"])
    log.append("hello2", "S", 0, [b"s"])
    _, peer, _ = make(log)
    peer.send(GetHeads("hello", "CONSUMER"))
    assert sorted(peer.recv_all(), key=repr) == [
        DirectHead("CONSUMER", "hello", "P", 9),
        DirectHead("CONSUMER", "hello", "Q", 0),
    ]
    peer.send(ConsumerHello(RID, "CONSUMER", ("world", "nothing")))
    assert peer.recv_all() == [DirectHead("CONSUMER", "world", "R", 1)]
    peer.send(ConsumerHello(RID + "X", "CONSUMER", ("world",)))  # another reader's
    peer.expect_nothing()


def test_consumer_subscription_notice_gets_a_store_hello() -> None:
    store, peer, _ = make()
    store.on_subscription(b"LCONSUMER", True, 0.0)
    store.on_subscription(b"LOTHER", False, 0.0)
    store.on_subscription(b"Mhello", True, 0.0)
    store.on_subscription(b"L", True, 0.0)
    peer.drain()
    assert peer.recv_all() == [StoreHello("CONSUMER", RID)]


def test_a_producer_listening_for_acks_is_greeted_with_the_writer_id() -> None:
    """Issue 18, path 2: the producer counts ACKs only from stores that introduced
    themselves, and a store's ACKs come from its writer. The greeting waits for both of the
    producer's subscriptions (its ACKs, K; STORE-HELLO, L), whichever comes second: one sent
    before L is applied would be lost."""
    store, peer, _ = make()
    writer_hello = StoreHello("PRODUCER.0", store.writer_id)
    store.on_subscription(b"KPRODUCER.0", True, 0.0)  # a new connection: K comes before L
    peer.drain()
    peer.expect_nothing()
    store.on_subscription(b"LPRODUCER.0", True, 0.0)
    peer.drain()
    assert peer.recv_all() == [StoreHello("PRODUCER.0", RID), writer_hello]
    store.on_subscription(b"KPRODUCER.0", True, 0.0)  # a restart (verbose XPUB): again
    peer.drain()
    assert peer.recv_all() == [writer_hello]
    store.on_subscription(b"LPRODUCER.0", False, 0.0)  # gone: no L any more
    store.on_subscription(b"KPRODUCER.0", True, 0.0)
    store.on_subscription(b"KCONSUMERX", True, 0.0)
    store.on_subscription(b"K" + b"x" * 300, True, 0.0)  # no STORE-HELLO can name it
    store.on_subscription(b"L" + b"x" * 300, True, 0.0)
    peer.drain()
    peer.expect_nothing()
    assert store.statistics().store_hellos_sent == 3


def test_restarted_store_continues_from_recovered_heads() -> None:
    store, peer, log = make(filled_log(5))
    assert store.durable_heads() == {("hello", "P"): 4}
    peer.send(Record("hello", "P", 3, b"old"), Record("hello", "P", 5, b"new"))
    assert log.contents("hello", "P")[-2:] == [b"hello-4", b"new"]
    assert peer.recv_all() == [Ack("P", "hello", 5)]


def test_messages_for_other_roles_are_counted_drops() -> None:
    store, peer, _ = make()
    peer.send(Ack("P", "hello", 1), DirectHead("X", "hello", "P", 1), StoreHello("X", "S"))
    peer.expect_nothing()
    assert (store.statistics().dropped_unexpected, store.statistics().dropped_foreign) == (2, 1)


def test_restarted_store_asks_other_stores_for_heads_and_refreshes_them() -> None:
    log = filled_log(3)
    log.append("world", "Q", 0, [b"q"])
    store = StoreMachine(WID, RID, log, StoreConfig(heads_refresh=10.0))
    peer = ScriptedPeer(store, log=log)
    assert peer.recv_all() == [GetHeads("hello", WID), GetHeads("world", WID)]
    # Another store answers on the writer's DIRECT-HEAD subscription: fetch the rest.
    assert b"E" + WID.encode() in peer.subscriptions
    peer.send(DirectHead(WID, "hello", "P", 5))
    fetch = peer.expect(Fetch)
    assert (fetch.sequence, fetch.count) == (3, 3)
    peer.send(*(DirectRecord(WID, "hello", "P", s, b"") for s in range(3, 6)))
    assert peer.recv_all() == [Ack("P", "hello", 5)]
    assert store.next_deadline() == 10.0
    peer.tick()
    assert peer.recv_all() == [GetHeads("hello", WID), GetHeads("world", WID)]
    assert store.next_deadline() == 20.0


def test_persist_never_leaves_holes_under_random_arrival() -> None:
    import random

    rng = random.Random(7)
    _, peer, log = make()
    wanted = [f"r{s}".encode() for s in range(300)]
    for _ in range(40_000):
        if len(log.contents("hello", "P")) == len(wanted):
            break
        batch = []
        for _ in range(rng.randint(1, 8)):
            sequence = rng.randrange(len(wanted))
            batch.append(Record("hello", "P", sequence, wanted[sequence]))
        peer.send(*batch)  # MemoryLog raises if a Persist does not continue the partition
        peer.recv_all()
    assert log.contents("hello", "P") == wanted


class OverReadingLog(MemoryLog):
    """A reader that returns more than the range asked for (the machine keeps the range)."""

    def read_contents(
        self, topic: str, partition: str, first: int, count: int, /
    ) -> tuple[int, list[bytes]]:
        return super().read_contents(topic, partition, max(first - 2, 0), count + 4)


def test_fetch_reply_leaves_as_one_run_per_slice_within_the_range() -> None:
    log = OverReadingLog()
    log.append("hello", "P", 0, [f"hello-{s}".encode() for s in range(10)])
    store = StoreMachine(WID, RID, log, StoreConfig(heads_refresh=None, fetch_reply_slice=3))
    store.take_actions()
    store.on_message(Fetch("P", "CONSUMER", "hello", 2, 5), 0.0)
    runs = [a for a in store.take_actions() if isinstance(a, SendDirectRecords)]
    while store.next_deadline() is not None:  # the next slices, one per turn
        store.on_timer(store.next_deadline() or 0.0)
        runs += [a for a in store.take_actions() if isinstance(a, SendDirectRecords)]
    assert [(r.recipient, r.first_sequence, r.contents) for r in runs] == [
        ("CONSUMER", 2, (b"hello-2", b"hello-3", b"hello-4")),
        ("CONSUMER", 5, (b"hello-5", b"hello-6")),
    ]
    assert [m for r in runs for m in r.messages()] == [
        DirectRecord("CONSUMER", "hello", "P", s, f"hello-{s}".encode()) for s in range(2, 7)
    ]


def test_queued_replies_are_served_oldest_first_each_in_order() -> None:
    """A consumer asking for its next window while its reply is still streaming gets it
    right after, in order: replies are served oldest first, each to its end."""
    store = StoreMachine(
        WID, RID, filled_log(100), StoreConfig(heads_refresh=None, fetch_reply_slice=8)
    )
    store.take_actions()
    store.on_message(Fetch("P", "A", "hello", 0, 20), 0.0)
    store.on_message(Fetch("P", "B", "hello", 50, 10), 0.0)
    store.on_message(Fetch("P", "A", "hello", 20, 20), 0.0)  # A's next window, ahead of time
    store.on_message(Fetch("P", "A", "hello", 60, 5), 0.0)  # not contiguous: a reply of its own
    sent: list[DirectRecord] = []
    now = 0.0
    while True:
        sent += [
            m
            for a in store.take_actions()
            if isinstance(a, SendDirectRecords)
            for m in a.messages()
        ]
        due = store.next_deadline()
        if due is None:
            break
        now = max(now, due)
        store.on_timer(now)
    by = {r: [m.sequence for m in sent if m.recipient == r] for r in ("A", "B")}
    assert by["A"] == [*range(40), *range(60, 65)]
    assert [m.recipient for m in sent] == ["A"] * 20 + ["B"] * 10 + ["A"] * 25
    assert by["B"] == list(range(50, 60))
    assert store.statistics().fetches_answered == 4
    assert store.statistics().records_served == 55


def test_get_heads_for_an_unknown_topic_makes_the_store_ask_and_converge() -> None:
    """A producer left after one store ACKed: the other learns the topic from that store's
    GET-HEADS refresh, asks for its heads, and fetches the partition from it."""
    _, peer, log = make(refresh=10.0)
    peer.send(GetHeads("gone", "OTHERSTOREWRITER"))  # the other store's refresh
    assert peer.recv_all() == [GetHeads("gone", WID)]
    peer.send(DirectHead(WID, "gone", "P", 1))  # the other store's answer
    fetch = peer.expect(Fetch)
    assert (fetch.topic, fetch.sequence, fetch.count) == ("gone", 0, 2)
    peer.send(DirectRecord(WID, "gone", "P", 0, b"a"), DirectRecord(WID, "gone", "P", 1, b"b"))
    assert log.contents("gone", "P") == [b"a", b"b"]
    assert peer.recv_all() == [Ack("P", "gone", 1)]
    peer.send(GetHeads("gone", "OTHERSTOREWRITER"))  # now known: answered, not asked again
    assert peer.recv_all() == [DirectHead("OTHERSTOREWRITER", "gone", "P", 1)]
    peer.tick()
    assert GetHeads("gone", WID) in peer.recv_all()  # and refreshed with the others


def test_topics_learned_from_get_heads_are_bounded() -> None:
    store, peer, _ = make()
    store._learned = store_module.MAX_LEARNED_TOPICS - 1  # as if that many were learned
    peer.send(GetHeads("one", "X"), GetHeads("two", "X"))
    assert peer.recv_all() == [GetHeads("one", WID)]
    assert store.statistics().topics_not_learned == 1
