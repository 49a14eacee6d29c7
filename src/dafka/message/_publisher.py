"""The publisher: maps a message to a partition, stamps its UUID, appends it.

Two modes, as in Gazette:

* :meth:`Publisher.publish_committed` - ``OUTSIDE_TXN``: readable at once by read-committed
  readers. Safe for concurrent use.
* :meth:`Publisher.publish_uncommitted` - ``CONTINUE_TXN``: held by readers until an ACK;
  the partition is remembered, and :meth:`Publisher.build_ack_intents` later returns one
  ACK per partition touched. Not for concurrent use (a transaction has one author).

**Ordering rule.** The clock is ticked and the UUID stamped *while holding that partition's
lock, around the append*, so that clock order equals append order in every partition even
with concurrent callers: a reader drops a CONTINUE whose clock is not above the span's
largest, so an out-of-order append would silently lose a message.

The publisher does no I/O of its own: ``append(partition, message)`` is any callable that
appends one message to a partition in order (a framed-bytes writer, a Dafka producer, a
list in a test); its return value (an offset, a future, ``None``) is handed back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from dafka.message._types import Message
from dafka.message._uuid import Clock, Flags, ProducerID, build_uuid, new_producer_id

__all__ = ["AckIntent", "AppendFunc", "MappingFunc", "Publisher"]

M = TypeVar("M", bound=Message)
R = TypeVar("R")

AppendFunc = Callable[[str, M], R]
"""Append one message to a partition, in call order; returns whatever the log returns."""

MappingFunc = Callable[[M], str]
"""Maps a message to the name of the partition it belongs to."""


@dataclass(frozen=True, slots=True)
class AckIntent(Generic[M]):
    """An ACK to append to ``partition`` once the caller's checkpoint holds it.

    Persist intents with the checkpoint *first*, then append them; after a crash, append
    the persisted intents again, unchanged. A re-sent ACK whose transaction was already
    committed is a no-op for readers; one whose transaction never committed rolls it back.
    """

    partition: str
    message: M


class Publisher(Generic[M, R]):
    """Maps, sequences and appends messages (see the module docstring).

    ``clock``: if given, the caller keeps it up to date (fewer time calls); otherwise an
    internal clock is moved to the wall time before each publish. ``producer``: the
    ProducerID (a fresh random one by default; a restarted publisher should use a new one).
    """

    def __init__(
        self,
        append: Callable[[str, M], R],
        *,
        clock: Clock | None = None,
        producer: ProducerID | None = None,
    ) -> None:
        self._append = append
        self._auto_update = clock is None
        self.clock: Clock = Clock() if clock is None else clock
        self.producer: ProducerID = new_producer_id() if producer is None else producer
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self._intents: dict[str, M] = {}  # Insertion order = order first touched.

    def _lock_of(self, partition: str) -> threading.Lock:
        lock = self._locks.get(partition)
        if lock is None:
            with self._locks_lock:
                lock = self._locks.setdefault(partition, threading.Lock())
        return lock

    def _publish(self, mapping: Callable[[M], str], message: M, flags: int) -> tuple[str, R]:
        if self._auto_update:
            self.clock.update(time.time_ns())
        validate = getattr(message, "validate", None)
        if validate is not None:
            validate()
        partition = mapping(message)
        with self._lock_of(partition):
            # Stamp inside the partition's critical section: clock order == append order.
            message.uuid = build_uuid(self.producer, self.clock.tick(), flags)
            result = self._append(partition, message)
        return partition, result

    def publish_committed(self, mapping: Callable[[M], str], message: M) -> R:
        """Publish ``message`` outside any transaction; returns ``append``'s result."""
        return self._publish(mapping, message, Flags.OUTSIDE_TXN)[1]

    def publish_uncommitted(self, mapping: Callable[[M], str], message: M) -> R:
        """Publish ``message`` in the open transaction; its partition will need an ACK."""
        partition, result = self._publish(mapping, message, Flags.CONTINUE_TXN)
        if partition not in self._intents:
            self._intents[partition] = message.new_acknowledgement(partition)  # type: ignore[assignment]
        return result

    def build_ack_intents(self) -> list[AckIntent[M]]:
        """One ACK per partition touched since the last call, in the order first touched.

        Each ACK gets its own tick. Nothing is appended: see :class:`AckIntent`.
        """
        out: list[AckIntent[M]] = []
        for partition, ack in self._intents.items():
            ack.uuid = build_uuid(self.producer, self.clock.tick(), Flags.ACK_TXN)
            out.append(AckIntent(partition, ack))
        self._intents = {}
        return out

    @property
    def pending_partitions(self) -> list[str]:
        """Partitions written by the open transaction (that the next intents will ACK)."""
        return list(self._intents)
