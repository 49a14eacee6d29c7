"""The cluster watcher: what a node can learn of the whole cluster from what it announces.

``dafka status``, ``dafka topics`` and ``dafka top`` need the stores, the topics, the heads
of every partition per store, and the live producers and consumers, without a directory
service (Dafka has none) and without a single RECORD. Everything here comes from messages
every peer already sends (PROTOCOL.md), read by a node that joins like any other:

* **Subscription notices.** Every node connects its data SUB to every peer it discovers and
  subscribes its prefixes there: our data PUB is an XPUB, so we see them. ``K`` + id is a
  producer (its ACKs), ``L`` + id a consumer (STORE-HELLOs for it), ``W`` + id a store's
  reader (CONSUMER-HELLOs for it); ``M``/``H`` + topic a topic someone consumes. ZeroMQ
  notifies an unsubscription when the last subscriber of a prefix leaves, so a node that
  disconnects is gone from the view.
* **HEAD**, subscribed for every topic (``H``): a live producer's partition, its topic and its
  announced head (the last sequence it published).
* **GET-HEADS**, subscribed for every topic (``G``): stores ask for every topic they hold (on
  each new peer and every ``heads_refresh``), consumers for the topics they read: a topic
  whose producers are gone is found this way.
* **DIRECT-HEAD.** We ask every topic we know with GET-HEADS every ``refresh``: stores and
  live producers answer, and the highest answer is the partition's head. A DIRECT-HEAD does not
  say who sent it, so each store is also asked alone: a CONSUMER-HELLO is addressed to one
  store's reader, which answers with DIRECT-HEADs to the consumer id the hello names. Each
  store gets its own *probe* id (our id + ``.N``), and a DIRECT-HEAD to a probe id is that
  store's head of the partition.

**Complete.** The first CONSUMER-HELLO to a store just discovered races our subscription to
its probe id (the store's PUB may answer before it applied the subscription, and ZeroMQ then
drops the answer), so until it is asked again the view may show a healthy store holding
nothing. A store is *probed* once two hellos went to it (the first one and a refresh round
after it); :attr:`ClusterView.complete` is True when every live store is probed (or no topic
is known: there is nothing to ask). Watchers wait for it before they report.

Not announced, so not here: how far a consumer has read (consumers send nothing about their
positions), which consumer reads which topic when several read the same (ZeroMQ tells a
publisher of a prefix's first subscriber only; GET-HEADS and CONSUMER-HELLO name their
sender's topics when they pass), and a store's data size on disk.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dafka.node._errors import check_name
from dafka.node.actions import Action, Send, Subscribe
from dafka.protocol import (
    ConsumerHello,
    DataMessage,
    DirectHead,
    GetHeads,
    Head,
    StoreHello,
    name_problem,
)

Key = tuple[str, str]
"""(topic, partition)"""


@dataclass(frozen=True, slots=True)
class StoreView:
    """One store, by its reader id (the identity that answers heads)."""

    reader_id: str
    live: bool
    """Its reader subscribes to us now (False: it answered once and left)."""
    heads: dict[Key, int]
    """Its last stored sequence of each partition it told us about."""


@dataclass(frozen=True, slots=True)
class ClusterView:
    """A snapshot of what a :class:`ClusterMachine` knows (plain data, safe to share)."""

    topics: tuple[str, ...]
    heads: dict[Key, int]
    """The highest sequence anyone announced for each partition."""
    announced: dict[Key, int]
    """Live producers' HEADs: the last sequence each published."""
    stores: tuple[StoreView, ...]
    producers: dict[str, str | None]
    """Live producer id (= partition) -> its topic once a head of it was heard."""
    consumers: dict[str, tuple[str, ...]]
    """Live consumer id -> the topics it was seen asking for (may be empty)."""
    consumed_topics: tuple[str, ...]
    """Topics at least one live node subscribes RECORDs or HEADs of."""
    version: int = 0
    complete: bool = True
    """Every live store was asked for its heads twice (see the module docstring): its heads
    here are what it holds, not what a lost first answer left out."""

    def partitions(self, topic: str) -> list[str]:
        return sorted(p for t, p in self.heads if t == topic)


