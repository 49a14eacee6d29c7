"""An in-memory record log with the storage engine's API, for unit tests of stores."""

from __future__ import annotations

from collections.abc import Sequence

from dafka.errors import DafkaError


class LogContractError(DafkaError):
    """An append that would leave a hole or rewrite history: a store machine bug."""


class MemoryLog:
    """Partitions as lists in memory; the subset of ``dafka.storage.Storage`` stores use.

    Implements :class:`dafka.node.RecordReader` (``read_contents``, ``heads``, ``topics``) plus
    ``append``, ``head`` and ``durable_offset``. Everything appended is durable at once.
    Appends must continue a partition exactly (a partition may start at any sequence), so a
    machine that asks to persist out of order fails the test loudly.
    """

    def __init__(self) -> None:
        self._parts: dict[tuple[str, str], tuple[int, list[bytes]]] = {}
        self.appends = 0

    def append(self, topic: str, partition: str, first: int, payloads: Sequence[bytes]) -> int:
        """Append ``payloads`` at ``first, first + 1, ...``; returns the last sequence."""
        key = (topic, partition)
        entry = self._parts.get(key)
        if entry is None:
            entry = (first, [])
            self._parts[key] = entry
        base, records = entry
        if first != base + len(records):
            raise LogContractError(
                f"append to {topic}/{partition} at {first}, expected {base + len(records)}"
            )
        records.extend(payloads)
        self.appends += 1
        return base + len(records) - 1

    def read(
        self, topic: str, partition: str, first: int, count: int, /
    ) -> list[tuple[int, bytes]]:
        entry = self._parts.get((topic, partition))
        if entry is None or count <= 0:
            return []
        base, records = entry
        start = max(first, base)
        stop = min(first + count, base + len(records))
        return [(s, records[s - base]) for s in range(start, stop)]

    def read_contents(
        self, topic: str, partition: str, first: int, count: int, /
    ) -> tuple[int, list[bytes]]:
        records = self.read(topic, partition, first, count)
        return (records[0][0] if records else first), [content for _, content in records]

    def head(self, topic: str, partition: str) -> int | None:
        entry = self._parts.get((topic, partition))
        if entry is None or not entry[1]:
            return None
        return entry[0] + len(entry[1]) - 1

    def durable_offset(self, topic: str, partition: str) -> int | None:
        return self.head(topic, partition)

    def heads(self, topic: str, /) -> dict[str, int]:
        return {
            partition: base + len(records) - 1
            for (t, partition), (base, records) in self._parts.items()
            if t == topic and records
        }

    def topics(self) -> list[str]:
        return sorted({topic for topic, _ in self._parts})

    def contents(self, topic: str, partition: str) -> list[bytes]:
        """Every record of a partition (from its first sequence)."""
        entry = self._parts.get((topic, partition))
        return list(entry[1]) if entry else []


__all__ = ["LogContractError", "MemoryLog"]
