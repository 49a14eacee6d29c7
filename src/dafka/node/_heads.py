"""The heads watcher: which partitions a topic has and how far each goes, without the data.

A Spark driver plans micro-batches from partition heads alone (the executors read the data):
it must learn of every partition of its topics, and of each partition's last sequence, at a
low cost and with a low latency, without receiving a single RECORD.

Theory. Heads come from three places, and the watcher takes the highest it hears of per
(topic, partition):

* HEAD, which live producers publish every ``head_interval`` (subscribed as ``H`` + topic);
* DIRECT-HEAD, which stores *and* live producers send in answer to our GET-HEADS. The watcher
  sends GET-HEADS for every topic when it subscribes and then every ``refresh`` seconds: the
  period bounds how stale a head may be (HEADs alone would lag by ``head_interval``), and it
  is how partitions of producers that are gone are found;
* a STORE-HELLO (a store saw us subscribe to ``L`` + our id) is answered with CONSUMER-HELLO
  listing our topics, which the store answers with DIRECT-HEADs: a store that starts after us
  tells us what it holds without waiting for the next refresh.

Topics are either named (``subscribe``) or matched by a predicate (``watch_matching``, for
Spark's ``subscribePattern``): Dafka has no topic directory, so a matching topic is found
when a HEAD of it passes (the watcher subscribes to every ``H``: live producers) or a
GET-HEADS of it (every ``G``: a store asks each new peer for the heads of every topic it
holds, so a topic whose producers are gone is found too, once the watcher listens before
the stores learn of it - the client's ``listen_first``), and from then on it is asked for
its heads like a named topic.

*That is all.* Our stores end each heads answer with HEADS-END (docs/protocol.md). A reader
that needs heads no older than its call (:meth:`HeadsMachine.ask_now`) asks under a *round*
id, ``node id + "." + n`` (our ``E`` and ``A`` subscriptions take it: ZeroMQ matches by
prefix), re-asked every ``ROUND_ASK_INTERVAL`` until answered, since a GET-HEADS sent
before a store's SUB connected is lost. The round is *answered* once every store that
greeted us said "that is all" for every watched topic under that round id, and at least as
many stores as any of them counts: then what they hold is in :meth:`heads`, without a
window of silence. :attr:`HeadsMachine.all_ours` says whether every greeted store ever said
"that is all": a C store never does, and then only silence can end the wait.

ZeroMQ matches by prefix: ``H`` + ``hello`` also receives ``hello2``, ``E`` + our id any id
that starts with ours: every message is checked for an exact topic / recipient (counted in
``dropped_foreign`` otherwise).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dafka.node._errors import check_name
from dafka.node.actions import Action, Send, Subscribe
from dafka.protocol import (
    ConsumerHello,
    DataMessage,
    DirectHead,
    GetHeads,
    Head,
    HeadsEnd,
    StoreHello,
)

ROUND_ASK_INTERVAL = 0.1
"""Seconds between two GET-HEADS of a round not answered yet."""


@dataclass(frozen=True, slots=True)
class HeadsStatistics:
    """Counters of a :class:`HeadsMachine` (a snapshot)."""

    topics: int
    partitions: int
    heads_received: int
    get_heads_sent: int
    dropped_foreign: int
    dropped_unexpected: int


class HeadsMachine:
    """Pure state machine of a heads watcher; see the module docstring."""

    def __init__(self, node_id: str, refresh: float = 0.2) -> None:
        if not refresh > 0:
            raise ValueError(f"heads refresh must be > 0 seconds, got {refresh!r}")
        self.node_id = node_id
        self.refresh = refresh
        raw = check_name("heads watcher id", node_id)
        self._out: list[Action] = [
            Subscribe(b"E" + raw),
            Subscribe(b"L" + raw),
            Subscribe(b"A" + raw),
        ]
        self._topics: dict[str, None] = {}
        self._matcher: Callable[[str], bool] | None = None
        self._heads: dict[tuple[str, str], int] = {}
        self.version = 0
        """Grows each time a head moves or a partition appears (cheap change detection)."""
        self._due: float | None = None
        self._stores: set[str] = set()
        self._round = 0
        self._round_id = ""
        self._round_ask: float | None = None
        self._round_ended: dict[str, set[str]] = {}
        """Topic -> the stores whose HEADS-END answered the current round."""
        self.answered_round = 0
        """The last round (:meth:`ask_now`) every store answered with "that is all"."""
        self._ever_ended: set[str] = set()
        self._stores_counted = 0
        self._received = 0
        self._sent = 0
        self._foreign = 0
        self._unexpected = 0

    # -- application side ------------------------------------------------------------------

    def subscribe(self, topic: str, now: float) -> None:
        """Watch ``topic``: its HEADs, and its heads asked now and every ``refresh``."""
        if topic in self._topics:
            return
        raw = check_name("topic", topic)
        self._topics[topic] = None
        if self._matcher is None:
            self._out.append(Subscribe(b"H" + raw))
        self._ask(topic)
        if self._due is None:
            self._due = now + self.refresh

    def ask_now(self, now: float) -> int:
        """Ask the heads of every watched topic now, for a reader that needs them fresh
        rather than up to ``refresh`` seconds old: a new round (see the module docstring),
        whose number :attr:`answered_round` reaches once every store said "that is all"."""
        self._round += 1
        self._round_id = f"{self.node_id}.{self._round}"
        self._round_ended = {topic: set() for topic in self._topics}
        self._ask_round(now)
        self._due = now + self.refresh
        self._check_round()
        return self._round

    @property
    def all_ours(self) -> bool:
        """Some store greeted us and every one ever said "that is all" (none is a C store
        or one that does not know its peers yet): a round's answer can be waited for."""
        return bool(self._stores) and self._stores <= self._ever_ended

    @property
    def may_be_ours(self) -> bool:
        """:attr:`all_ours`, or no store said "that is all" yet (its first answer may still
        be on its way): a round's answer is worth a short wait."""
        return self.all_ours or not self._ever_ended

    def _ask_round(self, now: float) -> None:
        for topic in self._topics:
            self._sent += 1
            self._out.append(Send(GetHeads(topic, self._round_id)))
        self._round_ask = now + ROUND_ASK_INTERVAL

    def _check_round(self) -> None:
        if self.answered_round == self._round or not self._stores:
            return
        enough = max(len(self._stores), self._stores_counted)
        for ended in self._round_ended.values():
            if len(ended) < enough or not self._stores <= ended:
                return
        self.answered_round = self._round
        self._round_ask = None
        self.version += 1

    def _mine(self, recipient: str) -> bool:
        """Addressed to us: our id, or the current round's."""
        return recipient == self.node_id or (bool(self._round_id) and recipient == self._round_id)

    def watch_matching(self, matches: Callable[[str], bool], now: float) -> None:
        """Watch every topic for which ``matches(topic)`` is true, as its HEADs show up."""
        del now
        if self._matcher is None:
            self._out += [Subscribe(b"H"), Subscribe(b"G")]
        self._matcher = matches

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(self._topics)

    def heads(self) -> dict[tuple[str, str], int]:
        """(topic, partition) -> the highest sequence known to exist there."""
        return dict(self._heads)

    @property
    def stores(self) -> int:
        """How many stores greeted us (STORE-HELLO): they answer our GET-HEADS."""
        return len(self._stores)

    def statistics(self) -> HeadsStatistics:
        return HeadsStatistics(
            topics=len(self._topics),
            partitions=len(self._heads),
            heads_received=self._received,
            get_heads_sent=self._sent,
            dropped_foreign=self._foreign,
            dropped_unexpected=self._unexpected,
        )

    # -- NodeMachine -----------------------------------------------------------------------

    def on_message(self, message: DataMessage, now: float) -> None:
        if type(message) is Head:
            self._on_head(message.topic, message.producer, message.sequence, now)
        elif type(message) is DirectHead:
            if not self._mine(message.recipient):
                self._foreign += 1
                return
            self._on_head(message.topic, message.producer, message.sequence, now)
        elif type(message) is HeadsEnd:
            if not self._mine(message.recipient):
                self._foreign += 1
                return
            if message.store not in self._ever_ended:  # news: all_ours may have changed
                self._ever_ended.add(message.store)
                self.version += 1
            self._stores_counted = max(self._stores_counted, message.stores)
            if message.store not in self._stores:  # its greeting was lost or is late
                self._stores.add(message.store)
                self.version += 1
            ended = self._round_ended.get(message.topic)
            if message.recipient == self._round_id and ended is not None:
                ended.add(message.store)
            self._check_round()
        elif type(message) is GetHeads:
            matcher = self._matcher
            if matcher is None or message.topic in self._topics or not matcher(message.topic):
                self._foreign += 1
                return
            self.subscribe(message.topic, now)
        elif type(message) is StoreHello:
            if message.consumer != self.node_id:
                self._foreign += 1
                return
            if message.store not in self._stores:
                self._stores.add(message.store)
                self.version += 1
            if self._topics:
                self._out.append(Send(ConsumerHello(message.store, self.node_id, self.topics)))
        else:
            self._unexpected += 1

    def on_timer(self, now: float) -> None:
        ask = self._round_ask
        if ask is not None and ask <= now:
            self._ask_round(now)
        due = self._due
        if due is None or due > now:
            return
        self._due = now + self.refresh
        for topic in self._topics:
            self._ask(topic)

    def next_deadline(self) -> float | None:
        ask = self._round_ask
        if ask is None or (self._due is not None and self._due < ask):
            return self._due
        return ask

    def take_actions(self) -> list[Action]:
        out = self._out
        self._out = []
        return out

    # -- internals -------------------------------------------------------------------------

    def _ask(self, topic: str) -> None:
        self._sent += 1
        self._out.append(Send(GetHeads(topic, self.node_id)))

    def _on_head(self, topic: str, partition: str, sequence: int, now: float) -> None:
        if topic not in self._topics:
            matcher = self._matcher
            if matcher is None or not matcher(topic):
                self._foreign += 1
                return
            self.subscribe(topic, now)
        self._received += 1
        key = (topic, partition)
        if sequence > self._heads.get(key, -1):
            self._heads[key] = sequence
            self.version += 1


__all__ = ["ROUND_ASK_INTERVAL", "HeadsMachine", "HeadsStatistics"]
