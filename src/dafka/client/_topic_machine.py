"""The pure machine behind a topic-level :class:`Producer`: N partitions, batching, resume.

It is a ``NodeMachine`` (the runner drives it) made of one :class:`ProducerMachine` per
partition, plus what the client adds on top of them:

* *Resume.* A named producer must not reuse sequences its previous run stored: stores keep
  the first record they got for a sequence and would ACK new content as already stored, so
  what is sent after a restart would be lost while ``flush()`` says it was stored. So
  before any partition machine exists, the machine asks the stores for the topic's heads
  (GET-HEADS, answered by each store's reader with one DIRECT-HEAD per stored partition;
  it is re-sent every ``RESUME_ASK_INTERVAL`` because a PUB drops what it sends before a
  store's SUB connected). It also subscribes to STORE-HELLO (``L`` + its first id): every
  store whose reader we are connected to greets us, which proves a store is there.

  The rule: *a resume never goes backwards.* Each partition continues after the **highest**
  head any store reported, and the machine waits for every store it hears of: resuming is
  done ``settle`` seconds after the *last new* store greeted it (or after the first
  DIRECT-HEAD if no greeting came), never on the first answer. Stores do not all answer at
  once: one catching up after a restart may answer first with an older head, and settling
  on it reused sequences the other store held (issue 18: 1,000 acknowledged messages lost).
  A store holding nothing of a partition says nothing about it, so silence cannot be told
  from a late answer: the settle window is what bounds the wait, and each new store gets a
  whole window to answer. A partition no store reported starts at 0.

  *That is all.* Our stores end each heads answer with HEADS-END (docs/protocol.md): how
  many DIRECT-HEADs they just sent and how many live stores they know. Resuming is done at
  once when every store that greeted us (by reader or writer id, or sent a DIRECT-HEAD) has
  said "that is all", and at least as many distinct stores did as any of them knows: a
  store that holds nothing is no longer silence, and a store we have not heard from yet is
  counted by the others. A HEADS-END counts only from the socket of the store it names
  (the driver attributes messages to peers), after exactly ``count`` DIRECT-HEADs from that
  socket since its previous one (a dropped DIRECT-HEAD must not pass as "that is all"). A
  C store never says it: with one in the cluster the settle window decides, as before.
  Until resuming is done
  nothing is published (the client's constructor waits, up to its ``resume_timeout``, and
  raises if no store answered). A producer has no durable record of its own: the stores are
  its record, and a store that stays silent for the whole window (down, partitioned) cannot
  be consulted.
* *Batching.* Messages are queued per partition (``add``) and closed into one RECORD (the
  batch format of ``dafka.records``) when they reach ``batch_size`` bytes or have
  waited ``linger`` seconds (a timer of this machine), or at once when the partition is
  quiet: the client calls :meth:`close_idle` when nothing more is queued, which sends the
  open batch of every partition with fewer than ``ADAPTIVE_IN_FLIGHT`` RECORDs awaiting
  ACKs (a lone message waits for no linger; batches form only under load, as ZeroMQ's and
  NATS's clients do). Unbatched, each message is its own
  RECORD. No RECORD is larger than ``max_message_bytes``: the producer refused every message
  that would not fit a batch of its own, and a closing batch that came out larger (a big
  message joined it) is sent as several RECORDs instead, cut in message order.
* *Delivery.* Each RECORD sent is remembered with the opaque tokens of its messages;
  :meth:`take_delivered` hands back the tokens of RECORDs the partition machine released
  (``min_stores`` ACKed them), with their sequence; :meth:`take_expired` those older than
  the delivery timeout; :meth:`take_rejected` those of a batch that could not be encoded
  (never seen: the producer checks every field at the call; should one slip through, its
  messages fail instead of the node's thread).

Everything here runs in the runner thread; ``now`` comes from the runner.
"""

from __future__ import annotations

import collections
import operator
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from dafka.node import ProducerConfig, ProducerMachine
from dafka.node.actions import Action, AttributedMessages, PeerNotices, Send, Subscribe
from dafka.protocol import (
    MAX_MESSAGE_BYTES,
    Ack,
    DataMessage,
    DirectHead,
    Fetch,
    GetHeads,
    HeadsEnd,
    StoreHello,
)
from dafka.records import HEADER_OVERHEAD, HEADER_SIZE, MESSAGE_OVERHEAD, NO_UUID, encode_batch