_PROBED = 2
"""Hellos a store gets before its heads count (the first may be lost, see the docstring)."""


@dataclass
class _Store:
    probe: str
    live: bool = False
    heads: dict[Key, int] = field(default_factory=dict)
    hellos: int = 0
    """CONSUMER-HELLOs sent to it (up to ``_PROBED``)."""


class ClusterMachine:
    """Pure state machine of the cluster watcher; see the module docstring."""

    def __init__(self, node_id: str, topics: tuple[str, ...] = (), refresh: float = 0.5) -> None:
        if not refresh > 0:
            raise ValueError(f"cluster refresh must be > 0 seconds, got {refresh!r}")
        raw = check_name("cluster watcher id", node_id)
        if len(raw) > 240:
            raise ValueError("cluster watcher id must be at most 240 bytes (probe ids extend it)")
        self.node_id = node_id
        self.refresh = refresh
        self._out: list[Action] = [
            Subscribe(b"H"),
            Subscribe(b"G"),
            Subscribe(b"W"),
            Subscribe(b"E" + raw),
            Subscribe(b"L" + raw),
        ]
        self._topics: dict[str, None] = {}
        self._heads: dict[Key, int] = {}
        self._announced: dict[Key, int] = {}
        self._partition_topic: dict[str, str] = {}  # a partition is one producer's, one topic
        self._stores: dict[str, _Store] = {}
        self._probes: dict[str, _Store] = {}
        self._producers: dict[str, str | None] = {}
        self._consumers: dict[str, None] = {}
        self._asked: dict[str, dict[str, None]] = {}
        self._consumed: dict[str, None] = {}
        self._due: float | None = 0.0  # the first round leaves on the first turn
        self.version = 0
        """Grows whenever the view changes (cheap change detection for the driver)."""
        self.dropped_foreign = 0
        self.dropped_unexpected = 0
        for topic in topics:
            self._add_topic(topic)

    # -- views -----------------------------------------------------------------------------

    def view(self) -> ClusterView:
        return ClusterView(
            topics=tuple(sorted(self._topics)),
            heads=dict(self._heads),
            announced={k: v for k, v in self._announced.items() if k[1] in self._producers},
            stores=tuple(
                StoreView(rid, s.live, dict(s.heads)) for rid, s in sorted(self._stores.items())
            ),
            producers=dict(self._producers),
            consumers={  # a producer subscribes to L + its id too (STORE-HELLO when resuming)
                c: tuple(sorted(self._asked.get(c, {})))
                for c in sorted(self._consumers)
                if c not in self._producers
            },
            consumed_topics=tuple(sorted(self._consumed)),
            version=self.version,
            complete=not self._topics
            or all(s.hellos >= _PROBED for s in self._stores.values() if s.live),
        )

    # -- NodeMachine -----------------------------------------------------------------------

    def on_message(self, message: DataMessage, now: float) -> None:
        del now
        if isinstance(message, Head):
            self._add_topic(message.topic)
            key = (message.topic, message.producer)
            if self._announced.get(key) != message.sequence:
                self._announced[key] = message.sequence
                self.version += 1
            self._head(key, message.sequence)
        elif isinstance(message, DirectHead):
            key = (message.topic, message.producer)
            if message.recipient == self.node_id:
                self._add_topic(message.topic)
                self._head(key, message.sequence)
                return
            store = self._probes.get(message.recipient)
            if store is None:
                self.dropped_foreign += 1
                return
            self._add_topic(message.topic)
            if store.heads.get(key, -1) < message.sequence:
                store.heads[key] = message.sequence
                self.version += 1
            self._head(key, message.sequence)
        elif isinstance(message, GetHeads):
            self._seen_asking(message.requester, (message.topic,))
        elif isinstance(message, ConsumerHello):
            if message.consumer not in self._probes:  # another watcher's probe is no consumer
                self._seen_asking(message.consumer, message.topics)
        elif isinstance(message, StoreHello):
            if message.consumer != self.node_id:
                self.dropped_foreign += 1
                return
            self._store(message.store).live = True
        else:
            self.dropped_unexpected += 1

    def on_subscription(self, prefix: bytes, subscribed: bool, now: float) -> None:
        """An XPUB notice (without its 0x01/0x00 byte): who is out there, see the docstring."""
        del now
        if len(prefix) < 2:
            return
        if name_problem(prefix[1:]) is not None:
            return  # no protocol message can name it: not a node id or topic
        name = prefix[1:].decode("utf-8", "surrogateescape")
        command = prefix[:1]
        if command == b"K":
            if subscribed:
                self._producers.setdefault(name, self._topic_of(name))
            else:
                self._producers.pop(name, None)
        elif command == b"L":
            if subscribed:
                self._consumers[name] = None
            else:
                self._consumers.pop(name, None)
        elif command == b"W":
            if subscribed:
                self._store(name).live = True
            elif name in self._stores:
                self._stores[name].live = False
        elif command in (b"M", b"H"):
            if subscribed:
                self._consumed[name] = None
                self._add_topic(name)
            else:
                self._consumed.pop(name, None)
        else:
            return
        self.version += 1

    def on_timer(self, now: float) -> None:
        due = self._due
        if due is None or due > now:
            return
        self._due = now + self.refresh
        topics = tuple(self._topics)
        for topic in topics:
            self._out.append(Send(GetHeads(topic, self.node_id)))
        if topics:
            for rid, store in self._stores.items():
                self._hello(rid, store, topics)

    def next_deadline(self) -> float | None:
        return self._due

    def take_actions(self) -> list[Action]:
        out = self._out
        self._out = []
        return out

    # -- internals -------------------------------------------------------------------------

    def _topic_of(self, producer: str) -> str | None:
        return self._partition_topic.get(producer)

    def _head(self, key: Key, sequence: int) -> None:
        if sequence > self._heads.get(key, -1):
            if key not in self._heads:
                self._partition_topic[key[1]] = key[0]
                if self._producers.get(key[1], "") is None:
                    self._producers[key[1]] = key[0]
            self._heads[key] = sequence
            self.version += 1

    def _seen_asking(self, requester: str, topics: tuple[str, ...]) -> None:
        asked = self._asked.setdefault(requester, {})
        for topic in topics:
            if topic not in asked:
                asked[topic] = None
                self.version += 1
            self._add_topic(topic)

    def _add_topic(self, topic: str) -> None:
        if topic in self._topics or name_problem(topic.encode("utf-8", "surrogateescape")):
            return
        self._topics[topic] = None
        self.version += 1
        self._out.append(Send(GetHeads(topic, self.node_id)))
        for rid, store in self._stores.items():  # not a probing round: it may come at once
            self._hello(rid, store, (topic,), probing=False)

    def _store(self, reader_id: str) -> _Store:
        store = self._stores.get(reader_id)
        if store is None:
            probe = f"{self.node_id}.{len(self._stores) + 1}"
            store = self._stores[reader_id] = _Store(probe)
            self._probes[probe] = store
            self.version += 1
            self._out.append(Subscribe(b"E" + probe.encode("utf-8", "surrogateescape")))
            if self._topics:
                self._hello(reader_id, store, tuple(self._topics))
        return store

    def _hello(
        self, reader_id: str, store: _Store, topics: tuple[str, ...], probing: bool = True
    ) -> None:
        """Ask one store for its heads of ``topics`` through its probe id. The first hello
        and the refresh rounds count towards *probed*, not a later hello for a topic just
        learned: it can follow the first at once (a store asks for ``__dafka_deletes`` as it
        starts), before the probe subscription is surely applied."""
        self._out.append(Send(ConsumerHello(reader_id, store.probe, topics)))
        if store.hellos < _PROBED and (probing or store.hellos == 0):
            store.hellos += 1
            if store.hellos == _PROBED:
                self.version += 1  # the view may now be complete


__all__ = ["ClusterMachine", "ClusterView", "StoreView"]
