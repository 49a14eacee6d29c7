"""A store's persistence, as its runner drives it (``dafka.transport.runner.Persistence``).

The store machine asks for writes (``Persist``); this appends them to the storage engine,
runs the fsync clock, and tells the machine what became durable (``on_durable``) so that
its ACKs cover only durable records. It lives with the store, not in the transport: the
runner only calls it at fixed points of its turn, in its own thread.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from dafka.errors import DafkaError
from dafka.node import StoreMachine
from dafka.node.actions import Persist
from dafka.storage import Storage

log = logging.getLogger(__name__)


@dataclass
class PersistenceStats:
    """Counters of a store's persistence (``StorePersistence.statistics()``)."""

    persisted_records: int = 0
    persist_errors: int = 0


class StorePersistence:
    """``storage`` under ``machine``: appends, durability reports, the shutdown flush."""

    def __init__(self, storage: Storage, machine: StoreMachine, name: str = "store") -> None:
        self._storage = storage
        self._machine = machine
        self._name = name
        self._stats = PersistenceStats()

    def persist(self, action: Persist) -> None:
        try:
            self._storage.append(
                action.topic, action.producer, action.first_sequence, action.contents
            )
        except DafkaError as exc:
            self._stats.persist_errors += 1
            log.error("%s: persist failed: %s", self._name, exc)
            return
        self._stats.persisted_records += len(action.contents)

    def report_durable(self, now: float) -> bool:
        storage = self._storage
        durable = storage.take_durable_advances()
        due = storage.next_sync_deadline()
        if due is not None and due <= now:
            durable.update(storage.sync_due(now))
        on_durable = self._machine.on_durable
        for (topic, partition), sequence in durable.items():
            on_durable(topic, partition, sequence, now)
        return bool(durable)

    def next_deadline(self) -> float | None:
        return self._storage.next_sync_deadline()

    def flush(self) -> None:
        self._storage.flush()

    def statistics(self) -> PersistenceStats:
        """A copy of the counters (written by the runner thread)."""
        return PersistenceStats(**vars(self._stats))


__all__ = ["PersistenceStats", "StorePersistence"]