RESUME_ASK_INTERVAL = 0.1
"""Seconds between GET-HEADS while resuming."""

_RESUME_ANSWERS = (DirectHead, StoreHello, HeadsEnd)

Token = Any
"""What the client attaches to a message (its future's ticket); opaque here."""


Entry = tuple[
    int,
    Any,  # bytes (a chunk: list[bytes])
    Any,  # bytes | None (a chunk: list[bytes | None] | None)
    "Sequence[tuple[str, bytes]] | None",
    "int | list[int] | None",  # a column chunk: one each
    "bytes | None",
    Any,
]
"""One queued message: (partition index, value, key, headers, timestamp ms (None when
unbatched), uuid, token);
the token is ``(ticket or None, size)`` where size counts value, key and headers and the
ticket (an int) names the message's future in the client (None: no future).

A *chunk* is one entry for many messages of one partition:
``(index, values, keys or None, None, timestamp, None, Chunk)``, the :class:`Chunk` token
saying how many and how big. ``Producer.produce_many``'s messages share one timestamp (an
int) and have no future; the column chunks ``send()``/``produce()`` fill with plain values
(the producer's fast path, no tuple per message) carry a list of timestamps, one each, and
with ``send()`` the list of their futures (``Chunk.futures``). A sent batch in which no
message has a future is remembered with one Chunk token for all its messages, so that
completing it costs the producer nothing per message."""


@dataclass(slots=True)
class Chunk:
    """The token of a chunk entry: ``count`` messages without futures, ``size`` bytes.

    A slots class, not a tuple: tokens of single messages are ``(future, size)`` pairs and
    a Chunk must never unpack as one.

    ``futures``: None (no message has a future) or one future per message, in order (a
    column chunk of ``send()``; batching only). The producer fills a column chunk while
    it is queued (``count``, ``size`` and its lists grow under the producer's lock) and the
    machine sees it only once the runner took it from the queue.

    ``spread`` False: the messages are those of one RECORD (message ``j`` of RECORD ``s`` is
    ``(s, j)``). True: they are ``count`` consecutive unbatched RECORDs of one message each
    (message ``j`` is ``(s + j, 0)``): a delivered run of unbatched RECORDs without futures
    (see ``TopicProducerMachine.take_delivered``)."""

    count: int
    size: int
    spread: bool = False
    futures: list[Any] | None = None


PER_MESSAGE = 16
"""Batch bytes a message costs beyond its size: its length columns and timestamp."""


ADAPTIVE_IN_FLIGHT = 16
"""A partition with fewer RECORDs than this awaiting ACKs is quiet: when nothing more is
queued its open batch leaves at once (:meth:`TopicProducerMachine.close_idle`). At 1k
msg/s a few RECORDs await their ACKs at any time (the store's fsync policy); under load more
than this are in flight, and batches grow to ``batch_size`` or ``linger``."""


@dataclass(slots=True)
class _Open:
    """A partition's batch being filled: the queued entries, columns built when it closes
    (one ``zip`` instead of six appends per message)."""

    opened: float
    entries: list[Entry] = field(default_factory=list)
    size: int = 0
    chunks: int = 0
    futures: int = 0


_Sent = tuple[int, float, list[Token]]
"""RECORDs sent and not yet stored: (sequence, when sent, tokens). Batching: one entry per
RECORD, the tokens of its messages. Unbatched: one entry per partition per ``add_many`` (a
*run*), ``tokens[j]`` the token of RECORD ``sequence + j``: one list per run, not one per
message (per-message containers that live until the ACK cost a quarter of the producer's
CPU in the cyclic garbage collector)."""

_size = operator.itemgetter(1)
_future = operator.itemgetter(0)


class _Unfutured(dict[int, tuple[None, int]]):
    """``(None, size)``, the token of a message without a future, one tuple per size: an
    unbatched chunk's messages get their tokens without a new object each (a tuple per
    message that lived until its ACK set off a young collection every ~700 messages).
    Sizes up to 64 KiB are kept."""

    def __missing__(self, size: int) -> tuple[None, int]:
        token = (None, size)
        if size < 65536:
            self[size] = token
        return token


_unfutured = _Unfutured().__getitem__


