"""ClusterMachine (what ``dafka status`` sees) and Discovery's listen-first start."""

from __future__ import annotations

import pytest

from dafka.cli._status import report, status_lines, topics_rows
from dafka.client import ClusterSnapshot
from dafka.errors import ConfigError
from dafka.node import ClusterMachine, Connect, Discovery, DiscoveryConfig, SendBeacon
from dafka.node.actions import Send, Subscribe
from dafka.protocol import (
    ConsumerHello,
    DirectHead,
    GetHeads,
    Head,
    PeerEndpoint,
    Record,
    StoreHello,
    Welcome,
)


def _cluster() -> ClusterMachine:
    """A watcher that met two stores (S1, S2), two producers and a consumer."""
    m = ClusterMachine("ME", refresh=0.5)
    assert m.take_actions() == [
        Subscribe(b"H"),
        Subscribe(b"G"),
        Subscribe(b"W"),
        Subscribe(b"EME"),
        Subscribe(b"LME"),
    ]
    m.on_subscription(b"KP1", True, 0.0)  # producers subscribe to their ACKs
    m.on_subscription(b"KP2", True, 0.0)
    m.on_subscription(b"LP1", True, 0.0)  # a producer greets stores too: not a consumer
    m.on_subscription(b"LC1", True, 0.0)  # a consumer
    m.on_subscription(b"Malpha", True, 0.0)  # ... reading alpha
    m.on_message(StoreHello("ME", "S1"), 0.0)
    m.on_subscription(b"WS2", True, 0.0)  # a store's reader subscribes to its hellos
    return m


def test_stores_get_one_probe_each_and_their_heads_are_theirs() -> None:
    m = _cluster()
    out = m.take_actions()
    assert Send(GetHeads("alpha", "ME")) in out  # a new topic is asked at once
    assert Subscribe(b"EME.1") in out
    assert Subscribe(b"EME.2") in out
    assert Send(ConsumerHello("S2", "ME.2", ("alpha",))) in out
    m.on_message(Head("alpha", "P1", 9), 0.1)  # P1 published up to 9
    m.on_message(DirectHead("ME.1", "alpha", "P1", 9), 0.1)  # S1 holds all of it
    m.on_message(DirectHead("ME.2", "alpha", "P1", 6), 0.1)  # S2 is 3 behind
    m.on_message(DirectHead("ME.2", "beta", "P2", 4), 0.1)  # only S2 holds beta
    m.on_message(DirectHead("ME", "beta", "P2", 4), 0.1)
    m.on_message(DirectHead("OTHER.1", "alpha", "P1", 1), 0.1)  # another watcher's probe
    m.on_message(Record("alpha", "P1", 3, b""), 0.1)  # never subscribed to data
    view = m.view()
    assert view.topics == ("alpha", "beta")
    assert view.heads == {("alpha", "P1"): 9, ("beta", "P2"): 4}
    assert view.announced == {("alpha", "P1"): 9}
    assert [(s.reader_id, s.live, s.heads) for s in view.stores] == [
        ("S1", True, {("alpha", "P1"): 9}),
        ("S2", True, {("alpha", "P1"): 6, ("beta", "P2"): 4}),
    ]
    assert view.producers == {"P1": "alpha", "P2": "beta"}
    assert view.consumers == {"C1": ()}
    assert view.consumed_topics == ("alpha",)
    assert (m.dropped_foreign, m.dropped_unexpected) == (1, 1)

    found = report(ClusterSnapshot(view, {"S1": "tcp://h:1", "C1": "tcp://h:2"}), ["h:5556"])
    alpha = found["topics"]["alpha"]["partitions"][0]
    assert alpha == {
        "partition": "P1",
        "head": 9,
        "producer_head": 9,
        "stores": {"S1": 9, "S2": 6},
        "lag": 3,
    }
    beta = found["topics"]["beta"]["partitions"][0]
    assert beta["stores"] == {"S1": None, "S2": 4}
    assert beta["lag"] == 5  # S1 lacks 0..4
    assert [
        (s["id"], s["address"], s["partitions"], s["records"], s["lag"]) for s in found["stores"]
    ] == [("S1", "tcp://h:1", 1, 10, 5), ("S2", None, 2, 12, 3)]
    assert found["consumers"] == [{"id": "C1", "address": "tcp://h:2", "topics": []}]
    assert [r["lag"] for r in topics_rows(found)] == [3, 5]
    text = "\n".join(status_lines(found))
    assert "topic alpha: 1 partition(s), 10 record(s), 1 producer(s)" in text
    assert "P1  head 9  producer 9  stores [9 6]  lag 3" in text


