"""An in-memory record log with the storage engine's API, for unit tests of stores."""

from __future__ import annotations

from collections.abc import Sequence

from dafka.errors import DafkaError
from dafka.node.actions import DurableNotices, HoleNotices, KeepRuns, NodeMachine, Persist


class LogContractError(DafkaError):
    """A write that would leave an unannounced hole or rewrite history: a store machine bug."""


class _Partition:
    """``records`` by sequence; ``base`` is the first sequence of the log, ``next`` the one
    after its head; the sequences in between that are not in ``records`` are holes."""

    __slots__ = ("base", "next", "records")

    def __init__(self, base: int) -> None:
        self.base = base
        self.next = base
        self.records: dict[int, bytes] = {}


class MemoryLog:
    """Partitions in memory; the subset of ``dafka.storage.Storage`` stores use.

    Implements :class:`dafka.node.RecordReader` (``read_contents``, ``heads``, ``topics``,
    ``holes``) plus ``append`` (with ``after_gap``), ``fill``, ``head`` and
    ``durable_offset``. Everything written is durable at once. Appends must continue a
    partition exactly (a partition may start at any sequence) and fills must start at a
    hole, so that a machine that asks to persist out of order fails the test loudly.
    :meth:`punch` makes a hole, as damage found by a read does in the engine, and
    :meth:`execute` runs a store machine's :class:`Persist` or :class:`KeepRuns` as its
    driver would; the records a ``KeepRuns`` sets aside are kept in :attr:`superseded`.
    """

    def __init__(self) -> None:
        self._parts: dict[tuple[str, str], _Partition] = {}
        self._runs: dict[tuple[str, str], tuple[tuple[int, int], ...]] = {}
        self.appends = 0
        self.superseded: list[tuple[str, str, int, bytes]] = []
        """(topic, partition, sequence, content) of every record set aside, in order."""

    def append(
        self,
        topic: str,
        partition: str,
        first: int,
        payloads: Sequence[bytes],
        *,
        after_gap: bool = False,
    ) -> int:
        """Append ``payloads`` at ``first, first + 1, ...``; returns the last sequence.

        ``after_gap``: ``first`` may lie beyond the end, the sequences between are a hole."""
        key = (topic, partition)
        part = self._parts.get(key)
        if part is None:
            part = self._parts[key] = _Partition(first)
        if first != part.next and not (after_gap and first > part.next):
            raise LogContractError(
                f"append to {topic}/{partition} at {first}, expected {part.next}"
            )
        if not part.records:
            part.base = first
        part.records.update(zip(range(first, first + len(payloads)), payloads, strict=True))
        part.next = max(part.next, first + len(payloads))
        self.appends += 1
        return part.next - 1

    def fill(self, topic: str, partition: str, first: int, payloads: Sequence[bytes]) -> int:
        """Write ``payloads`` into the hole that starts at ``first``; the last sequence."""
        part = self._parts.get((topic, partition))
        hole = next((h for h in self.holes(topic, partition) if h[0] == first), None)
        if part is None or hole is None or first + len(payloads) > hole[1]:
            raise LogContractError(
                f"fill of {topic}/{partition} at {first} (+{len(payloads)}): "
                f"holes are {self.holes(topic, partition)}"
            )
        part.records.update(zip(range(first, first + len(payloads)), payloads, strict=True))
        return first + len(payloads) - 1

    def punch(self, topic: str, partition: str, first: int, end: int) -> None:
        """Lose ``[first, end)`` (damage): a hole, or a shorter log when nothing follows it."""
        part = self._parts[topic, partition]
        for sequence in range(first, end):
            part.records.pop(sequence, None)
        if not any(s >= end for s in part.records):
            part.next = max((s for s in part.records), default=part.base - 1) + 1

    def holes(self, topic: str, partition: str, /) -> list[tuple[int, int]]:
        part = self._parts.get((topic, partition))
        if part is None or not part.records:
            return []
        out: list[tuple[int, int]] = []
        expected = part.base
        for sequence in sorted(part.records):
            if sequence > expected:
                out.append((expected, sequence))
            expected = sequence + 1
        return out

    def runs(self, topic: str, partition: str, /) -> tuple[tuple[int, int], ...]:
        """The runs kept of a partition (``dafka.node.RunLog``)."""
        return self._runs.get((topic, partition), ())

    def keep_runs(self, action: KeepRuns) -> None:
        """Set the records from ``action.supersede_from`` on aside (into
        :attr:`superseded`), then keep the partition's runs."""
        key = (action.topic, action.producer)
        first = action.supersede_from
        part = self._parts.get(key)
        if first is not None and part is not None and first < part.next:
            for sequence in sorted(s for s in part.records if s >= first):
                self.superseded.append((*key, sequence, part.records.pop(sequence)))
            part.next = max(first, part.base) if part.records else first
        self._runs[key] = action.runs

    def execute(self, action: Persist | KeepRuns, machine: NodeMachine, now: float) -> int:
        """Run a store machine's ``action`` as its driver does (``StorePersistence``): write
        it where its ``placement`` says, report what became durable, and the partition's
        holes when they may have changed. Returns the last sequence written (-1 for
        :class:`KeepRuns`)."""
        if type(action) is KeepRuns:
            self.keep_runs(action)
            return -1
        assert type(action) is Persist
        topic, producer = action.topic, action.producer
        if action.placement == "fill":
            last = self.fill(topic, producer, action.first_sequence, action.contents)
        else:
            after_gap = action.placement == "after_gap"
            last = self.append(
                topic, producer, action.first_sequence, action.contents, after_gap=after_gap
            )
            if isinstance(machine, DurableNotices):
                machine.on_durable(topic, producer, last, now)
        if action.placement != "append" and isinstance(machine, HoleNotices):
            machine.on_holes(topic, producer, self.holes(topic, producer), now)
        return last

    def read(
        self, topic: str, partition: str, first: int, count: int, /
    ) -> list[tuple[int, bytes]]:
        """The records held in ``[first, first + count)`` (holes left out)."""
        part = self._parts.get((topic, partition))
        if part is None or count <= 0:
            return []
        records = part.records
        start = max(first, part.base)
        stop = min(first + count, part.next)
        return [(s, records[s]) for s in range(start, stop) if s in records]

    def read_contents(
        self, topic: str, partition: str, first: int, count: int, /
    ) -> tuple[int, list[bytes]]:
        """The first contiguous run held in ``[first, first + count)`` (it ends at a hole)."""
        records = self.read(topic, partition, first, count)
        if not records:
            return first, []
        start = records[0][0]
        run: list[bytes] = []
        for sequence, content in records:
            if sequence != start + len(run):
                break
            run.append(content)
        return start, run

    def start_offset(self, topic: str, partition: str, /) -> int | None:
        """The first sequence still held (the next one when none is), None for an unknown
        partition: :class:`dafka.node.LogStarts`, as the engine's."""
        part = self._parts.get((topic, partition))
        if part is None:
            return None
        return min(part.records, default=part.next)

    def drop_before(self, topic: str, partition: str, sequence: int) -> None:
        """Retention: forget every record below ``sequence`` (the log starts there)."""
        part = self._parts[topic, partition]
        for old in [s for s in part.records if s < sequence]:
            del part.records[old]
        part.base = max(part.base, min(sequence, part.next))

    def head(self, topic: str, partition: str) -> int | None:
        part = self._parts.get((topic, partition))
        if part is None or not part.records:
            return None
        return part.next - 1

    def durable_offset(self, topic: str, partition: str) -> int | None:
        return self.head(topic, partition)

    def heads(self, topic: str, /) -> dict[str, int]:
        return {
            partition: part.next - 1
            for (t, partition), part in self._parts.items()
            if t == topic and part.records
        }

    def topics(self) -> list[str]:
        return sorted({topic for topic, _ in self._parts})

    def contents(self, topic: str, partition: str) -> list[bytes]:
        """Every record held of a partition, in order (holes left out)."""
        part = self._parts.get((topic, partition))
        return [part.records[s] for s in sorted(part.records)] if part else []

    def clear(self) -> None:
        """Lose everything (a store whose data directory was wiped)."""
        self._parts.clear()
        self._runs.clear()


__all__ = ["LogContractError", "MemoryLog"]