class TopicProducerMachine(PeerNotices, AttributedMessages):
    """N :class:`ProducerMachine` s of one topic behind one ``NodeMachine`` interface.

    Messages read from a peer's own socket come through :meth:`on_message_from`: ACKs go
    to their partition's machine with their sender (whose ACKs count is that machine's
    rule), whose refusals this machine sums in ``rejected`` for the driver to log."""

    def __init__(
        self,
        topic: str,
        partitions: Sequence[str],
        config: ProducerConfig,
        *,
        batching: bool,
        batch_size: int,
        linger: float,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        resume: bool,
        settle: float,
        now: float,
        heads: Mapping[str, int] | None = None,
        epoch: int = 0,
    ) -> None:
        """``epoch``: this run's, given to every partition's machine (``ProducerMachine``)."""
        self.topic = topic
        self._epoch = epoch
        self.partitions = list(partitions)
        self._config = config
        self._batching = batching
        self._batch_size = batch_size
        self._max_bytes = max_message_bytes
        self._linger = linger
        self._rejected: list[tuple[list[Token], BaseException]] = []
        self._fenced_told: set[int] = set()
        self._settle = settle
        self._machines: list[ProducerMachine] = []
        self._by_id: dict[str, ProducerMachine] = {}
        self._index = {p: i for i, p in enumerate(self.partitions)}
        self._open: list[_Open | None] = [None] * len(self.partitions)
        self._sent: list[collections.deque[_Sent]] = [collections.deque() for _ in self.partitions]
        self.acked_sent: list[tuple[float, int]] = []
        """(when sent, how many RECORDs) of what ``take_delivered`` returned (the producer's
        ACK latency metric takes and clears them)."""
        self._out: list[Action] = []
        self.heads: dict[str, int] = dict(heads or {})
        """Stored heads learnt while resuming (partition -> last sequence), starting from those
        a caller knows (``heads``, with ``settle=0``: resumed at the first greeting)."""
        self.store_hellos = 0
        self._greeted: set[str] = set()
        self._ended: set[str] = set()
        """Store ids (reader and writer) whose HEADS-END ("that is all") came."""
        self._ended_readers: set[str] = set()
        self._stores_known = 0
        """The most live stores any HEADS-END said its store knows."""
        self._heads_from: dict[str, int] = {}
        """DIRECT-HEADs read from each peer's socket since its last HEADS-END."""
        self.resumed_early = False
        """Resuming ended on every store's "that is all", not on the settle window."""
        self.rejected = 0
        self.last_rejection = ""
        self._settle_at: float | None = None
        self._ask_at: float | None = None
        self.resumed = False
        if resume:
            requester = self.partitions[0]
            self._out += [
                Subscribe(b"E" + requester.encode()),
                Subscribe(b"L" + requester.encode()),
                Subscribe(b"A" + requester.encode()),
            ]
            self._ask_at = now
        else:
            self._start(now)

    # -- resume ------------------------------------------------------------------------------

    def _start(self, now: float) -> None:
        for name in self.partitions:
            machine = ProducerMachine(
                self.topic,
                name,
                self._config,
                next_sequence=self.heads.get(name, -1) + 1,
                now=now,
                epoch=self._epoch,
            )
            self._machines.append(machine)
            self._by_id[name] = machine
        self.resumed = True
        self._ask_at = None
        self._settle_at = None

    def _on_resume_message(self, message: DataMessage, now: float, sender: str | None) -> None:
        if type(message) is DirectHead:
            if message.recipient != self.partitions[0] or message.topic != self.topic:
                return
            if sender is not None:
                self._heads_from[sender] = self._heads_from.get(sender, 0) + 1
            if message.producer in self._index:
                old = self.heads.get(message.producer, -1)
                self.heads[message.producer] = max(old, message.sequence)
                if sender is not None and sender not in self._greeted:
                    self._greet(sender, now)  # a store whose greeting we missed
                if self._settle_at is None:  # an answer whose store's greeting we missed
                    self._settle_at = now + self._settle
        elif type(message) is StoreHello and message.consumer == self.partitions[0]:
            self.store_hellos += 1
            self._greet(message.store, now)
        elif type(message) is HeadsEnd:
            self._on_heads_end(message, now, sender)
        if self._all_said_so():
            self.resumed_early = True
            self._start(now)

    def _greet(self, store: str, now: float) -> None:
        if store not in self._greeted:
            # A new store: it gets a whole settle window to answer (see the module doc).
            self._greeted.add(store)
            self._settle_at = now + self._settle
            self._ask_at = now

    def _on_heads_end(self, message: HeadsEnd, now: float, sender: str | None) -> None:
        """A store's "that is all": believed from its own socket, after all its heads."""
        if message.recipient != self.partitions[0] or message.topic != self.topic:
            return
        if sender is None or sender != message.store:
            return  # who sent it is unknown: the settle window decides
        heads = self._heads_from.pop(sender, 0)
        if heads != message.count:
            return  # a DIRECT-HEAD of this answer is missing: the next answer may do
        self._greet(message.store, now)
        self._greet(message.writer, now)
        self._ended.update((message.store, message.writer))
        self._ended_readers.add(message.store)
        self._stores_known = max(self._stores_known, message.stores)

    def _all_said_so(self) -> bool:
        """Every store heard of said "that is all", and no store is still to be heard of."""
        return (
            bool(self._ended_readers)
            and len(self._ended_readers) >= self._stores_known
            and self._greeted <= self._ended
        )

    def on_peer(self, node_id: str, now: float) -> None:
        """A new peer is connected: while resuming, ask it for heads now."""
        del node_id
        if not self.resumed:
            self._ask_at = now

    @property
    def stores_greeted(self) -> int:
        """How many distinct stores greeted the resume (STORE-HELLO)."""
        return len(self._greeted)

    # -- application side (called in the runner thread) -----------------------------------

    @property
    def machines(self) -> list[ProducerMachine]:
        return self._machines

    def add_many(self, entries: Sequence[Entry], now: float) -> None:
        """Queue messages (only once resumed); a batch reaching ``batch_size`` is sent.

        A chunk joins the open batch whole; when it would take the batch past
        ``batch_size`` the open batch is sent first (the producer cuts chunks to fit)."""
        if not self._batching:
            self._add_unbatched(entries, now)
            return
        open_batches = self._open
        limit = self._batch_size
        for entry in entries:
            index = entry[0]
            batch = open_batches[index]
            token = entry[6]
            if token.__class__ is Chunk:
                grow = token.size + PER_MESSAGE * token.count
                if batch is not None and batch.size + grow > limit:
                    self.close_batch(index, now)
                    batch = None
                if batch is None:
                    batch = open_batches[index] = _Open(now)
                batch.chunks += 1
                batch.size += grow
                if token.futures is not None:
                    batch.futures += 1
            else:
                if batch is None:
                    batch = open_batches[index] = _Open(now)
                batch.size += token[1] + PER_MESSAGE
                if token[0] is not None:
                    batch.futures += 1
            batch.entries.append(entry)
            if batch.size >= limit:
                self.close_batch(index, now)

    def _add_unbatched(self, entries: Sequence[Entry], now: float) -> None:
        """One RECORD per message (content = value); a chunk's messages one by one.

        The RECORDs a call sends to one partition are consecutive: they are published
        with one ``publish_many`` (one ``SendRecords``) and remembered as one run per
        partition (see ``_Sent``)."""
        runs: dict[int, tuple[list[bytes], list[Token]]] = {}
        for entry in entries:
            index = entry[0]
            token = entry[6]
            run = runs.get(index)
            if run is None:
                run = runs[index] = ([], [])
            if token.__class__ is Chunk:
                values = entry[1]
                run[0].extend(values)
                keys = entry[2]
                if keys is None:
                    run[1].extend(map(_unfutured, map(len, values)))
                else:
                    run[1].extend(
                        [
                            (None, len(v) if k is None else len(v) + len(k))
                            for v, k in zip(values, keys, strict=True)
                        ]
                    )
            else:
                run[0].append(entry[1])
                run[1].append(token)
        machines, sent = self._machines, self._sent
        for index, (values, tokens) in runs.items():
            machine = machines[index]
            first = machine.next_sequence
            published = machine.publish_many(values, now)
            for value in values[published:]:  # the client's bounds bind first: never
                machine.publish(value, now)  # raises BackpressureError, as publish does
            sent[index].append((first, now, tokens))

    def close_idle(self, now: float) -> None:
        """Send every open batch whose partition has fewer than ``ADAPTIVE_IN_FLIGHT``
        RECORDs awaiting their ACKs: called when nothing more is queued, so that a message
        sent while the partition is quiet leaves at once instead of after ``linger``."""
        machines = self._machines
        for index, batch in enumerate(self._open):
            if batch is not None and machines[index].unacked < ADAPTIVE_IN_FLIGHT:
                self.close_batch(index, now)

    def close_batch(self, index: int, now: float) -> None:
        """Send partition ``index``'s open batch now (if any): one RECORD, or several when
        it came out larger than ``max_message_bytes``."""
        batch = self._open[index]
        if batch is None:
            return
        self._open[index] = None
        entries = batch.entries
        encoded = self._encode(entries, bool(batch.chunks))
        if encoded is None:
            return
        content, count, tokens = encoded
        if len(content) > self._max_bytes:
            for group in _fitting(entries, self._max_bytes - HEADER_SIZE):
                self._send_group(index, group, now)
            return
        sequence = self._machines[index].publish(content, now)
        if not batch.futures:  # nothing to complete per message: one token for the batch
            tokens = [Chunk(count, batch.size - PER_MESSAGE * count)]
        self._sent[index].append((sequence, now, tokens))

    def _send_group(self, index: int, entries: list[Entry], now: float) -> None:
        """One RECORD of ``entries``, a part of a batch cut to fit ``max_message_bytes``."""
        chunks = sum(1 for e in entries if e[6].__class__ is Chunk)
        encoded = self._encode(entries, bool(chunks))
        if encoded is None:
            return
        content, count, tokens = encoded
        sequence = self._machines[index].publish(content, now)
        if not any(t.futures if t.__class__ is Chunk else _future(t) for t in tokens):
            size = sum(t.size if t.__class__ is Chunk else t[1] for t in tokens)
            tokens = [Chunk(count, size)]
        self._sent[index].append((sequence, now, tokens))

    def _encode(self, entries: list[Entry], chunks: bool) -> tuple[bytes, int, list[Token]] | None:
        """The batch of ``entries``, its message count and their tokens; None when it cannot
        be encoded (its messages are rejected: see :meth:`take_rejected`)."""
        if chunks:
            values, keys, headers, timestamps, uuids, tokens = _columns(entries)
        else:
            _, values, keys, headers, timestamps, uuids, tokens = zip(*entries, strict=True)
        try:
            content = encode_batch(
                values,
                keys=keys,
                headers=headers,
                timestamps=timestamps,
                uuids=[u or NO_UUID for u in uuids] if any(uuids) else None,
            )
        except (ValueError, TypeError, OverflowError, struct.error) as exc:
            self._rejected.append((list(tokens), exc))
            return None
        return content, len(values), list(tokens)

    def take_rejected(self) -> list[tuple[list[Token], BaseException]]:
        """Tokens of batches that could not be encoded, with why (their messages fail)."""
        rejected, self._rejected = self._rejected, []
        return rejected

    def close_all(self, now: float) -> None:
        for index in range(len(self._open)):
            self.close_batch(index, now)

    def open_partitions(self) -> list[int]:
        return [i for i, b in enumerate(self._open) if b is not None]

    def take_delivered(self) -> list[tuple[int, int, list[Token]]]:
        """(partition index, sequence, tokens) of every RECORD now stored.

        Unbatched, a stored run without futures comes back as one entry whose token is a
        spread :class:`Chunk` (the producer then does nothing per message unless it has an
        ``on_delivery`` callback); a run with futures as one entry per RECORD. A run that
        is partly stored is split (ACKs are cumulative)."""
        out: list[tuple[int, int, list[Token]]] = []
        acked = self.acked_sent
        batching = self._batching
        for index, machine in enumerate(self._machines):
            sent = self._sent[index]
            if not sent:
                continue
            acked_next = machine.next_sequence - machine.unacked
            if batching:
                while sent and sent[0][0] < acked_next:
                    sequence, at, tokens = sent.popleft()
                    out.append((index, sequence, tokens))
                    acked.append((at, 1))
                continue
            while sent and sent[0][0] < acked_next:
                first, at, tokens = sent[0]
                stored = acked_next - first
                if stored >= len(tokens):
                    sent.popleft()
                    stored = len(tokens)
                else:
                    sent[0] = (acked_next, at, tokens[stored:])
                    tokens = tokens[:stored]
                acked.append((at, stored))
                if any(map(_future, tokens)):
                    out += [(index, first + j, [t]) for j, t in enumerate(tokens)]
                else:
                    out.append((index, first, [Chunk(stored, sum(map(_size, tokens)), True)]))
        return out

    def take_expired(self, older_than: float) -> list[tuple[int, int, list[Token]]]:
        """RECORDs sent before ``older_than`` and still not stored (their futures fail)."""
        out: list[tuple[int, int, list[Token]]] = []
        for index, sent in enumerate(self._sent):
            while sent and sent[0][1] < older_than:
                sequence, _, tokens = sent.popleft()
                out.append((index, sequence, tokens))
        return out

    def take_fenced(self) -> list[tuple[int, str, list[Token]]]:
        """Partitions a newer run of this producer took over (``ProducerMachine.fenced_by``):
        (index, why, tokens of the RECORDs sent and not stored there - never reported
        stored, their futures fail). A fenced partition stays fenced: later records sent to
        it come back here on the next turn."""
        out: list[tuple[int, str, list[Token]]] = []
        for index, machine in enumerate(self._machines):
            fenced = machine.fenced_by
            if fenced is None:
                continue
            sent = self._sent[index]
            tokens = [t for record in sent for t in record[2]]
            sent.clear()
            if tokens or index not in self._fenced_told:
                self._fenced_told.add(index)
                why = (
                    f"producer {self.partitions[index]!r} of {self.topic!r} was fenced: a newer "
                    f"run (epoch {fenced[0]}, start {fenced[1]}) writes the partition over this "
                    f"run (epoch {machine.epoch}, start {machine.run_start}); the stores refuse "
                    "this run's records"
                )
                out.append((index, why, tokens))
        return out

    def take_unsent(self) -> list[Token]:
        """Tokens of every message not stored yet, forgetting them (on close)."""
        out: list[Token] = []
        for index, batch in enumerate(self._open):
            if batch is not None:
                out += [entry[6] for entry in batch.entries]
                self._open[index] = None
        for sent in self._sent:
            for record in sent:
                out += record[2]
            sent.clear()
        return out

    # -- NodeMachine -----------------------------------------------------------------------

    def on_message(self, message: DataMessage, now: float) -> None:
        cls = type(message)
        if cls is Ack or cls is Fetch:
            machine = self._by_id.get(message.producer)  # type: ignore[union-attr]
            if machine is not None:
                machine.on_message(message, now)
        elif cls is GetHeads:
            for machine in self._machines:
                machine.on_message(message, now)
        elif not self.resumed:
            self._on_resume_message(message, now, None)
        elif cls is StoreHello:  # a store introducing itself to a partition (its writer id)
            machine = self._by_id.get(message.consumer)  # type: ignore[union-attr]
            if machine is not None:
                machine.on_message(message, now)

    def on_message_from(self, message: DataMessage, now: float, sender: str) -> None:
        """A message read from ``sender``'s socket: an ACK goes to its partition with it;
        while resuming, heads answers are counted per sender (see the module doc)."""
        if type(message) is not Ack:
            if not self.resumed and type(message) in _RESUME_ANSWERS:
                self._on_resume_message(message, now, sender)
            else:
                self.on_message(message, now)
            return
        machine = self._by_id.get(message.producer)
        if machine is None:
            return
        rejected = machine.rejected
        machine.on_ack(message, now, sender)
        if machine.rejected != rejected:
            self.rejected += 1
            self.last_rejection = machine.last_rejection

    def on_timer(self, now: float) -> None:
        if not self.resumed:
            if self._settle_at is not None and now >= self._settle_at:
                self._start(now)
            elif self._ask_at is not None and now >= self._ask_at:
                self._out.append(Send(self._get_heads()))
                self._ask_at = now + RESUME_ASK_INTERVAL
            return
        for machine in self._machines:
            due = machine.next_deadline()
            if due is not None and due <= now:
                machine.on_timer(now)
        linger = self._linger
        for index, batch in enumerate(self._open):
            if batch is not None and batch.opened + linger <= now:
                self.close_batch(index, now)

    def _get_heads(self) -> GetHeads:
        """The resume's GET-HEADS: fencing when this run has an epoch and its partitions are
        a named producer's ``f"{name}.{i}"`` (docs/guarantees.md, "Fencing resume"): each
        store answers only after it refuses our older runs' records past what it holds."""
        first = self.partitions[0]
        base = first[:-2]
        if (
            self._epoch
            and first.endswith(".0")
            and self.partitions == [f"{base}.{i}" for i in range(len(self.partitions))]
        ):
            return GetHeads(self.topic, first, self._epoch, len(self.partitions))
        return GetHeads(self.topic, first)

    def next_deadline(self) -> float | None:
        if not self.resumed:
            pending = [d for d in (self._ask_at, self._settle_at) if d is not None]
            return min(pending) if pending else None
        deadlines = [m.next_deadline() for m in self._machines]
        linger = self._linger
        deadlines += [b.opened + linger for b in self._open if b is not None]
        present = [d for d in deadlines if d is not None]
        return min(present) if present else None

    def take_actions(self) -> list[Action]:
        out = self._out
        self._out = []
        for machine in self._machines:
            actions = machine.take_actions()
            if actions:
                out += actions
        return out


