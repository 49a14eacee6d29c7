"""The public producer: publish records of one partition (its id) on one topic.

``publish`` runs in the application's thread and queues the content; the node's runner
thread hands queued records to the ``ProducerMachine`` in batches, so the application pays a
deque append and an occasional wake-up, not a socket send. A *lone* record - published
:data:`DIRECT_GAP` or more after the previous one (or right after such a record: a paced
publisher's catch-up pair), nothing queued, the runner between turns - is handed to the
machine and sent by the caller's thread itself (``NodeRunner.run_here``): one thread
wake-up less on its way (at 1,000 records/s, about a quarter of the publish -> consumer
latency), while a loop's records still leave in batches from the runner. A lone record
queued while the runner is in mid-turn (an ACK's) is sent at that turn's end
(``NodeRunner.run_at_turn_end``), not in a turn of its own after a wake-up.

Backpressure: at most ``ProducerConfig.max_unacked_records`` records may be published and not
yet ACKed by stores. ``publish`` then blocks until ACKs arrive (``backpressure="block"``,
the default) or raises :class:`BackpressureError` (``"error"``).
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time

from dafka.errors import DafkaError, MessageTooLargeError, NodeFailedError
from dafka.lifecycle import Closing
from dafka.node import BackpressureError, ProducerConfig, ProducerMachine, ProducerStatistics
from dafka.protocol import new_node_id
from dafka.transport.config import TransportConfig
from dafka.transport.runner import Identity, NodeRunner, RunnerStats
from dafka.transport.sockets import ZmqContext

DIRECT_GAP = 50e-6
"""A record published at least this many seconds after the previous one may be sent by the
caller's thread (a lone record), and so may the one right after it; closer ones are queued
for the runner, which sends them in runs: sending in the caller costs it ~5 us more per
record than queueing, a wake-up saved only when the runner would have slept between two
records."""

DRAIN_SLICE = 4096
"""Records handed to the machine (and sent) per runner turn; see ``Producer._drain``."""


class PartitionProducer(Closing):
    """``with PartitionProducer("hello", transport) as p: p.publish(b"...")`` (one partition,
    records, no batching: what the CLI and the benchmarks drive directly)"""

    def __init__(
        self,
        topic: str,
        transport: TransportConfig | None = None,
        config: ProducerConfig | None = None,
        *,
        producer_id: str | None = None,
        context: ZmqContext | None = None,
        ready_timeout: float | None = 10.0,
    ) -> None:
        self.topic = topic
        self.producer_id = producer_id or new_node_id()
        self.config = config or ProducerConfig()
        self._machine = ProducerMachine(topic, self.producer_id, self.config)
        self._pending: collections.deque[bytes] = collections.deque()
        self._scheduled = False
        self._last_publish = 0.0  # time.monotonic() of the previous publish
        self._spaced = False
        """The previous publish came ``DIRECT_GAP`` or more after the one before it: the next
        may follow it closely and still be lone (a pair, not a loop; see ``publish``)."""
        self._next = 0
        self._acked_next = 0  # every sequence below it is ACKed (updated by the runner)
        self._lock = threading.Lock()
        self._lone = b""
        """The record a lone ``publish`` hands to :meth:`_publish_here` (under the lock)."""
        self._publish_lone = self._publish_here
        """Bound once: ``run_here`` gets the same callable each time (no object per record)."""
        self._progress = threading.Condition()
        self._sleepers = 0
        """Threads in ``flush``/``publish`` that may wait on :attr:`_progress` (counted under
        it, from before they look at :attr:`_acked_next`): an ACK's turn notifies only when
        there are any (the Condition's ``with`` and ``notify_all`` are five Python calls per
        ACK). The runner writes ``_acked_next`` before it reads this count, so a thread that
        counted itself after that read sees the new value before it waits."""
        self._closed = False
        self._runner = NodeRunner(
            self._machine,
            [Identity(self.producer_id, topic=topic)],
            transport or TransportConfig(),
            context=context,
            after_turn=self._after_turn,
            name=f"producer-{topic}",
            direct=True,
        )
        self._runner.failure.add_listener(self._on_failure)
        self._runner.start(ready_timeout)  # stops its thread itself when it raises

    # -- application side ------------------------------------------------------------------

    def publish(self, content: bytes | bytearray | memoryview, timeout: float | None = None) -> int:
        """Queue one record; returns its sequence. Thread-safe.

        Blocks (up to ``timeout``) or raises :class:`BackpressureError` when the unacked
        bound is reached, as ``ProducerConfig.backpressure`` says. ``content`` must be
        bytes-like (``TypeError`` here, in the caller's thread, not in the node's) and at
        most ``config.max_message_bytes`` long (:class:`MessageTooLargeError`, nothing
        queued); :class:`NodeFailedError` once the node died.
        """
        if content.__class__ is not bytes:
            if not isinstance(content, bytes | bytearray | memoryview):
                raise TypeError(
                    f"a record's content is bytes, not {type(content).__name__}: "
                    "encode text first (str.encode())"
                )
            content = bytes(content)
        if len(content) > self.config.max_message_bytes:
            raise MessageTooLargeError(
                f"a record of {len(content):,} bytes is over max_message_bytes="
                f"{self.config.max_message_bytes:,}: nothing was queued"
            )
        self._runner.failure.check()
        if self._closed:
            raise DafkaError("publish on a closed producer")
        limit = self.config.max_unacked_records
        with self._lock:
            if self._next - self._acked_next >= limit:
                self._wait_for_room(limit, timeout)
            sequence = self._next
            self._next = sequence + 1
            now = time.monotonic()
            # The record after a spaced one is lone too, however close: a paced publisher
            # that overslept sends two at once (at 1,000 records/s, 4-13 of the 100 slowest
            # records were such seconds queued for a runner's wake-up); a loop's third
            # record is queued, so a loop still goes in runs.
            spaced = now - self._last_publish >= DIRECT_GAP
            lone = spaced or self._spaced
            self._spaced = spaced
            self._last_publish = now
            if lone and not self._pending and not self._scheduled:
                self._lone = content
                if self._runner.run_here(self._publish_lone):
                    self._lone = b""
                    return sequence
                self._lone = b""
            self._pending.append(content)
            if not self._scheduled:
                self._scheduled = True
                # A lone record that found the runner in mid-turn (an ACK's) leaves at that
                # turn's end; else the mailbox wakes the runner for a turn of its own.
                if not (lone and self._runner.run_at_turn_end(self._drain)):
                    self._runner.post(self._drain)
        return sequence

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until stores ACKed every record published so far; False on timeout.

        Raises :class:`NodeFailedError` (at once, also while waiting) if the node died.
        """
        target = self._next
        deadline = None if timeout is None else time.monotonic() + timeout
        failure = self._runner.failure
        with self._progress:
            self._sleepers += 1
            try:
                failure.check()
                while self._acked_next < target:
                    failure.check()
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._progress.wait(remaining)
            finally:
                self._sleepers -= 1
        return True

    @property
    def next_sequence(self) -> int:
        return self._next

    @property
    def acked(self) -> int:
        """How many records (from sequence 0) stores have ACKed."""
        return self._acked_next

    def statistics(self) -> ProducerStatistics:
        return self._runner.call(lambda _now: self._machine.statistics())

    def transport_statistics(self) -> RunnerStats:
        """The runner's counters: messages received and sent, peers connected..."""
        return self._runner.statistics()

    def close(self, flush_timeout: float | None = 5.0) -> None:
        """Wait up to ``flush_timeout`` for ACKs, then leave the cluster.

        Wakes a ``publish`` blocked on backpressure (it raises). Raises
        :class:`NodeFailedError` if the node died (after releasing what it holds).
        """
        failure = self._runner.failure
        if self._closed:
            failure.check()
            return
        try:
            if flush_timeout:
                self.flush(flush_timeout)
        finally:
            with self._progress:
                self._closed = True
                self._progress.notify_all()
            self._runner.stop()
        failure.check()

    def close_after_error(self) -> None:
        """The ``with`` block raised: leave without waiting for the stores."""
        with contextlib.suppress(NodeFailedError):  # the error in flight says more
            self.close(flush_timeout=None)

    # -- runner thread ---------------------------------------------------------------------

    def _wait_for_room(self, limit: int, timeout: float | None) -> None:
        if self.config.backpressure == "error":
            raise BackpressureError(self._next - self._acked_next, 0)
        deadline = None if timeout is None else time.monotonic() + timeout
        failure = self._runner.failure
        with self._progress:
            self._sleepers += 1
            try:
                while self._next - self._acked_next >= limit:
                    failure.check()
                    if self._closed:
                        raise DafkaError("the producer was closed while publish waited for room")
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise BackpressureError(self._next - self._acked_next, 0)
                    self._progress.wait(remaining)
            finally:
                self._sleepers -= 1

    def _publish_here(self, now: float) -> bool:
        """In the caller's thread, the runner's turn lock held (``run_here``): hand the lone
        record (:attr:`_lone`) to the machine, unless records wait in the queue (a drain took
        them out and the byte bound put them back meanwhile: order) or the bound refuses it."""
        if self._pending or self._scheduled:
            return False
        return self._machine.publish_many([self._lone], now) == 1

    def _drain(self, now: float) -> None:
        """Hand queued records to the machine, at most ``DRAIN_SLICE`` per runner turn.

        The slice matters: an application can queue up to ``max_unacked_records`` (a
        million) records while the runner is busy, and handing them all over in one turn
        took seconds, during which the runner sent no beacon and read no socket; the stores
        then expired the producer, dropping every record still queued for them (they came
        back by FETCH, at twice the cost). A slice posts the next one, which runs after the
        rest of the turn.
        """
        self._scheduled = False
        pending = self._pending
        popleft = pending.popleft
        contents = [popleft() for _ in range(min(len(pending), DRAIN_SLICE))]
        published = self._machine.publish_many(contents, now)
        if published < len(contents):
            # The byte bound: the machine took a prefix; the rest goes back to the front of
            # the queue and _after_turn resumes when ACKs make room.
            pending.extendleft(reversed(contents[published:]))
            return
        if pending:
            # Not under self._lock: publish() may hold it while it waits for ACKs that only
            # this thread can process. A second drain posted meanwhile by publish() is
            # harmless (it takes the next slice); what must never happen is records queued
            # with no drain to come, and this post rules that out.
            self._scheduled = True
            self._runner.post(self._drain)

    def _on_failure(self, _error: NodeFailedError) -> None:
        """The runner died: wake every ``flush`` and ``publish`` waiting for ACKs."""
        with self._progress:
            self._progress.notify_all()

    def _after_turn(self, now: float) -> None:
        if self._pending and not self._scheduled:
            self._drain(now)
        acked_next = self._machine.next_sequence - self._machine.unacked
        if acked_next != self._acked_next:
            self._acked_next = acked_next  # before the look at _sleepers (see there)
            if self._sleepers:
                with self._progress:
                    self._progress.notify_all()


__all__ = ["DIRECT_GAP", "DRAIN_SLICE", "PartitionProducer"]
