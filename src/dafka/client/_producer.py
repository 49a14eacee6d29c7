"""The public producer: messages with keys to the N partitions of a topic, with futures.

Design. ``send`` runs in the application's thread: it checks its arguments (mistakes are a
``TypeError``/``ValueError`` there, never an error in the node's thread), picks the
partition, creates the future and appends one tuple to a queue. The node's runner thread
hands queued messages to the :class:`TopicProducerMachine` (batching, one
``ProducerMachine`` per partition) at most ``DRAIN_SLICE`` per turn, and after each turn
resolves the futures of every RECORD the stores acknowledged. So the application pays an
append and an occasional wake-up per message, not a socket send.

The drain slice matters: an application can queue up to ``max_in_flight`` (a million)
messages while the runner is busy; handing them all over in one turn took seconds, during
which the runner sent no beacon and read no socket, and the stores expired the producer,
dropping every record still queued for them (they came back by FETCH, at twice the cost).
A slice posts the next one, which runs after the rest of the turn (the runner runs only
what was posted before a turn).

Partitions. The producer owns ``partitions`` partitions named ``f"{name}.{i}"``, each a
node identity of its own (its own data PUB, as the C reference gives one producer one
identity); all subscriptions go on the first identity's SUB so that a message matching
several prefixes (``K`` + ``w.1`` also matches ``w.10``) arrives once. A key picks its
partition with the message layer's mapping (FNV-1a modulo N, or rendezvous); messages
without a key stick to one partition until ``batch_size`` bytes went to it, then move to
the next. A named producer resumes its partitions (see ``TopicProducerMachine``).

Ordering. Messages of one partition are stored in the order ``send`` was called (one
thread) and a key always maps to the same partition for the same ``name`` and
``partitions``: two messages with the same key are delivered in the order they were sent.
Across a restart with the same name, a resumed partition continues after its stored head,
so the new messages come after the old ones.

Backpressure: at most ``max_in_flight`` messages and ``max_in_flight_bytes`` bytes may be
sent and not yet delivered; ``send`` then blocks (``backpressure="block"``) or raises
:class:`BackpressureError`.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from typing import Any, Protocol

from dafka.client._errors import DeliveryError, RunFencedError
from dafka.client._future import DeliveryFuture, Run, resolve_runs
from dafka.client._metrics import LatencyHistogram, ProducerMetrics, producer_metrics
from dafka.client._partition_producer import DIRECT_GAP
from dafka.client._settings import ProducerSettings, resolve_settings
from dafka.client._topic_machine import PER_MESSAGE, Chunk, TopicProducerMachine
from dafka.errors import ConfigError, DafkaError, MessageTooLargeError, NodeFailedError
from dafka.lifecycle import Closing
from dafka.message import fnv1a32, rendezvous_mapping
from dafka.node import BackpressureError, ProducerConfig, ProducerMachine
from dafka.protocol import DataMessage, GetHeads, new_node_id
from dafka.records import (
    BATCH_OF_ONE,
    HEADER_OVERHEAD,
    MAX_TIMESTAMP,
    UUID_SIZE,
    RecordMetadata,
)
from dafka.transport.runner import Identity, NodeRunner, RunnerStats
from dafka.transport.sockets import ZmqContext

log = logging.getLogger(__name__)

DRAIN_SLICE = 4096
"""Messages handed to the machine per runner turn; see the module docstring."""
_new = object.__new__
ROUTE_CACHE = 65536
"""Keys whose partition is remembered (FNV-1a in Python costs ~0.1 us per key byte)."""


class MetadataFuture(DeliveryFuture[RecordMetadata]):
    """``send``'s future: completed with its metadata's fields, built when read (see
    ``dafka.client._future``: a plain tuple is no object for the cycle collector)."""

    _make = RecordMetadata  # a class, not a function: not bound as a method


class Bridge(Protocol):
    """Completes futures that are not ``concurrent.futures`` ones (``AsyncProducer``'s):
    called in the runner thread with every (future, metadata, error) of a turn at once."""

    def complete(
        self, results: list[tuple[Any, RecordMetadata | None, BaseException | None]]
    ) -> None: ...


OnDelivery = Callable[[RecordMetadata | None, BaseException | None], None]
HeadersArg = Sequence[tuple[str, bytes]] | None


class Producer(Closing):
    """``with Producer("orders", towers="h:5556", name="w1", partitions=4) as p: p.send(b"v")``

    Every :class:`ProducerSettings` field is also a keyword argument.

    ``next_sequences`` (``{partition: sequence}``, every partition of a named producer): the
    caller knows where each partition continues, so the producer does not wait to resume: it
    publishes once a store greeted it (so that the store's ACKs count at once), at the
    sequences given or after a higher head a store reported by then. Only for a caller that
    is provably the partitions' one writer since it learnt their heads - e.g. the Spark
    sink's commit, which appends an ACK right after its task's producer (that resumed) stored
    its last RECORD. A sequence too low loses data: a store keeps the first RECORD it got for
    a sequence and ACKs a later one as stored.
    """

    def __init__(
        self,
        topic: str,
        *,
        settings: ProducerSettings | None = None,
        on_delivery: OnDelivery | None = None,
        context: ZmqContext | None = None,
        next_sequences: Mapping[str, int] | None = None,
        **fields: Any,
    ) -> None:
        s = checked_settings(topic, settings, fields)
        self.settings = s
        self.topic = topic
        self.name = s.name if s.name is not None else new_node_id()
        self.partitions: tuple[str, ...] = tuple(f"{self.name}.{i}" for i in range(s.partitions))
        known = _known_heads(
            self.name if s.name is not None else None, self.partitions, next_sequences
        )
        config = ProducerConfig(
            head_interval=float(s.head_interval),
            min_stores=s.min_stores,
            # the client's bounds (in messages) bind first: the machine's never do
            max_unacked_records=s.max_in_flight,
            max_unacked_bytes=2 * s.max_in_flight_bytes + 64 * s.max_in_flight + (64 << 20),
            max_message_bytes=s.max_message_bytes,
            acks_from=s.acks_from,
        )
        self._on_delivery = on_delivery
        self._index = {p: i for i, p in enumerate(self.partitions)}
        self._route_key = self._key_router(s)
        self._batch_size = s.batch_size
        self._batching = s.batching
        self._max_payload = (
            s.max_message_bytes - BATCH_OF_ONE if s.batching else s.max_message_bytes
        )
        """The most a message may weigh at the call (see _too_large): with batching its value,
        key, headers and their header lengths; without, its value (the RECORD's content)."""
        self._sticky = 0
        self._sticky_bytes = 0
        self._pending: collections.deque[tuple[Any, ...]] = collections.deque()
        self._tails: list[tuple[Any, ...] | None] = [None] * len(self.partitions)
        """Partition -> its column chunk still filling (the last entry queued for it), or
        None: where :meth:`_append` puts a plain value (see there). Under ``_lock``."""
        self._block = s.backpressure == "block"
        self._max_in_flight = s.max_in_flight
        self._max_in_flight_bytes = s.max_in_flight_bytes
        self._futures: dict[int, Any] = {}
        """Ticket -> the future of a message in flight. A message's token carries its ticket
        (an int), not its future: a tuple of ints, bytes and None is one the cycle collector
        stops tracking, and the tokens of a million messages in flight were otherwise walked
        by every full collection with the futures (issue 23)."""
        self._next_ticket = 1  # under _lock; never 0: the machine tests tickets for truth
        self._chunks_queued = 0  # written by the application's threads (under _lock)
        self._chunks_drained = 0  # written by the runner thread
        self._scheduled = False
        self._last_call = 0.0
        """``time.monotonic()`` of the previous drain or unqueued message (``_lone``; under
        ``_lock``)."""
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        """Waited on for room (in flight) and by flush; on ``_lock``, so that a send that
        waits for room does not hold the lock the runner thread takes to drain the queue."""
        self._in_flight = 0
        self._in_flight_bytes = 0
        self._closed = False
        self._resumed = threading.Event()
        self._bridge: Bridge | None = None
        self._delivered = 0
        self._failed = 0
        self._fenced: RunFencedError | None = None
        """Set once a partition is fenced (see RunFencedError): send and flush raise it."""
        self._delivered_bytes = 0
        self._ack_latency = LatencyHistogram()
        resume = (s.resume and s.name is not None) or known is not None
        # a caller that knows the heads waits for the first store's greeting only (its ACKs
        # count from then on), not for every store's heads
        settle = max(0.5, 1.5 * s.beacon_interval) if known is None else 0.0
        self._machine = TopicProducerMachine(
            topic,
            self.partitions,
            config,
            batching=s.batching,
            batch_size=s.batch_size,
            max_message_bytes=s.max_message_bytes,
            linger=s.linger_ms / 1000,
            resume=resume,
            settle=settle,
            now=time.monotonic(),
            heads=known,
            # a resumed run names itself: the wall clock in ms grows from run to run
            # (docs/guarantees.md, "A reused sequence: run epochs")
            epoch=time.time_ns() // 1_000_000 if resume else 0,
        )
        self._runner = NodeRunner(
            self._machine,
            [Identity(p, topic=topic) for p in self.partitions],
            s.transport(),
            context=context,
            route_send=self._route_send,
            after_turn=self._after_turn,
            name=f"producer-{topic}-{self.name}",
            direct=True,
        )
        self._failure = self._runner.failure
        self._failure.add_listener(self._on_failure)
        self._runner.start(s.ready_timeout)  # stops its thread itself when it raises
        # resuming waits a settle window after the last new store: never less than two
        resume_wait = max(s.resume_timeout, 2 * settle)
        if not self._resumed.wait(resume_wait if resume else s.ready_timeout):
            self._runner.stop()
            self._failure.check()
            greeted = self._machine.stores_greeted
            why = (
                "no store told it its partitions' heads"
                if not greeted
                else f"{greeted} store(s) greeted it, and new ones kept coming (resuming "
                f"waits {settle:.2f}s after the last new store for every store's heads)"
            )
            raise DeliveryError(
                f"producer {self.name!r} of {topic!r}: {why} within {resume_wait}s "
                f"(resume_timeout={s.resume_timeout}); a named producer resumes from the "
                "stores and sends nothing before (start the stores, or pass resume=False for "
                "a name known to be new)"
            )
        heads = self._machine.heads
        self.start_offsets: dict[str, int] = {p: heads.get(p, -1) + 1 for p in self.partitions}
        """Partition -> the sequence this run's first RECORD there gets: after the highest
        stored head for a named producer that resumed, else 0."""
        self.resumed_early = self._machine.resumed_early
        """The resume ended on every store's "that is all" (HEADS-END), not on the settle
        window (False too when there was no resume)."""
        if heads:
            log.info("producer %s resumed %s at %s", self.name, topic, heads)

    # -- application side ------------------------------------------------------------------

    def send(
        self,
        value: bytes,
        key: bytes | None = None,
        headers: HeadersArg = None,
        timestamp: int | None = None,
        uuid: bytes | None = None,
    ) -> Future[RecordMetadata]:
        """Queue one message; the future resolves to its :class:`RecordMetadata` once stored.

        Thread-safe. Blocks (or raises :class:`BackpressureError`) at the in-flight bound.
        ``uuid``: the message's 16-byte Gazette UUID (exactly-once producers set it).
        """
        future: Future[RecordMetadata] = _new(MetadataFuture)  # no __init__: see _future
        if (
            key is None
            and headers is None
            and timestamp is None
            and uuid is None
            and value.__class__ is bytes
            and self._batching
        ):
            self._append(value, future)
        else:
            self._enqueue(value, key, headers, timestamp, uuid, future, self._block)
        return future

    def produce(
        self,
        value: bytes,
        key: bytes | None = None,
        headers: HeadersArg = None,
        timestamp: int | None = None,
        uuid: bytes | None = None,
    ) -> None:
        """:meth:`send` without a future (confluent-kafka's ``produce``): the fast path for
        bulk loads, a future per message costs more than the rest of ``send``. Delivery is
        reported to ``on_delivery`` and by :meth:`flush` (what is still in flight)."""
        if (
            key is None
            and headers is None
            and timestamp is None
            and uuid is None
            and value.__class__ is bytes
        ):
            self._append(value, None)
        else:
            self._enqueue(value, key, headers, timestamp, uuid, None, self._block)

    def produce_many(
        self,
        values: Iterable[bytes],
        keys: Iterable[bytes | None] | None = None,
        *,
        timestamp: int | None = None,
    ) -> None:
        """Queue many messages at once, without futures: the bulk-load fast path.

        ``keys`` (as long as ``values``; None entries: no key) route each message as
        :meth:`send` does, and messages of one partition keep their order. All messages of
        a call get one ``timestamp`` (default: now) and no headers. Delivery is reported to
        ``on_delivery`` (per message) and by :meth:`flush` / :attr:`delivered`.

        A call is admitted whole: at the in-flight bounds it blocks until it fits (or
        nothing is in flight), or with ``backpressure="error"`` raises
        :class:`BackpressureError` having queued nothing. Thread-safe.
        """
        if self._fenced is not None:
            raise self._fenced
        values, key_list = many_arguments(values, keys)
        count = len(values)
        if not count:
            return
        if timestamp is None:
            if self._batching:
                timestamp = int(time.time() * 1000)
        else:
            check_timestamp(timestamp)
        size = sum(map(len, values))
        self._check_sizes(values, key_list)
        groups: dict[int, tuple[list[bytes], list[bytes | None] | None]]
        if key_list is None:
            groups = {-1: (values, None)}
        else:
            size += sum(map(len, filter(None, key_list)))
            groups = self._group_by_partition(values, key_list)
        settings = self.settings
        with self._lock:
            if self._failure.error is not None:
                raise self._failure.error
            if self._closed:
                raise DafkaError(f"produce_many on a closed producer ({self.name})")
            if self._in_flight and (
                self._in_flight + count > settings.max_in_flight
                or self._in_flight_bytes + size > settings.max_in_flight_bytes
            ):
                self._wait_for_room(size, settings.backpressure == "block", count)
            self._in_flight += count
            self._in_flight_bytes += size
            for index, (group_values, group_keys) in groups.items():
                self._queue_chunks(index, group_values, group_keys, timestamp)
            if not self._scheduled:
                self._scheduled = True
                self._runner.post(self._drain)

    def _check_sizes(self, values: list[bytes], keys: list[bytes | None] | None) -> None:
        """``produce_many``'s messages each within ``max_message_bytes`` (one pass in C for
        the values and the keys; per message only when the longest value and key together
        would not fit)."""
        room = self._max_payload
        longest = max(map(len, values))
        if self._batching and keys is not None:
            longest += max(map(len, filter(None, keys)), default=0)
        if longest <= room:
            return
        for i, value in enumerate(values):
            key = keys[i] if keys is not None and self._batching else None
            size = len(value) + (len(key) if key is not None else 0)
            if size > room:
                raise self._too_large(size, f"message {i} of produce_many")

    def _too_large(self, size: int, what: str = "message") -> MessageTooLargeError:
        limit = self.settings.max_message_bytes
        if self._batching:
            weighs = f"{size + BATCH_OF_ONE:,} bytes in its RECORD (with the batch's framing)"
        else:
            weighs = f"{size:,} bytes (the RECORD's content is the value)"
        return MessageTooLargeError(
            f"{what} of topic {self.topic!r} weighs {weighs}, over max_message_bytes="
            f"{limit:,}: nothing was queued"
        )

    def _group_by_partition(
        self, values: list[bytes], keys: list[bytes | None]
    ) -> dict[int, tuple[list[bytes], list[bytes | None] | None]]:
        """Messages per partition index (-1: no key, the sticky partition), in order."""
        if len(self.partitions) == 1:
            return {0: (values, keys)}
        route = self._route_key
        groups: dict[int, tuple[list[bytes], list[bytes | None] | None]] = {}
        for value, key in zip(values, keys, strict=True):
            index = -1 if key is None else route(key)
            group = groups.get(index)
            if group is None:
                group = groups[index] = ([], [])
            group[0].append(value)
            group[1].append(key)  # type: ignore[union-attr]
        return groups

    def _queue_chunks(
        self,
        index: int,
        values: list[bytes],
        keys: list[bytes | None] | None,
        timestamp: int | None,
    ) -> None:
        """Append ``values`` of one partition as chunks that each fit a batch (lock held)."""
        count = len(values)
        sizes = list(map(len, values))
        if keys is not None:
            sizes = [n if k is None else n + len(k) for n, k in zip(sizes, keys, strict=True)]
        total = sum(sizes)
        per = total // count + PER_MESSAGE  # what a message costs in its batch
        step = max(1, min(DRAIN_SLICE, self._batch_size // per))
        pending = self._pending
        sticky = index < 0
        for start in range(0, count, step):
            stop = start + step
            size = sum(sizes[start:stop])
            if sticky:
                index = self._sticky
                self._sticky_bytes += size
                if self._sticky_bytes >= self._batch_size:
                    self._sticky = (index + 1) % len(self.partitions)
                    self._sticky_bytes = 0
            chunk_keys = None if keys is None else keys[start:stop]
            chunk = Chunk(min(stop, count) - start, size)
            self._tails[index] = None  # what follows this chunk goes after it
            pending.append((index, values[start:stop], chunk_keys, None, timestamp, None, chunk))
            self._chunks_queued += 1

    def _enqueue(
        self,
        value: bytes,
        key: bytes | None,
        headers: HeadersArg,
        timestamp: int | None,
        uuid: bytes | None,
        future: Any,
        block: bool,
    ) -> None:
        """Check and queue one message whose completion goes to ``future``."""
        if self._fenced is not None:
            raise self._fenced
        if value.__class__ is not bytes:
            value = _as_bytes("value", value)
        size = len(value)
        index = -1
        if key is not None or headers is not None or uuid is not None or timestamp is not None:
            key, headers, timestamp, extra, index = self._check_extras(
                key, headers, timestamp, uuid
            )
            size += extra
            if self._batching:
                weight = size + (HEADER_OVERHEAD * len(headers) if headers else 0)
                if weight > self._max_payload:
                    raise self._too_large(weight)
            elif len(value) > self._max_payload:
                raise self._too_large(len(value))
        else:
            if size > self._max_payload:
                raise self._too_large(size)
            if self._batching:  # unbatched RECORDs carry no timestamp: no clock read
                timestamp = int(time.time() * 1000)
        settings = self.settings
        with self._lock:
            if self._failure.error is not None:
                raise self._failure.error
            if self._closed:
                raise DafkaError(f"send on a closed producer ({self.name})")
            if self._in_flight and (
                self._in_flight >= settings.max_in_flight
                or self._in_flight_bytes + size > settings.max_in_flight_bytes
            ):
                self._wait_for_room(size, block)
            if index < 0:
                index = self._sticky
                self._sticky_bytes += size
                if self._sticky_bytes >= self._batch_size:
                    self._sticky = (index + 1) % len(self.partitions)
                    self._sticky_bytes = 0
            self._in_flight += 1
            self._in_flight_bytes += size
            self._tails[index] = None  # what follows this message goes after it
            ticket = None
            if future is not None:
                ticket = self._next_ticket
                self._next_ticket = ticket + 1
                self._futures[ticket] = future
            self._pending.append((index, value, key, headers, timestamp, uuid, (ticket, size)))
            here = False
            if not self._scheduled:
                self._scheduled = True
                here = self._lone()
                if not here:
                    self._runner.post(self._drain)
        if here:
            self._drain_lone()

    def _lone(self) -> bool:
        """Nothing is queued before this message (``_lock`` held, no drain scheduled) and it
        comes :data:`DIRECT_GAP` or more after the previous drain or unqueued message: the
        caller's thread may send it itself. Closer ones are queued: the runner sends them in
        batches. Asked only when no drain is scheduled: a loop's calls, which find one
        scheduled, read no clock."""
        now = time.monotonic()
        lone = now - self._last_call >= DIRECT_GAP
        self._last_call = now
        return lone

    def _drain_lone(self) -> None:
        """Drain what is queued (a lone message) in the caller's thread, if the runner is
        between turns (``NodeRunner.run_here``: one thread wake-up less on its way, as
        ``PartitionProducer``'s lone record); in mid-turn (an ACK's), at that turn's end
        (``NodeRunner.run_at_turn_end``: no wake-up and no turn of its own); else post the
        drain it was scheduled for. ``_lock`` is not held: the drain takes it. A loop's
        drains are posted as before (batching: a drain takes what queued meanwhile)."""
        if not self._runner.run_here(self._drain_here) and not self._runner.run_at_turn_end(
            self._drain
        ):
            self._runner.post(self._drain)

    def _drain_here(self, now: float) -> bool:
        self._drain(now)
        return True

    def _append(self, value: bytes, future: Any) -> None:
        """``send``/``produce`` of a plain value (no key, headers, timestamp or uuid) with
        batching, ``produce`` without (one RECORD per message: the runner spreads the chunk,
        ``TopicProducerMachine._add_unbatched``; no timestamp is kept, an unbatched RECORD
        carries none): the message joins its partition's column chunk, the last entry queued for
        that partition (``_tails``): its value, its timestamp and its future (``send``) are
        appended to the chunk's lists, its count and size grown. No object per message
        (``produce``) or only its future (``send``): the queued tuple and token of
        :meth:`_enqueue` were two objects per message that lived until the runner took them,
        so the cycle collector ran every ~350 messages and walked them (with the collector
        off, the loop cost 0.7 us per message in the caller's thread instead of 1.0, and the
        runner's 0.37 instead of 0.63; issue 23). The runner thread takes a chunk under
        ``_lock`` and so seals it (:meth:`_drain`); anything else queued for the partition
        seals it too, so that the partition's messages stay in call order. A chunk holds at
        most one batch (``batch_size``, ``DRAIN_SLICE`` messages), and its messages have
        futures or none (``Chunk.futures``)."""
        size = len(value)
        if size > self._max_payload:
            raise self._too_large(size)
        batching = self._batching
        timestamp = int(time.time() * 1000) if batching else 0
        with self._lock:
            if self._failure.error is not None:
                raise self._failure.error
            if self._closed:
                raise DafkaError(f"send on a closed producer ({self.name})")
            if self._in_flight and (
                self._in_flight >= self._max_in_flight
                or self._in_flight_bytes + size > self._max_in_flight_bytes
            ):
                self._wait_for_room(size, self._block)
            index = self._sticky
            sticky = self._sticky_bytes + size
            if sticky >= self._batch_size:
                self._sticky = (index + 1) % len(self.partitions)
                sticky = 0
            self._sticky_bytes = sticky
            self._in_flight += 1
            self._in_flight_bytes += size
            tail = self._tails[index]
            if tail is None:
                tail = self._new_tail(index, future)
            else:
                chunk = tail[6]
                if (
                    chunk.count >= DRAIN_SLICE
                    or chunk.size + size + PER_MESSAGE * (chunk.count + 1) > self._batch_size
                    or (future is None) is not (chunk.futures is None)
                ):
                    tail = self._new_tail(index, future)
            tail[1].append(value)
            if batching:
                tail[4].append(timestamp)
            chunk = tail[6]
            chunk.count += 1
            chunk.size += size
            if future is not None:
                chunk.futures.append(future)
            here = False
            if not self._scheduled:
                self._scheduled = True
                here = self._lone()
                if not here:
                    self._runner.post(self._drain)
        if here:
            self._drain_lone()

    def _new_tail(self, index: int, future: Any) -> tuple[Any, ...]:
        """A new, empty column chunk for partition ``index``, queued (``_lock`` held)."""
        chunk = Chunk(0, 0, False, None if future is None else [])
        tail: tuple[Any, ...] = (index, [], None, None, [] if self._batching else None, None, chunk)
        self._pending.append(tail)
        self._chunks_queued += 1
        self._tails[index] = tail
        return tail

    def _check_extras(
        self, key: bytes | None, headers: HeadersArg, timestamp: int | None, uuid: bytes | None
    ) -> tuple[bytes | None, HeadersArg, int | None, int, int]:
        """``_enqueue`` of a message with more than a value: the checked key, headers and
        timestamp, their size (key bytes, header names' UTF-8 bytes and values), and the
        key's partition (-1: no key)."""
        size = 0
        index = -1
        if key is not None:
            if key.__class__ is not bytes:
                key = _as_bytes("key", key)
            size += len(key)
            index = self._route_key(key)
        if headers is not None:
            headers, header_bytes = check_headers(headers)
            size += header_bytes
        if uuid is not None and (uuid.__class__ is not bytes or len(uuid) != UUID_SIZE):
            raise TypeError(f"uuid must be 16 bytes, got {uuid!r}")
        if not self._batching and (headers or timestamp is not None or uuid is not None):
            raise ValueError(
                "headers, timestamps and uuids are not carried with batching=False "
                "(content = value)"
            )
        if timestamp is None:
            if self._batching:
                timestamp = int(time.time() * 1000)
        else:
            check_timestamp(timestamp)
        return key, headers, timestamp, size, index

    def partition_for(self, key: bytes) -> str:
        """The partition ``key`` maps to (the same for the same name and partitions)."""
        return self.partitions[self._route_key(_as_bytes("key", key))]

    def flush(self, timeout: float | None = None) -> int:
        """Send open batches now and wait up to ``timeout`` until every message sent so far
        is stored (or failed); returns how many are still in flight (0: all done)."""
        if not self._closed:
            self._runner.post(self._machine.close_all)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._room:
            while self._in_flight:
                self._failure.check()
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._room.wait(remaining)
            if self._fenced is not None:
                raise self._fenced
            return self._in_flight

    def __len__(self) -> int:
        """Messages sent and not yet stored or failed."""
        return self._in_flight

    @property
    def delivered(self) -> int:
        """Messages whose future resolved with metadata."""
        return self._delivered

    def transport_statistics(self) -> RunnerStats:
        return self._runner.statistics()

    def metrics(self) -> ProducerMetrics:
        """Messages and bytes out, RECORDs, ACK latency, FETCHes served, drops (a snapshot
        taken in the node's thread; see dafka.client._metrics)."""
        return self._runner.call(self._metrics)

    def _metrics(self, now: float) -> ProducerMetrics:
        del now
        return producer_metrics(
            [m.statistics() for m in self._machine.machines],
            self._ack_latency,
            delivered=self._delivered,
            failed=self._failed,
            delivered_bytes=self._delivered_bytes,
            in_flight=self._in_flight,
            in_flight_bytes=self._in_flight_bytes,
            dropped_transport=self._runner.statistics(),
        )

    def close(self, timeout: float | None = 10.0) -> None:
        """Flush for up to ``timeout``, fail what is still in flight with
        :class:`DeliveryError`, and leave the cluster."""
        if self._closed:
            self._failure.check()
            return
        try:
            if timeout is None or timeout > 0:
                self.flush(timeout)
        finally:
            with self._room:  # on _lock: a send waiting for room does not hold it
                self._closed = True
                self._room.notify_all()
            try:
                if self._failure.error is None:
                    self._runner.call(self._fail_unsent)
            finally:
                self._runner.stop()
        self._failure.check()

    def close_after_error(self) -> None:
        """The ``with`` block raised: leave without waiting for the stores."""
        with contextlib.suppress(NodeFailedError):  # the error in flight says more
            self.close(timeout=0)

    # -- helpers ---------------------------------------------------------------------------

    def _key_router(self, s: ProducerSettings) -> Callable[[bytes], int]:
        """key -> partition index; remembers up to ``ROUTE_CACHE`` keys (then starts over)."""
        n = len(self.partitions)
        if n == 1:
            return lambda key: 0
        compute: Callable[[bytes], int]
        if s.partitioner == "rendezvous":
            parts = self.partitions
            mapping = rendezvous_mapping(lambda k: k, lambda: parts)
            index = self._index
            compute = lambda key: index[mapping(key)]  # noqa: E731
        else:
            compute = lambda key: fnv1a32(key) % n  # noqa: E731
        cache: dict[bytes, int] = {}

        def route(key: bytes) -> int:
            found = cache.get(key)
            if found is None:
                if len(cache) >= ROUTE_CACHE:
                    cache.clear()
                found = cache[key] = compute(key)
            return found

        return route

    def _wait_for_room(self, size: int, block: bool, count: int = 1) -> None:
        """Wait (``_lock`` held: the wait releases it) until ``count`` messages of ``size``
        bytes fit, or nothing is in flight."""
        s = self.settings
        if not block:
            raise BackpressureError(self._in_flight, self._in_flight_bytes)
        while self._in_flight and (
            self._in_flight + count > s.max_in_flight
            or self._in_flight_bytes + size > s.max_in_flight_bytes
        ):
            self._failure.check()
            if self._closed:
                raise DafkaError("the producer was closed while send waited for room")
            self._room.wait()

    def _route_send(self, message: DataMessage) -> int:
        if message.__class__ is GetHeads:
            return 0
        return self._index.get(message.producer, 0)  # type: ignore[union-attr]

    # -- runner thread ---------------------------------------------------------------------

    def _drain(self, now: float) -> None:
        """Hand queued messages to the machine, at most ``DRAIN_SLICE`` per turn (see the
        module docstring). Taken under ``_lock`` (which no caller holds while it waits:
        ``_room`` releases it), so that a column chunk taken is sealed (``_tails``) before
        a caller can append to it again."""
        pending = self._pending
        with self._lock:
            self._scheduled = False
            self._last_call = now  # what comes next is lone only DIRECT_GAP after this
            if self._chunks_queued == self._chunks_drained:  # single messages only
                popleft = pending.popleft
                entries = [popleft() for _ in range(min(len(pending), DRAIN_SLICE))]
            else:
                entries = self._take_weighed()
            more = bool(pending)
            if more:  # a second drain posted meanwhile is harmless: never none to come
                self._scheduled = True
                self._runner.post(self._drain)
        self._machine.add_many(entries, now)
        if self.settings.linger_ms == 0:
            self._machine.close_all(now)
        elif not more:
            self._machine.close_idle(now)

    def _take_weighed(self) -> list[tuple[Any, ...]]:
        """Queued entries up to ``DRAIN_SLICE`` messages, a chunk weighing its count."""
        pending = self._pending
        out: list[tuple[Any, ...]] = []
        budget = DRAIN_SLICE
        chunks = 0
        while pending and budget > 0:
            entry = pending.popleft()
            out.append(entry)
            token = entry[6]
            if token.__class__ is Chunk:
                chunks += 1
                budget -= token.count
                if self._tails[entry[0]] is entry:
                    self._tails[entry[0]] = None  # sealed: the caller starts a new one
            else:
                budget -= 1
        self._chunks_drained += chunks
        return out

    def _after_turn(self, now: float) -> None:
        machine = self._machine
        if not machine.resumed:
            return
        if not self._resumed.is_set():
            self._resumed.set()
        done = machine.take_delivered()
        if done:
            self._resolve(done)
            self._ack_latency.observe_since(now, machine.acked_sent)
            machine.acked_sent.clear()
        for _, why, tokens in machine.take_fenced():
            if self._fenced is None:
                log.error("producer %s: %s", self.name, why)
                self._fenced = RunFencedError(why)
            if tokens:
                self._fail(tokens, RunFencedError(why))
        for tokens, exc in machine.take_rejected():
            log.error(
                "producer %s: a batch of %s could not be encoded: %r", self.name, self.topic, exc
            )
            self._fail(
                tokens, DeliveryError(f"the batch of this message could not be encoded: {exc}")
            )
        expired = machine.take_expired(now - self.settings.delivery_timeout)
        if expired:
            error = DeliveryError(
                f"not stored within delivery_timeout={self.settings.delivery_timeout}s "
                "(no store acknowledged it; it may still be stored later)"
            )
            self._fail([t for _, _, tokens in expired for t in tokens], error)

    def _resolve(self, done: list[tuple[int, int, list[Any]]]) -> None:
        """Completes the futures and callbacks of ``done``: directly, or through the bridge
        (``AsyncProducer``) in one call, after the room is released."""
        if self._bridge is not None or self._on_delivery is not None:
            self._resolve_each(done)
            return
        # The common case, send()/produce() without a callback: per message only a sum and,
        # for a future, an append; futures complete per RECORD (resolve_runs), one lock
        # for the turn, and no object per message (see dafka.client._future).
        topic, partitions, futures = self.topic, self.partitions, self._futures
        runs: list[Run] = []
        count = size = 0
        for index, sequence, tokens in done:
            args = (topic, partitions[index], sequence)
            waiting: list[Any] = []
            indexes: list[int] = []
            i = 0
            for token in tokens:
                if token.__class__ is Chunk:  # produce_many, or a column chunk
                    size += token.size
                    n = token.count
                    if token.futures is not None:  # send()'s, message j of the chunk
                        runs.append((args, token.futures, range(i, i + n)))
                    i += n
                    continue
                ticket, n = token
                size += n
                if ticket is not None:
                    waiting.append(futures.pop(ticket))
                    indexes.append(i)
                i += 1
            count += i
            if waiting:
                runs.append((args, waiting, indexes))
        if runs:
            resolve_runs(runs)
        self._delivered += count
        self._delivered_bytes += size
        self._release(count, size)

    def _resolve_each(self, done: list[tuple[int, int, list[Any]]]) -> None:
        """``_resolve`` with an ``on_delivery`` callback or a bridge: metadata per message."""
        topic, partitions, on_delivery = self.topic, self.partitions, self._on_delivery
        bridge = self._bridge
        bridged: list[tuple[Any, RecordMetadata | None, BaseException | None]] | None = (
            None if bridge is None else []
        )
        futures = self._futures
        count = size = 0
        for index, sequence, tokens in done:
            partition = partitions[index]
            i = 0
            for token in tokens:
                if token.__class__ is Chunk:  # produce_many, or a column chunk
                    n = token.count
                    count += n
                    size += token.size
                    chunk_futures = token.futures
                    if on_delivery is not None or chunk_futures is not None:
                        for j in range(n):
                            meta = _metadata(topic, partition, sequence, i + j, token)
                            if chunk_futures is not None:
                                self._complete(chunk_futures[j], meta, bridged)
                            if on_delivery is not None:
                                self._call_back(meta, None)
                    i += n
                    continue
                ticket, n = token
                size += n
                count += 1
                meta = RecordMetadata(topic, partition, sequence, i)
                i += 1
                if ticket is not None:  # None: produce()
                    self._complete(futures.pop(ticket), meta, bridged)
                if on_delivery is not None:
                    self._call_back(meta, None)
        self._delivered += count
        self._delivered_bytes += size
        self._release(count, size)
        if bridge is not None and bridged:
            bridge.complete(bridged)  # after _release: a completed future lets AsyncProducer retry

    @staticmethod
    def _complete(
        future: Any,
        meta: RecordMetadata,
        bridged: list[tuple[Any, RecordMetadata | None, BaseException | None]] | None,
    ) -> None:
        """``future`` done with ``meta``: through the bridge's list, or now (before the
        message's ``on_delivery`` callback runs)."""
        if bridged is not None:
            bridged.append((future, meta, None))
            return
        try:  # noqa: SIM105 (per message: suppress() builds an object)
            future.set_result(meta)
        except InvalidStateError:  # cancelled by the application
            pass

    def _fail(self, tokens: list[Any], error: BaseException) -> None:
        count = size = 0
        futures: list[Any] = []
        for token in tokens:
            if token.__class__ is Chunk:
                count += token.count
                size += token.size
                if token.futures is not None:
                    futures += token.futures
            else:
                count += 1
                size += token[1]
                if token[0] is not None:
                    futures.append(self._futures.pop(token[0]))
        self._failed += count
        self._release(count, size)  # before completing (see above)
        bridge = self._bridge
        if bridge is not None:
            bridge.complete([(future, None, error) for future in futures])
        else:
            for future in futures:
                with contextlib.suppress(InvalidStateError):
                    future.set_exception(error)
        if self._on_delivery is not None:
            for _ in range(count):
                self._call_back(None, error)

    def _fail_unsent(self, now: float) -> None:
        del now
        with self._lock:
            tokens = [entry[6] for entry in self._pending]
            self._pending.clear()
            self._tails = [None] * len(self.partitions)
            self._chunks_drained = self._chunks_queued
        tokens += self._machine.take_unsent()
        if tokens:
            self._fail(tokens, DeliveryError(f"producer {self.name} closed before it was stored"))

    def _on_failure(self, error: NodeFailedError) -> None:
        """The runner died: every message in flight fails with ``error``; waiters wake.

        Called in the runner thread once the error is set: a caller that takes ``_lock``
        after raises it, and one that holds the lock now is appending to a queued entry
        (a column chunk), which is failed with the others once it let go."""
        with self._lock:
            tokens = [entry[6] for entry in self._pending]
            self._pending.clear()
            self._tails = [None] * len(self.partitions)
        tokens += self._machine.take_unsent()
        if tokens:
            self._fail(tokens, error)
        with self._room:
            self._room.notify_all()

    def _call_back(self, meta: RecordMetadata | None, error: BaseException | None) -> None:
        assert self._on_delivery is not None
        try:
            self._on_delivery(meta, error)
        except Exception:  # the application's bug must not kill the node's thread
            log.exception("on_delivery callback raised")

    def _release(self, count: int, size: int) -> None:
        with self._room:
            self._in_flight -= count
            self._in_flight_bytes -= size
            self._room.notify_all()


def _metadata(topic: str, partition: str, sequence: int, j: int, chunk: Chunk) -> RecordMetadata:
    """Message ``j`` of a chunk that starts at ``sequence`` (a spread chunk: one RECORD each)."""
    if chunk.spread:
        return RecordMetadata(topic, partition, sequence + j, 0)
    return RecordMetadata(topic, partition, sequence, j)


def _known_heads(
    name: str | None, partitions: Sequence[str], next_sequences: Mapping[str, int] | None
) -> dict[str, int] | None:
    """The stored heads a caller vouches for (``next_sequences``), checked: every partition
    of a named producer, sequences >= 0."""
    if next_sequences is None:
        return None
    if name is None:
        raise ConfigError("next_sequences needs a name (the partitions it continues)")
    if set(next_sequences) != set(partitions):
        raise ConfigError(
            f"next_sequences must name exactly the partitions {list(partitions)}, "
            f"got {sorted(next_sequences)}"
        )
    heads: dict[str, int] = {}
    for partition, sequence in next_sequences.items():
        if isinstance(sequence, bool) or not isinstance(sequence, int) or sequence < 0:
            raise ConfigError(
                f"next_sequences[{partition!r}] must be an int >= 0, got {sequence!r}"
            )
        heads[partition] = sequence - 1
    return heads


def checked_settings(
    topic: object, settings: ProducerSettings | None, fields: dict[str, Any]
) -> ProducerSettings:
    """A producer's constructor arguments checked, before any thread starts: its settings,
    the topic and the partitions' names (by the machine's own rules, here rather than in the
    runner). ``Producer`` and ``AsyncProducer`` (which must fail when built, not when
    started) both call this. ``transactional_id=`` is not a setting: a transactional producer
    is its own class, whose calls differ (``begin_transaction``...), so the error names it."""
    if "transactional_id" in fields:
        raise ConfigError(
            "a producer with a transactional_id is a TransactionalProducer: "
            "TransactionalProducer(topic, transactional_id=..., ...) "
            "(from dafka import TransactionalProducer), not Producer(..., transactional_id=...)"
        )
    s = resolve_settings(ProducerSettings, settings, fields)
    if not isinstance(topic, str):
        raise TypeError(f"topic must be a str, got {type(topic).__name__}")
    name = s.name if s.name is not None else new_node_id()
    for i in range(s.partitions):
        ProducerMachine(topic, f"{name}.{i}")
    return s


def _as_bytes(what: str, data: object) -> bytes:
    if isinstance(data, bytes):
        return bytes(data)
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    hint = " (encode it: .encode())" if isinstance(data, str) else ""
    raise TypeError(f"{what} must be bytes, got {type(data).__name__}{hint}")


def many_arguments(
    values: Iterable[Any], keys: Iterable[Any] | None
) -> tuple[list[bytes], list[bytes | None] | None]:
    """``produce_many``'s values and keys, checked: values as bytes, keys as long as values
    (None entries: no key), or None when there are no keys at all."""
    vals = _bytes_list("value", values)
    if keys is None:
        return vals, None
    key_list = _bytes_list("key", keys, none_ok=True)
    if len(key_list) != len(vals):
        raise ValueError(f"produce_many got {len(key_list)} keys for {len(vals)} values")
    return vals, (None if key_list.count(None) == len(vals) else key_list)


def _bytes_list(what: str, items: Iterable[Any], none_ok: bool = False) -> list[Any]:
    """``items`` as a list of ``bytes`` (``None`` too with ``none_ok``), checked in bulk:
    one ``set(map(type, ...))`` instead of a Python check per item."""
    out = items if items.__class__ is list else list(items)
    kinds = set(map(type, out))
    allowed = {bytes, type(None)} if none_ok else {bytes}
    if not kinds <= allowed:
        out = [None if none_ok and item is None else _as_bytes(what, item) for item in out]
    return out


def check_headers(headers: object) -> tuple[tuple[tuple[str, bytes], ...], int]:
    """The headers as a tuple of (str, bytes) pairs and their bytes on the wire (names in
    UTF-8, values); a name that is not text UTF-8 can carry (a lone surrogate) is a
    ``ValueError`` here, not an error in the node's thread when its batch is encoded."""
    if isinstance(headers, (str, bytes)) or not isinstance(headers, Sequence):
        raise TypeError(f"headers must be a list of (str, bytes) pairs, got {headers!r}")
    out = []
    size = 0
    for pair in headers:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
            raise TypeError(f"a header must be a (str, bytes) pair, got {pair!r}")
        name = pair[0]
        try:
            size += len(name.encode())
        except UnicodeEncodeError as exc:
            raise ValueError(f"header name {name!r} is not valid text: {exc.reason}") from None
        value = _as_bytes(f"header {name!r}", pair[1])
        size += len(value)
        out.append((name, value))
    return tuple(out), size


def check_timestamp(timestamp: object) -> None:
    """A message's timestamp: an int of milliseconds since the epoch that the batch format
    carries (``[0, 2**63 - 1]``); anything else is refused at the call."""
    if timestamp.__class__ is not int:
        raise TypeError(f"timestamp must be an int (ms since the epoch), got {timestamp!r}")
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise ValueError(
            f"timestamp {timestamp} is out of range: milliseconds since the epoch in [0, 2**63 - 1]"
        )


__all__ = ["DRAIN_SLICE", "Bridge", "Producer", "checked_settings"]