def _fitting(entries: list[Entry], room: int) -> list[list[Entry]]:
    """``entries`` cut, in order, into groups whose batch fits ``room`` bytes of columns and
    data: each message is weighed at the most it can cost (:func:`_weight`), and a chunk is
    cut into chunks of its own where it must be. Every message fits alone (the producer
    checked it), so every group does."""
    groups: list[list[Entry]] = []
    group: list[Entry] = []
    used = 0
    for entry in entries:
        for piece in _pieces(entry, room):
            weight = _weight(piece)
            if group and used + weight > room:
                groups.append(group)
                group, used = [], 0
            group.append(piece)
            used += weight
    if group:
        groups.append(group)
    return groups


def _pieces(entry: Entry, room: int) -> list[Entry]:
    """A chunk heavier than ``room`` as chunks that each fit; any other entry as is."""
    token = entry[6]
    if token.__class__ is not Chunk or _weight(entry) <= room:
        return [entry]
    index, values, keys, _, timestamp, _, _ = entry
    futures = token.futures
    out: list[Entry] = []
    start = used = size = 0

    def piece(stop: int) -> Entry:
        return (
            index,
            values[start:stop],
            None if keys is None else keys[start:stop],
            None,
            timestamp[start:stop] if timestamp.__class__ is list else timestamp,
            None,
            Chunk(len(values[start:stop]), size, False, futures and futures[start:stop]),
        )

    for i, value in enumerate(values):
        key = keys[i] if keys is not None else None
        n = len(value) + (len(key) if key is not None else 0)
        if i > start and used + n + MESSAGE_OVERHEAD > room:
            out.append(piece(i))
            start, used, size = i, 0, 0
        used += n + MESSAGE_OVERHEAD
        size += n
    out.append(piece(len(values)))
    return out


