"""The read-committed sequencer: at-least-once log in, exactly-once delivery out.

Gazette's ``Sequencer``, rule for rule (see ``shared/EXACTLY-ONCE.md``). State is kept per
(partition, producer) in a :class:`_Partial`:

* ``min_clock`` - the *last ACK*: everything of this producer at or below it is done;
* ``max_clock`` - the highest CONTINUE clock accepted into the open span;
* ``begin``     - offset of the open span's first message, or -1;
* ``ring_start``/``ring_stop`` - the span's entries still in the ring buffer.

Messages are queued one at a time with :meth:`Sequencer.queue_uncommitted`, which decides
an outcome (:class:`QueueOutcome`). If the outcome commits something, the caller drains it
with :meth:`Sequencer.step` until it returns ``None``: the span's messages whose clock is in
``(last_ack, ACK]``, in log order, then the ACK (or the OUTSIDE message) itself.

The ring is a fixed array of the last ``buffer`` queued envelopes with a per-producer
linked list (``_next``) through it, so a commit walks only its own producer's entries.
:meth:`Sequencer.queue_run` queues a *run* - consecutive CONTINUE messages of one producer
with strictly increasing clocks, which the caller checked, e.g. a batched RECORD - as one
entry: the same decisions as queueing each of its messages, one ring entry instead of one
per message. A run entry has a weight (its bytes, say); with ``max_weight`` the oldest
entries leave the ring while the runs in it would weigh more (entries leave in the order
they came, as they do at the head). A commit delivers a run as its one envelope when every
message of it is committed, and splits it with ``split_run`` otherwise. When
a span has partly fallen out of the ring, :meth:`step` raises :class:`MustStartReplay`
naming ``[begin, first buffered)``; the caller reads that range read-uncommitted and hands
it to :meth:`start_replay` - envelopes one message each, or :class:`ReplayedRun` items (a
run of one producer's messages, e.g. a batched RECORD read again, delivered whole when the
commit covers all of it, as a run in the ring is). The sequencer itself does no I/O.

A checkpoint (:meth:`checkpoint`) is the read-through offsets and a
:class:`ProducerState` per producer. It may be taken between two :meth:`step` calls: state
is tightened as each delivered message is *done* (the next ``step``), and the offset of a
partition only passes a committing ACK once its whole span is delivered, so a sequencer
restored from the checkpoint re-reads the ACK and delivers exactly the rest.

The per-message path is deliberately plain: UUID fields come from shifts of ``uuid.int``,
state lives in ``__slots__`` objects and preallocated lists, and nothing is allocated for a
message except its producer's state the first time it is seen.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import IntEnum
from typing import Any, Generic, NamedTuple, TypeVar

from dafka.message._errors import MustStartReplay, ReplayError, ReplayFailure, SequencerError
from dafka.message._types import Envelope, Message
from dafka.message._uuid import Flags, ProducerID

__all__ = [
    "Anomaly",
    "ProducerState",
    "QueueOutcome",
    "ReplayRange",
    "ReplayedRun",
    "Sequencer",
    "SequencerCheckpoint",
    "SplitRun",
]

_log = logging.getLogger("dafka.message.sequencer")

M = TypeVar("M", bound=Message)

SplitRun = Callable[[Envelope[M]], list[tuple[Envelope[M], int]]]
"""``split_run(env)``: the messages of a run queued with :meth:`Sequencer.queue_run`, as
``(envelope, clock)`` in log order (used only when a commit covers part of the run)."""

_OUTSIDE = int(Flags.OUTSIDE_TXN)
_CONTINUE = int(Flags.CONTINUE_TXN)
_ACK = int(Flags.ACK_TXN)


class QueueOutcome(IntEnum):
    """What :meth:`Sequencer.queue_uncommitted` decided (Gazette's ``QueueOutcome``)."""

    OUTSIDE_ALREADY_ACKED = 0
    """An OUTSIDE message at or below the last ACK: a duplicate, dropped."""
    OUTSIDE_COMMIT = 1
    """An OUTSIDE message committed on its own: drain it with ``step``."""
    CONTINUE_ALREADY_ACKED = 2
    """A CONTINUE message at or below the last ACK: a duplicate, dropped."""
    CONTINUE_TXN_CLOCK_LARGER = 3
    """A CONTINUE message not above the open span's largest clock: dropped."""
    CONTINUE_BEGIN_SPAN = 4
    """A CONTINUE message opened a span (held until its ACK)."""
    CONTINUE_EXTEND_SPAN = 5
    """A CONTINUE message extended the open span."""
    ACK_ROLLBACK = 6
    """An ACK at or below the last ACK rolled the open span back."""
    ACK_EMPTY = 7
    """An ACK with no open span: drain it (alone) with ``step``."""
    ACK_COMMIT_RING = 8
    """An ACK committed a span held entirely in the ring: drain with ``step``."""
    ACK_COMMIT_REPLAY = 9
    """An ACK committed a span partly evicted from the ring: replay, then ``step``."""


# Plain ints for the hot path: returning a module constant is cheaper than an enum lookup.
_O_OUTSIDE_ACKED = QueueOutcome.OUTSIDE_ALREADY_ACKED
_O_OUTSIDE_COMMIT = QueueOutcome.OUTSIDE_COMMIT
_O_CONTINUE_ACKED = QueueOutcome.CONTINUE_ALREADY_ACKED
_O_CONTINUE_LARGER = QueueOutcome.CONTINUE_TXN_CLOCK_LARGER
_O_BEGIN = QueueOutcome.CONTINUE_BEGIN_SPAN
_O_EXTEND = QueueOutcome.CONTINUE_EXTEND_SPAN
_O_ROLLBACK = QueueOutcome.ACK_ROLLBACK
_O_ACK_EMPTY = QueueOutcome.ACK_EMPTY
_O_COMMIT_RING = QueueOutcome.ACK_COMMIT_RING
_O_COMMIT_REPLAY = QueueOutcome.ACK_COMMIT_REPLAY


@dataclass(frozen=True, slots=True)
class ProducerState:
    """A producer's state within a partition, as saved in a checkpoint.

    ``last_ack`` is the clock of its last ACK or OUTSIDE message (everything at or below it
    is done); ``begin`` is the offset of the first message of its open span, or -1.
    """

    partition: str
    producer: ProducerID
    last_ack: int
    begin: int

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form (producer as 12 hex digits)."""
        return {
            "partition": self.partition,
            "producer": self.producer.hex(),
            "last_ack": self.last_ack,
            "begin": self.begin,
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> ProducerState:
        """Inverse of :meth:`to_json`."""
        return cls(
            str(document["partition"]),
            ProducerID.fromhex(str(document["producer"])),
            int(document["last_ack"]),
            int(document["begin"]),
        )


class SequencerCheckpoint(NamedTuple):
    """Read-through offsets per partition and producer states: restores a Sequencer."""

    offsets: dict[str, int]
    states: list[ProducerState]


class ReplayRange(NamedTuple):
    """The ``[begin, end)`` byte range of ``partition`` that must be replayed."""

    partition: str
    begin: int
    end: int


class ReplayedRun(NamedTuple, Generic[M]):
    """A replay item (:meth:`Sequencer.start_replay`) standing for the messages
    ``[envelope.begin, envelope.end)`` of ``producer`` (a 48-bit int), whose clocks rise
    strictly from ``first`` to ``last`` (one message: ``first == last``, any clock).

    The caller vouches for that shape (as for :meth:`Sequencer.queue_run`); the sequencer
    checks the bounds as for an envelope. Stepping delivers the envelope whole when every
    message of it is committed (``first`` above the producer's last delivered clock,
    ``last`` at or below the ACK), and otherwise splits it (``split_run``) and decides its
    messages one by one: exactly what replaying them one by one decides. The message of
    the envelope is never asked for its UUID, so it may be any object (a reader's batched
    RECORD): a replayed span costs one item per RECORD, not a wrapper per message.
    """

    envelope: Envelope[M]
    producer: int
    first: int
    last: int


class Anomaly(NamedTuple):
    """Something the sequencer tolerated but that a person should know about.

    ``kind`` is one of:

    * ``"ack_regression"`` - an ACK below the last ACK: the producer's checkpoint went
      back in time, ``last_ack`` moved backwards and exactly-once weakened to at-least-once;
    * ``"outside_with_open_span"`` - an OUTSIDE message discarded an open span (mixed use
      of committed and uncommitted publishing by one producer);
    * ``"unexpected_flags"`` - flags other than 0, 1, 2; handled as OUTSIDE.
    """

    kind: str
    partition: str
    producer: ProducerID
    clock: int
    flags: int
    begin: int
    end: int
    last_ack: int


class _Partial:
    """Sequencing state of one producer in one partition (Gazette's ``partialSeq``)."""

    __slots__ = (
        "begin",
        "max_clock",
        "min_clock",
        "partition",
        "producer",
        "ring_start",
        "ring_stop",
    )

    def __init__(self, partition: str, producer: int, min_clock: int, begin: int) -> None:
        self.partition = partition
        self.producer = producer
        self.min_clock = min_clock
        self.max_clock = min_clock
        self.begin = begin
        self.ring_start = -1
        self.ring_stop = -1


def _horizon_ns(horizon: float | timedelta) -> int:
    """A duration in whole nanoseconds (exact for timedeltas)."""
    if isinstance(horizon, timedelta):
        return (
            horizon.days * 86_400 + horizon.seconds
        ) * 1_000_000_000 + horizon.microseconds * 1000
    return round(horizon * 1_000_000_000)


class Sequencer(Generic[M]):
    """Turns read-uncommitted envelopes into read-committed ones (see the module docstring).

    ``offsets`` and ``states`` restore a checkpoint; ``buffer`` is the ring size (at least
    1); ``on_anomaly`` receives every :class:`Anomaly` (the default logs a warning).
    Not thread-safe: one sequencer per reading loop.
    """

    def __init__(
        self,
        offsets: Mapping[str, int] | None = None,
        states: Iterable[ProducerState] = (),
        buffer: int = 8192,
        on_anomaly: Callable[[Anomaly], None] | None = None,
        *,
        max_weight: int | None = None,
        split_run: SplitRun[M] | None = None,
    ) -> None:
        size = max(1, int(buffer))
        self._offsets: dict[str, int] = dict(offsets or {})
        self._last_offsets: dict[str, int] = dict(self._offsets)
        self._partials: dict[str, dict[int, _Partial]] = {}
        for state in states:
            self._partials.setdefault(state.partition, {})[int(state.producer)] = _Partial(
                state.partition, int(state.producer), state.last_ack, state.begin
            )
        self._emit: _Partial | None = None
        self._emit_end = 0  # End offset of the message that committed ``_emit``.
        self._replay_needed = False  # The pending commit must be (re)replayed first.
        self._dequeued: Envelope[M] | None = None
        self._dequeued_clock = 0
        self._replay_it: Iterator[Envelope[M] | ReplayedRun[M]] | None = None
        self._size = size
        self._head = 0
        self._ring_env: list[Envelope[M] | None] = [None] * size
        self._ring_clock: list[int] = [0] * size
        self._ring_owner: list[_Partial | None] = [None] * size
        self._next: list[int] = [-1] * size
        # Runs (queue_run): an entry with a weight is a run; its first clock (its last is in
        # _ring_clock). Weights are zeroed as entries leave, so _weight is the ring's.
        self._ring_weight: list[int] = [0] * size
        self._ring_first: list[int] = [0] * size
        self._weight = 0
        self._max_weight = max_weight
        self._split_run = split_run
        self._split: list[tuple[Envelope[M], int]] = []  # a run stepped message by message
        # Absolute ring positions (wraps * size + index): every entry queued before _tail
        # has left the ring (the oldest may be further on: weight eviction scans from it).
        self._wraps = 0
        self._tail = 0
        self._on_anomaly = on_anomaly if on_anomaly is not None else _log_anomaly
        self.anomalies = 0
        """How many anomalies were reported."""

    # -- queueing -----------------------------------------------------------------------

    def queue_uncommitted(self, env: Envelope[M]) -> QueueOutcome:
        """Apply the next read-uncommitted envelope; drain commits with :meth:`step`.

        Raises :class:`SequencerError` if committed messages remain to be stepped through.
        """
        return self.queue_with_uuid(env, env.message.uuid.int)

    def queue_with_uuid(self, env: Envelope[Any], uuid_int: int) -> QueueOutcome:
        """:meth:`queue_uncommitted` for a caller that holds the UUID as a 128-bit int.

        The envelope's message is then never asked for its UUID on the ring's path (it may
        be any object: a reader's record), which saves a wrapper object per message. A
        replayed envelope is still read through ``message.uuid``.
        """
        if self._emit is not None:
            raise SequencerError("committed messages remain to dequeue: step() until None")
        head = self._head
        ring_owner = self._ring_owner
        nxt = self._next
        # Evict the entry at the head; fix up the span still starting there, if any.
        old = ring_owner[head]
        if old is not None:
            if old.ring_start == head:
                if old.ring_start == old.ring_stop:
                    old.ring_start = old.ring_stop = -1
                else:
                    old.ring_start = nxt[head]
            ring_owner[head] = None
            self._ring_env[head] = None
            if self._ring_weight[head]:
                self._weight -= self._ring_weight[head]
                self._ring_weight[head] = 0

        partition, begin, end, _ = env
        i = uuid_int
        clock = (
            ((i >> 92) & 0xFFFFFFFF0)
            | ((i >> 44) & 0xFFFF000000000)
            | ((i >> 12) & 0xFFF0000000000000)
            | ((i >> 58) & 0xF)
        )
        flags = (i >> 48) & 0x3FF

        if clock == 0:
            # Opted out of exactly-once: committed at once, never indexed or de-duplicated.
            partial = _Partial(partition, i & 0xFFFFFFFFFFFF, 0, -1)
            flags = _OUTSIDE
            effective = 1
        else:
            effective = clock
            producers = self._partials.get(partition)
            if producers is None:
                producers = self._partials[partition] = {}
            producer = i & 0xFFFFFFFFFFFF
            found = producers.get(producer)
            if found is None:
                found = producers[producer] = _Partial(partition, producer, clock - 1, -1)
            partial = found

        if flags == _CONTINUE:
            if clock <= partial.min_clock:
                self._offsets[partition] = end
                return _O_CONTINUE_ACKED
            if clock <= partial.max_clock:
                self._offsets[partition] = end
                return _O_CONTINUE_LARGER
            if partial.begin == -1:
                partial.begin = begin
                outcome = _O_BEGIN
            else:
                outcome = _O_EXTEND
            # _add_at_head, inlined on the hottest path.
            self._ring_env[head] = env
            self._ring_clock[head] = clock
            ring_owner[head] = partial
            nxt[head] = -1
            if partial.ring_stop == -1:
                partial.ring_start = head
            else:
                nxt[partial.ring_stop] = head
            partial.ring_stop = head
            head += 1
            if head == self._size:
                head = 0
                self._wraps += 1
            self._head = head
            partial.max_clock = clock
            self._offsets[partition] = end
            return outcome

        if flags == _ACK:
            min_clock = partial.min_clock
            if clock <= min_clock:
                if clock < min_clock:
                    self._report("ack_regression", env, partial, clock, flags)
                partial.min_clock = partial.max_clock = clock
                self._free_span(partial)
                partial.begin = partial.ring_start = partial.ring_stop = -1
                self._offsets[partition] = end
                return _O_ROLLBACK
            if partial.begin == -1:
                outcome = _O_ACK_EMPTY
            elif partial.ring_start == -1:
                outcome = _O_COMMIT_REPLAY  # No part of the span is in the ring.
            elif partial.begin != self._ring_env[partial.ring_start].begin:  # type: ignore[union-attr]
                outcome = _O_COMMIT_REPLAY  # Only a trailing part is in the ring.
            else:
                outcome = _O_COMMIT_RING
            self._add_at_head(env, partial, clock)
            if outcome == _O_ACK_EMPTY:
                partial.begin = begin
            partial.max_clock = clock
            self._emit = partial
            self._emit_end = end
            self._replay_needed = outcome == _O_COMMIT_REPLAY
            return outcome

        if flags != _OUTSIDE:
            self._report("unexpected_flags", env, partial, clock, flags)
        if effective <= partial.min_clock:
            self._offsets[partition] = end
            return _O_OUTSIDE_ACKED
        if partial.begin != -1:
            self._report("outside_with_open_span", env, partial, clock, flags)
        self._add_at_head(env, partial, clock)
        # Deliver this message alone: an open span is deliberately clobbered.
        partial.begin = begin
        partial.ring_start = partial.ring_stop
        partial.max_clock = effective
        self._emit = partial
        self._emit_end = end
        return _O_OUTSIDE_COMMIT

    def queue_many(self, envs: list[Envelope[Any]], uuid_ints: list[int], start: int = 0) -> int:
        """:meth:`queue_with_uuid` on ``envs[start:]`` in turn, stopping after the first
        that commits something; the index after the last envelope queued.

        The caller drains the commit (``drain_ring``/``step``) and calls again from the
        returned index. Exactly the same decisions and state as one call per envelope: the
        CONTINUE path is inlined (one loop, the producer's state looked up once per run of
        one producer), every other message takes :meth:`queue_with_uuid` itself.
        """
        if self._emit is not None:
            raise SequencerError("committed messages remain to dequeue: step() until None")
        ring_env = self._ring_env
        ring_clock = self._ring_clock
        ring_owner = self._ring_owner
        nxt = self._next
        ring_weight = self._ring_weight
        offsets = self._offsets
        partials = self._partials
        size = self._size
        head = self._head
        last_partition: str | None = None
        last_producer = -1
        producers: dict[int, _Partial] = {}
        partial: _Partial | None = None
        n = len(envs)
        k = start
        while k < n:
            env = envs[k]
            i = uuid_ints[k]
            k += 1
            clock = (
                ((i >> 92) & 0xFFFFFFFF0)
                | ((i >> 44) & 0xFFFF000000000)
                | ((i >> 12) & 0xFFF0000000000000)
                | ((i >> 58) & 0xF)
            )
            if (i >> 48) & 0x3FF != _CONTINUE or clock == 0:
                self._head = head
                self.queue_with_uuid(env, i)
                if self.committing:
                    return k
                head = self._head
                last_partition = None  # its state may have been created meanwhile
                continue
            # Evict the entry at the head (as queue_with_uuid does for every message).
            old = ring_owner[head]
            if old is not None:
                if old.ring_start == head:
                    if old.ring_start == old.ring_stop:
                        old.ring_start = old.ring_stop = -1
                    else:
                        old.ring_start = nxt[head]
                ring_owner[head] = None
                ring_env[head] = None
                if ring_weight[head]:
                    self._weight -= ring_weight[head]
                    ring_weight[head] = 0
            partition = env[0]
            producer = i & 0xFFFFFFFFFFFF
            if partition is not last_partition or producer != last_producer or partial is None:
                if partition is not last_partition:
                    found_producers = partials.get(partition)
                    if found_producers is None:
                        found_producers = partials[partition] = {}
                    producers = found_producers
                    last_partition = partition
                partial = producers.get(producer)
                if partial is None:
                    partial = producers[producer] = _Partial(partition, producer, clock - 1, -1)
                last_producer = producer
            if clock <= partial.max_clock:  # at or below the last ACK, or the span's largest
                offsets[partition] = env[2]
                continue
            if partial.begin == -1:
                partial.begin = env[1]
            ring_env[head] = env
            ring_clock[head] = clock
            ring_owner[head] = partial
            nxt[head] = -1
            if partial.ring_stop == -1:
                partial.ring_start = head
            else:
                nxt[partial.ring_stop] = head
            partial.ring_stop = head
            head += 1
            if head == size:
                head = 0
                self._wraps += 1
            partial.max_clock = clock
            offsets[partition] = env[2]
        self._head = head
        return k

    def _add_at_head(self, env: Envelope[M], partial: _Partial, clock: int) -> None:
        head = self._head
        self._ring_env[head] = env
        self._ring_clock[head] = clock
        self._ring_owner[head] = partial
        self._next[head] = -1
        if partial.ring_stop == -1:
            partial.ring_start = head
        else:
            self._next[partial.ring_stop] = head
        partial.ring_stop = head
        head += 1
        if head == self._size:
            head = 0
            self._wraps += 1
        self._head = head

    def queue_run(
        self, env: Envelope[M], producer: int, first: int, last: int, weight: int
    ) -> QueueOutcome | None:
        """Queue a run of CONTINUE messages of ``producer`` (a 48-bit int) with strictly
        increasing clocks from ``first`` to ``last`` as one ring entry of ``weight``; its
        envelope covers them all (``env.begin`` of the first, ``env.end`` of the last).

        The caller vouches for the run's shape (flags, one producer, increasing clocks). The
        outcome is what queueing its messages one by one decides for the first (BEGIN or
        EXTEND; the others EXTEND, none commits), or ``None`` when that would drop some of
        them (its first clock is not above the producer's largest): nothing was queued,
        queue the messages one by one instead. Needs ``split_run`` (a commit that covers
        only part of a run splits it).
        """
        if self._emit is not None:
            raise SequencerError("committed messages remain to dequeue: step() until None")
        if self._split_run is None:
            raise SequencerError("queue_run needs a Sequencer(split_run=...)")
        if not 0 < first < last:
            raise SequencerError(f"a run's clocks increase from above 0: {first:#x}..{last:#x}")
        partition = env[0]
        producers = self._partials.get(partition)
        if producers is None:
            producers = self._partials[partition] = {}
        partial = producers.get(producer)
        if partial is None:
            partial = producers[producer] = _Partial(partition, producer, first - 1, -1)
        elif first <= partial.max_clock:
            return None
        head = self._head
        if self._ring_owner[head] is not None:
            self._evict(head)
        weight = max(1, int(weight))
        if self._max_weight is not None:
            while self._weight + weight > self._max_weight and self._evict_oldest():
                pass
        if partial.begin == -1:
            partial.begin = env[1]
            outcome = _O_BEGIN
        else:
            outcome = _O_EXTEND
        self._ring_weight[head] = weight
        self._ring_first[head] = first
        self._weight += weight
        self._add_at_head(env, partial, last)
        partial.max_clock = last  # as its messages one by one: a later clock <= it is a dup
        self._offsets[partition] = env[2]
        return outcome

    def _evict(self, idx: int) -> None:
        """Take the entry at ``idx`` out of the ring (the oldest entry there is)."""
        old = self._ring_owner[idx]
        if old is None:
            return
        if old.ring_start == idx:
            if old.ring_start == old.ring_stop:
                old.ring_start = old.ring_stop = -1
            else:
                old.ring_start = self._next[idx]
        self._ring_owner[idx] = None
        self._ring_env[idx] = None
        if self._ring_weight[idx]:
            self._weight -= self._ring_weight[idx]
            self._ring_weight[idx] = 0

    def _free(self, idx: int) -> None:
        """Empty the slot of an entry that is done (delivered, or rolled back): what its
        envelope holds is freed now rather than when the head comes round to it (a reader
        otherwise keeps a ring's worth of committed RECORDs alive), and its weight leaves
        the ring's."""
        self._ring_env[idx] = None
        self._ring_owner[idx] = None
        weight = self._ring_weight[idx]
        if weight:
            self._weight -= weight
            self._ring_weight[idx] = 0

    def _free_span(self, partial: _Partial) -> None:
        """:meth:`_free` every entry of ``partial``'s span still in the ring."""
        idx = partial.ring_start
        nxt = self._next
        while idx != -1:
            following = nxt[idx]
            self._free(idx)
            idx = following

    def _evict_oldest(self) -> bool:
        """Evict the oldest entry in the ring (the first occupied slot after the head);
        False if the ring is empty."""
        size = self._size
        now = self._wraps * size + self._head  # the next position to be written
        at = max(self._tail, now - size + 1)
        owner = self._ring_owner
        while at < now and owner[at % size] is None:
            at += 1
        self._tail = at
        if at == now:
            return False
        self._evict(at % size)
        self._tail = at + 1
        return True

    def _report(
        self, kind: str, env: Envelope[M], partial: _Partial, clock: int, flags: int
    ) -> None:
        self.anomalies += 1
        self._on_anomaly(
            Anomaly(
                kind,
                env.partition,
                ProducerID.from_int(partial.producer),
                clock,
                flags,
                env.begin,
                env.end,
                partial.min_clock,
            )
        )

    # -- dequeueing ---------------------------------------------------------------------

    @property
    def dequeued(self) -> Envelope[M] | None:
        """The envelope last returned by :meth:`step` (``None`` between commits)."""
        return self._dequeued

    @property
    def committing(self) -> bool:
        """True while committed messages remain to be stepped through."""
        return self._emit is not None

    def step(self) -> Envelope[M] | None:
        """The next committed envelope, or ``None`` once the commit is fully delivered.

        Calling ``step`` again marks the previous envelope *done* (a checkpoint taken after
        that will not deliver it again). Raises :class:`MustStartReplay` if the span must be
        replayed first, and :class:`ReplayError` if the replay misbehaves. A failed replay
        is dropped and the commit stays pending: the next ``step`` raises
        :class:`MustStartReplay` for the part not yet delivered, never skipping it.
        """
        emit = self._emit
        if emit is None:
            return None
        ring_env = self._ring_env
        if self._replay_needed:
            raise MustStartReplay(*self.replay_range())
        if self._dequeued is not None:
            emit.min_clock = self._dequeued_clock

        split = self._split
        env: Envelope[M] | None
        while emit.ring_start != -1 or split:
            if split:  # the rest of a run that the commit covers only in part
                env, clock = split.pop()
                if clock <= emit.min_clock:
                    continue
            elif self._replay_it is None:
                idx = emit.ring_start
                env = ring_env[idx]
                clock = self._ring_clock[idx]
                emit.ring_start = self._next[idx]
                weight = self._ring_weight[idx]
                self._free(idx)
                if weight:  # a run: delivered whole, or split
                    first = self._ring_first[idx]
                    if first <= emit.min_clock or clock > emit.max_clock:
                        assert env is not None
                        assert self._split_run is not None
                        split.extend(reversed(self._split_run(env)))
                        continue
                elif clock != 0 and clock <= emit.min_clock:
                    # A duplicate of a message delivered earlier in this commit. It reaches
                    # the ring only after a restore (which forgets the span's max clock);
                    # Gazette panicked here until October 2024 and skips it now; so do
                    # we, as the replay path does.
                    continue
            else:
                try:
                    item = next(self._replay_it)
                except StopIteration:
                    self._replay_it = None  # Replay done: continue from the ring.
                    continue
                except Exception as exc:
                    # A raising iterator is finished: treating it as done would skip the
                    # rest of the span. Drop it and ask for the range again instead.
                    self._fail_replay()
                    raise ReplayError(
                        ReplayFailure.READER_FAILED,
                        f"replay reader: {exc}",
                        partition=emit.partition,
                    ) from exc
                if type(item) is ReplayedRun:
                    env = item.envelope
                    clock = self._check_replayed_run(item, emit)
                else:
                    env = item  # type: ignore[assignment]
                    clock = self._check_replayed(env, emit)  # type: ignore[arg-type]
                if clock < 0:
                    continue  # Another producer's, one already done, or split.
            if clock > emit.max_clock:
                continue  # Above the ACK: not committed by it.
            assert env is not None
            emit.begin = env.begin
            self._dequeued = env
            self._dequeued_clock = clock
            return env

        # The whole span is delivered: only now does the read-through offset pass the ACK,
        # so that a sequencer restored from an earlier checkpoint reads the ACK again. It
        # moves to the end of the committing message itself, delivered or skipped as a
        # duplicate (as Gazette, whose last ``Dequeued`` is the ACK): not to the end of the
        # last message delivered, which may lie before messages already read past.
        self._offsets[emit.partition] = self._emit_end
        emit.max_clock = emit.min_clock
        emit.begin = emit.ring_start = emit.ring_stop = -1
        self._dequeued = None
        self._dequeued_clock = 0
        self._emit = None
        return None

    def skip_commit(self) -> None:
        """Decide the pending commit without its messages: the state :meth:`step` leaves
        once it returned None (the producer's last ACK is the committing clock, the
        read-through offset passes it, the span's ring slots are emptied), no replay.

        For a reader that needs the decisions and not the messages (where nothing is
        pending, the producers' states: the Spark source's planner), whose span left the
        ring would otherwise be read again from the stores only to be dropped."""
        emit = self._emit
        if emit is None:
            return
        self._free_span(emit)
        self._split.clear()
        self._replay_it = None
        self._replay_needed = False
        self._offsets[emit.partition] = self._emit_end
        emit.min_clock = emit.max_clock
        emit.begin = emit.ring_start = emit.ring_stop = -1
        self._dequeued = None
        self._dequeued_clock = 0
        self._emit = None

    def _fail_replay(self) -> None:
        """Drop a replay that failed; the next ``step`` asks for the range again."""
        self._replay_it = None
        self._replay_needed = True

    def _check_replayed(self, env: Envelope[M], emit: _Partial) -> int:
        """Validate a replayed envelope; its clock, or -1 if it is to be skipped."""
        self._check_bounds(env, emit)
        i = env.message.uuid.int
        if i & 0xFFFFFFFFFFFF != emit.producer:
            return -1
        clock = (
            ((i >> 92) & 0xFFFFFFFF0)
            | ((i >> 44) & 0xFFFF000000000)
            | ((i >> 12) & 0xFFF0000000000000)
            | ((i >> 58) & 0xF)
        )
        if clock != 0 and clock <= emit.min_clock:
            return -1
        return clock

    def _check_replayed_run(self, run: ReplayedRun[M], emit: _Partial) -> int:
        """Validate a replayed run; its last clock when it is delivered whole, else -1:
        another producer's, all of it done already, or split (its messages are then
        decided one by one from ``_split``, as :meth:`_check_replayed` decides them)."""
        env = run.envelope
        self._check_bounds(env, emit)
        if run.producer != emit.producer:
            return -1
        first, last = run.first, run.last
        if first == last:  # one message: the rule of _check_replayed
            return -1 if first != 0 and first <= emit.min_clock else first
        if not 0 < first < last:
            self._fail_replay()
            raise SequencerError(f"a run's clocks increase from above 0: {first:#x}..{last:#x}")
        if first > emit.min_clock and last <= emit.max_clock:
            return last
        if last > emit.min_clock:  # else every message of it is done: nothing to split
            if self._split_run is None:
                self._fail_replay()
                raise SequencerError("a replayed run needs a Sequencer(split_run=...)")
            self._split.extend(reversed(self._split_run(env)))
        return -1

    def _check_bounds(self, env: Envelope[M], emit: _Partial) -> None:
        """A replayed envelope must lie in the replay range (else the replay is dropped
        and :class:`ReplayError` raised)."""
        failure: ReplayFailure | None = None
        expected: str | int
        actual: str | int
        limit = self._ring_env[emit.ring_start]
        assert limit is not None
        if env.partition != emit.partition:
            failure, expected, actual = ReplayFailure.WRONG_PARTITION, emit.partition, env.partition
            text = f"replay of wrong partition ({actual}; expected {expected})"
        elif env.begin < emit.begin:
            failure, expected, actual = ReplayFailure.WRONG_BEGIN, emit.begin, env.begin
            text = f"replay has wrong begin ({actual}; expected >= {expected})"
        elif env.end > limit.begin:
            failure, expected, actual = ReplayFailure.WRONG_END, limit.begin, env.end
            text = f"replay has wrong end ({actual}; expected <= {expected})"
        if failure is not None:
            self._fail_replay()
            raise ReplayError(
                failure, text, partition=emit.partition, expected=expected, actual=actual
            )

    def drain(self) -> list[Envelope[M]]:
        """Step through the whole commit at once; the envelopes in delivery order."""
        fast = self.drain_ring()
        if fast is not None:
            return fast
        out: list[Envelope[M]] = []
        step = self.step
        env = step()
        while env is not None:
            out.append(env)
            env = step()
        return out

    def drain_ring(self) -> list[Envelope[M]] | None:
        """The whole pending commit at once when it is in the ring and nothing of it was
        stepped yet (the common case); None otherwise (use :meth:`step`).

        Exactly what stepping through it delivers, with the same final state, in one loop
        without a method call per message.
        """
        emit = self._emit
        if (
            emit is None
            or self._replay_needed
            or self._replay_it is not None
            or self._dequeued is not None
            or self._split
        ):
            return None
        out: list[Envelope[M]] = []
        append = out.append
        ring_env = self._ring_env
        ring_clock = self._ring_clock
        nxt = self._next
        ring_weight = self._ring_weight
        ring_owner = self._ring_owner
        min_clock = emit.min_clock
        max_clock = emit.max_clock
        idx = emit.ring_start
        while idx != -1:
            clock = ring_clock[idx]
            env = ring_env[idx]
            # The entry is done: its slot is freed now (see _free), inlined.
            ring_env[idx] = None
            ring_owner[idx] = None
            if ring_weight[idx]:  # a run: whole when all of it is committed, else split
                self._weight -= ring_weight[idx]
                ring_weight[idx] = 0
                if self._ring_first[idx] > min_clock and clock <= max_clock:
                    append(env)  # type: ignore[arg-type]
                    min_clock = clock
                else:
                    assert env is not None
                    assert self._split_run is not None
                    for part, part_clock in self._split_run(env):
                        if min_clock < part_clock <= max_clock:
                            append(part)
                            min_clock = part_clock
                idx = nxt[idx]
                continue
            idx = nxt[idx]
            if clock != 0 and clock <= min_clock:
                continue  # a duplicate of a message delivered earlier in this commit
            if clock > max_clock:
                continue  # above the ACK: not committed by it
            append(env)  # type: ignore[arg-type]
            min_clock = clock
        emit.min_clock = emit.max_clock = min_clock
        self._offsets[emit.partition] = self._emit_end
        emit.begin = emit.ring_start = emit.ring_stop = -1
        self._emit = None
        return out

    # -- replays ------------------------------------------------------------------------

    def replay_range(self) -> ReplayRange:
        """The partition and ``[begin, end)`` to replay before the commit can be drained."""
        emit = self._emit
        if emit is None:
            raise SequencerError("no commit is pending: nothing to replay")
        first = self._ring_env[emit.ring_start]
        assert first is not None  # The committing message is always the last one added.
        return ReplayRange(emit.partition, emit.begin, first.begin)

    def start_replay(self, envelopes: Iterable[Envelope[M] | ReplayedRun[M]]) -> None:
        """Hand over the read-uncommitted envelopes of :meth:`replay_range` (or runs of
        them: :class:`ReplayedRun`)."""
        if self._emit is None:
            raise SequencerError("no commit is pending: nothing to replay")
        self._replay_it = iter(envelopes)
        self._replay_needed = False

    # -- checkpoints --------------------------------------------------------------------

    def has_pending(self, since: Mapping[str, int] | None = None) -> bool:
        """True if a span began at or after ``since`` (default: the last checkpoint).

        Assuming producers are alive, it hints that their ACKs are coming, so a consumer
        transaction may want to wait for them before it commits.
        """
        offsets = self._last_offsets if since is None else since
        for partition, producers in self._partials.items():
            floor = offsets.get(partition, 0)
            for partial in producers.values():
                if partial.begin != -1 and partial.begin >= floor:
                    return True
        return False

    def checkpoint(self, prune_horizon: float | timedelta = 0) -> SequencerCheckpoint:
        """Read-through offsets and producer states; prunes producers gone quiet.

        A producer is pruned when its ``max_clock`` is below the newest ``last_ack`` of its
        partition minus ``prune_horizon`` (seconds, or a timedelta): the horizon is relative
        to the partition's newest producer, not to wall time. Zero disables pruning.
        """
        horizon_ns = _horizon_ns(prune_horizon)
        # A clock difference: 100 ns units shifted past the 4-bit counter (as Gazette).
        units = (horizon_ns // 100) << 4
        states: list[ProducerState] = []
        for partition in sorted(self._partials):
            producers = self._partials[partition]
            floor = 0
            if horizon_ns > 0 and producers:
                floor = max(p.min_clock for p in producers.values()) - units
            for producer in sorted(producers):
                partial = producers[producer]
                if partial.max_clock >= floor:
                    states.append(
                        ProducerState(
                            partition,
                            ProducerID.from_int(producer),
                            partial.min_clock,
                            partial.begin,
                        )
                    )
                else:
                    del producers[producer]
        self._last_offsets = dict(self._offsets)
        return SequencerCheckpoint(dict(self._offsets), states)

    def pending_begin(self, partition: str) -> int:
        """The lowest ``begin`` of an open span in ``partition``, or -1 if none is open.

        Everything of ``partition`` before it is decided (committed, rolled back or a
        duplicate): the *last stable offset* of batch readers.
        """
        lowest = -1
        for partial in self._partials.get(partition, {}).values():
            begin = partial.begin
            if begin != -1 and (lowest == -1 or begin < lowest):
                lowest = begin
        return lowest

    @property
    def offsets(self) -> dict[str, int]:
        """A copy of the read-through offsets."""
        return dict(self._offsets)


def _log_anomaly(anomaly: Anomaly) -> None:
    _log.warning(
        "%s: partition %s producer %s clock %#x flags %#x at [%d, %d) (last ACK %#x)",
        anomaly.kind,
        anomaly.partition,
        anomaly.producer.hex(),
        anomaly.clock,
        anomaly.flags,
        anomaly.begin,
        anomaly.end,
        anomaly.last_ack,
    )
