"""The store's dafka-only answers: HEADS-END ("that is all") and LOG-START (docs/protocol.md)."""

from __future__ import annotations

import pytest

from dafka.errors import ConfigError
from dafka.node import StoreConfig, StoreMachine
from dafka.protocol import (
    ConsumerHello,
    DirectHead,
    DirectRecord,
    Fetch,
    GetHeads,
    HeadsEnd,
    LogStart,
)
from dafka.testing import MemoryLog, ScriptedPeer

WID = "57000000000000000000000000000001"
RID = "52000000000000000000000000000002"
SETTLE = 2.0


def make(log: MemoryLog | None = None, *, started: float | None = 0.0) -> ScriptedPeer:
    log = log if log is not None else MemoryLog()
    config = StoreConfig(heads_refresh=None, peers_settle=SETTLE)
    store = StoreMachine(WID, RID, log, config, now=started)
    peer = ScriptedPeer(store, log=log)
    peer.recv_all()  # a restarted store first asks for heads
    return peer


def answers(peer: ScriptedPeer) -> list[object]:
    """What the reader sent (a GET-HEADS naming a topic the store does not hold makes its
    writer ask for that topic too: not an answer)."""
    return [m for m in peer.recv_all() if not isinstance(m, GetHeads)]


def filled(count: int, producer: str = "P", topic: str = "hello") -> MemoryLog:
    log = MemoryLog()
    log.append(topic, producer, 0, [b"%d" % s for s in range(count)])
    return log


def test_heads_end_follows_the_direct_heads_once_the_store_knows_its_peers() -> None:
    log = filled(10)
    log.append("hello", "Q", 0, [b"q"])
    peer = make(log)
    peer.send(GetHeads("hello", "ASKER"))
    assert all(isinstance(m, DirectHead) for m in peer.recv_all())  # before peers_settle
    peer.advance(SETTLE)
    peer.send(GetHeads("hello", "ASKER"))
    answer = peer.recv_all()
    assert sorted(answer[:2], key=repr) == [
        DirectHead("ASKER", "hello", "P", 9),
        DirectHead("ASKER", "hello", "Q", 0),
    ]
    assert answer[2:] == [HeadsEnd("ASKER", "hello", RID, WID, 2, 1)]


def test_a_store_holding_nothing_of_a_topic_says_so() -> None:
    """The silence every resume waited out: now one message, count 0."""
    peer = make(started=-SETTLE)
    peer.send(GetHeads("empty", "ASKER"))
    assert answers(peer) == [HeadsEnd("ASKER", "empty", RID, WID, 0, 1)]
    peer.send(ConsumerHello(RID, "ASKER", ("a", "b")))
    assert answers(peer) == [
        HeadsEnd("ASKER", "a", RID, WID, 0, 1),
        HeadsEnd("ASKER", "b", RID, WID, 0, 1),
    ]


def test_the_stores_count_follows_the_other_readers_subscriptions() -> None:
    peer = make(started=-SETTLE)
    store = peer.machine
    assert isinstance(store, StoreMachine)
    store.on_subscription(b"WOTHER-READER", True, 0.0)
    store.on_subscription(b"W" + RID.encode(), True, 0.0)  # our own: not another store
    store.on_subscription(b"WTHIRD", True, 0.0)
    store.on_subscription(b"WTHIRD", True, 0.0)  # again (XPUB_VERBOSE): counted once
    assert store.stores_known == 3
    peer.send(GetHeads("t", "ASKER"))
    assert answers(peer) == [HeadsEnd("ASKER", "t", RID, WID, 0, 3)]
    store.on_subscription(b"WTHIRD", False, 0.0)  # it left: still counted for a while
    peer.send(GetHeads("t", "ASKER"))
    assert answers(peer) == [HeadsEnd("ASKER", "t", RID, WID, 0, 3)]
    peer.advance(store.config.stores_remembered)
    peer.send(GetHeads("t", "ASKER"))
    assert answers(peer) == [HeadsEnd("ASKER", "t", RID, WID, 0, 2)]


def test_a_store_that_left_a_moment_ago_is_still_counted() -> None:
    """A store paused (or cut off) for a moment may hold more than this one: an asker that
    trusted a count without it settled on our lower heads (test_cluster_named_restart)."""
    peer = make(started=-SETTLE)
    store = peer.machine
    assert isinstance(store, StoreMachine)
    store.on_subscription(b"WOTHER", True, 0.0)
    peer.advance(30.0)
    store.on_subscription(b"WOTHER", False, 30.0)  # its connection dropped
    peer.advance(1.0)
    peer.send(GetHeads("t", "ASKER"))
    assert answers(peer) == [HeadsEnd("ASKER", "t", RID, WID, 0, 2)]
    store.on_subscription(b"WOTHER", True, 31.5)  # back
    peer.advance(store.config.stores_remembered + 1.0)
    peer.send(GetHeads("t", "ASKER"))
    assert answers(peer) == [HeadsEnd("ASKER", "t", RID, WID, 0, 2)]