def _weight(entry: Entry) -> int:
    """The most ``entry``'s messages can cost in a batch (their bytes and columns)."""
    token = entry[6]
    if token.__class__ is Chunk:
        keys = entry[2]
        key_bytes = 0 if keys is None else sum(map(len, filter(None, keys)))
        return sum(map(len, entry[1])) + key_bytes + MESSAGE_OVERHEAD * token.count
    key = entry[2]
    weight = len(entry[1]) + (0 if key is None else len(key)) + MESSAGE_OVERHEAD
    headers = entry[3]
    if headers:
        weight += sum(len(n.encode()) + len(v) + HEADER_OVERHEAD for n, v in headers)
    return weight


def _columns(
    entries: list[Entry],
) -> tuple[Sequence[Any], ...]:
    """The batch columns of entries that include chunks (one token per entry)."""
    values: list[bytes] = []
    keys: list[bytes | None] = []
    headers: list[Any] = []
    timestamps: list[int | None] = []
    uuids: list[bytes | None] = []
    tokens: list[Token] = []
    for entry in entries:
        token = entry[6]
        if token.__class__ is Chunk:
            n = token.count
            values += entry[1]
            keys += entry[2] if entry[2] is not None else repeat(None, n)
            headers += repeat(None, n)
            stamps = entry[4]
            if isinstance(stamps, list):  # a column chunk's, one each
                timestamps += stamps
            else:
                timestamps += repeat(stamps, n)
            uuids += repeat(None, n)
        else:
            values.append(entry[1])
            keys.append(entry[2])
            headers.append(entry[3])
            timestamps.append(entry[4])  # type: ignore[arg-type]  # a message's: int | None
            uuids.append(entry[5])
        tokens.append(token)
    return values, keys, headers, timestamps, uuids, tokens


__all__ = ["PER_MESSAGE", "RESUME_ASK_INTERVAL", "Chunk", "TopicProducerMachine"]