def test_refresh_asks_every_topic_and_every_store_and_leavers_go() -> None:
    m = _cluster()
    m.on_message(GetHeads("gamma", "SW1"), 0.0)  # a store asking for a topic it holds
    m.on_message(ConsumerHello("S1", "C1", ("alpha", "delta")), 0.0)  # C1 says what it reads
    m.take_actions()
    assert m.next_deadline() == 0.0
    m.on_timer(0.0)
    out = m.take_actions()
    topics = ("alpha", "gamma", "delta")
    assert [a for a in out if isinstance(a, Send) and isinstance(a.message, GetHeads)] == [
        Send(GetHeads(t, "ME")) for t in topics
    ]
    assert Send(ConsumerHello("S1", "ME.1", topics)) in out
    assert m.next_deadline() == 0.5
    assert m.view().consumers == {"C1": ("alpha", "delta")}
    version = m.version
    m.on_subscription(b"KP1", False, 1.0)  # P1 disconnected: all its prefixes go
    m.on_subscription(b"LP1", False, 1.0)
    m.on_subscription(b"LC1", False, 1.0)
    m.on_subscription(b"WS2", False, 1.0)
    m.on_subscription(b"X\x00bad", True, 1.0)  # no node id has a NUL: ignored
    view = m.view()
    assert m.version > version
    assert set(view.producers) == {"P2"}
    assert view.consumers == {}
    assert [(s.reader_id, s.live) for s in view.stores] == [("S1", True), ("S2", False)]
    with pytest.raises(ValueError, match="refresh"):
        ClusterMachine("ME", refresh=0)


def test_listen_first_connects_before_the_first_beacon() -> None:
    d = Discovery({"ME"}, DiscoveryConfig(interval=1.0, timeout=4.0, listen_first=0.3))
    d.on_message(Welcome(), 0.0)
    assert d.started
    assert d.take_actions() == []  # silent: no beacon yet
    d.on_message(PeerEndpoint("A", "tcp://10.0.0.1:1"), 0.1)
    assert d.take_actions() == [Connect("A", "tcp://10.0.0.1:1")]  # connected, no beacon
    assert d.next_deadline() == 0.3
    d.on_timer(0.3)
    assert d.take_actions() == [SendBeacon()]
    d.on_message(PeerEndpoint("B", "tcp://10.0.0.2:1"), 0.4)
    assert d.take_actions() == [Connect("B", "tcp://10.0.0.2:1"), SendBeacon()]
    with pytest.raises(ConfigError, match="listen_first"):
        DiscoveryConfig(listen_first=-1)


def test_the_view_is_complete_once_every_live_store_was_asked_twice() -> None:
    """The first hello to a new store races our probe subscription (its answer may be lost):
    until a refresh round asked again, a store's empty heads may be a lost answer."""
    m = ClusterMachine("ME", refresh=0.5)
    m.on_timer(0.0)
    m.on_subscription(b"WS1", True, 0.0)
    assert m.view().complete  # no topic: nothing to ask
    m.on_message(DirectHead("ME", "alpha", "P1", 3), 0.1)  # the cluster's GET-HEADS answer
    out = m.take_actions()
    assert Send(ConsumerHello("S1", "ME.1", ("alpha",))) in out  # first hello: may be lost
    assert not m.view().complete
    version = m.version
    m.on_timer(0.5)  # the refresh round asks again
    assert Send(ConsumerHello("S1", "ME.1", ("alpha",))) in m.take_actions()
    assert m.view().complete
    assert m.version > version  # a watcher publishes the change
    m.on_subscription(b"WS2", True, 0.6)  # a second store: its first hello may be lost
    assert not m.view().complete
    m.on_subscription(b"WS2", False, 0.7)  # it left: not waited for
    assert m.view().complete