def test_without_a_given_start_the_first_input_starts_the_settle() -> None:
    peer = make(started=None)
    peer.advance(100.0)
    peer.send(GetHeads("t", "ASKER"))  # the first input: the store starts now
    assert answers(peer) == []
    peer.advance(SETTLE)
    peer.send(GetHeads("t", "ASKER"))
    assert answers(peer) == [HeadsEnd("ASKER", "t", RID, WID, 0, 1)]


def test_a_fetch_below_the_first_record_gets_log_start_then_what_is_held() -> None:
    log = filled(10)
    log.drop_before("hello", "P", 6)  # retention
    peer = make(log)
    peer.send(Fetch("P", "ASKER", "hello", 0, 100))
    answer = peer.recv_all()
    assert answer[0] == LogStart("ASKER", "hello", "P", RID, 6)
    assert [m.sequence for m in answer[1:] if isinstance(m, DirectRecord)] == [6, 7, 8, 9]


def test_a_fetch_wholly_below_the_first_record_gets_log_start_alone() -> None:
    log = filled(10)
    log.drop_before("hello", "P", 6)
    peer = make(log)
    peer.send(Fetch("P", "ASKER", "hello", 0, 3))
    assert peer.recv_all() == [LogStart("ASKER", "hello", "P", RID, 6)]


def test_a_partition_retention_emptied_starts_at_its_next_sequence() -> None:
    log = filled(10)
    peer = make(log)
    log.drop_before("hello", "P", 10)  # while it runs (a restart forgets an empty log)
    peer.send(Fetch("P", "ASKER", "hello", 0, 100))
    assert peer.recv_all() == [LogStart("ASKER", "hello", "P", RID, 10)]


def test_fetches_within_the_log_and_other_stores_fetches_get_no_log_start() -> None:
    log = filled(10)
    log.drop_before("hello", "P", 4)
    peer = make(log)
    peer.send(Fetch("P", "ASKER", "hello", 4, 2))
    assert [type(m) for m in peer.recv_all()] == [DirectRecord, DirectRecord]
    peer.send(Fetch("P", "ASKER@ANOTHER-STORE", "hello", 0, 2))  # addressed elsewhere
    peer.expect_nothing()
    peer.send(Fetch("P", f"ASKER@{RID}", "hello", 0, 2))  # addressed to us
    assert peer.recv_all() == [LogStart("ASKER", "hello", "P", RID, 4)]
    assert peer.machine.statistics().log_starts_sent == 1  # type: ignore[attr-defined]


def test_peers_settle_is_checked() -> None:
    with pytest.raises(ConfigError, match="peers_settle"):
        StoreConfig(peers_settle=-1.0)


def test_a_partition_known_but_no_longer_held_starts_at_its_next_sequence() -> None:
    # the store knows the partition (it held 0..9) but its log holds none of it now (a
    # delete emptied it; here a log that forgets it): before, no LOG-START, and a consumer
    # reading from 0 retried its FETCH until its skip rule gave up (~37 s)
    log = filled(10)
    peer = make(log)
    log.clear()
    assert log.start_offset("hello", "P") is None
    peer.send(Fetch("P", "ASKER", "hello", 0, 100))
    assert peer.recv_all() == [LogStart("ASKER", "hello", "P", RID, 10)]
    peer.send(Fetch("P", "ASKER", "hello", 10, 100))  # from its next sequence: nothing
    peer.expect_nothing()


def test_stores_known_before_a_restart_are_counted_until_they_are_forgotten() -> None:
    """A store restarted while its peer is paused hears no subscription from it: counting
    only itself, its "that is all" let a named producer settle on its lower heads."""
    peer = make(started=-SETTLE)
    store = peer.machine
    assert isinstance(store, StoreMachine)
    store.remember_stores(["OTHER", RID, "bad name\x00"], 0.0)  # itself and junk: not counted
    assert store.known_stores == ["OTHER"]
    peer.send(GetHeads("t", "ASKER"))
    assert answers(peer) == [HeadsEnd("ASKER", "t", RID, WID, 0, 2)]
    changed = store.stores_changed
    store.on_subscription(b"WOTHER", True, 1.0)  # it is back: counted as live, not new
    assert store.stores_changed == changed
    store.on_subscription(b"WNEW", True, 1.0)
    assert store.stores_changed == changed + 1
    store.on_subscription(b"WOTHER", False, 2.0)
    store.on_subscription(b"WNEW", False, 2.0)
    peer.advance(store.config.stores_remembered + 2.0)
    peer.send(GetHeads("t", "ASKER"))
    assert answers(peer) == [HeadsEnd("ASKER", "t", RID, WID, 0, 1)]
    assert store.known_stores == []
