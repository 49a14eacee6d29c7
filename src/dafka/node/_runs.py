"""Which run of a named producer wrote each record of a partition, as a store holds it.

A named producer that restarts resumes after the highest head its stores report and may
reuse sequences an earlier run sent but never got acknowledged (docs/guarantees.md, "A
reused sequence: run epochs"). Each run names itself: ``epoch`` (greater than every earlier
run's) and ``run_start`` (the sequence it resumed at) travel with its records and heads
(docs/protocol.md, "Run epochs"). A store keeps, per partition, the runs it knows as
``(epoch, start)`` pairs in order - one pair per producer run, not per record, as Kafka's
leader-epoch cache - and the rule is one line: *from a run's start on, only that run's
records (or a newer run's) belong*. So

* a record or head of a run newer than every run the store knows, starting at or below what
  the store holds, means the store's records from that start on are an older run's and were
  never acknowledged where this run's belong: they are set aside (``KeepRuns``), and the
  store takes the newer run's from there;
* a record of an older run at or after a newer run's start is *fenced*: refused, counted
  (a zombie of the producer, or a late copy);
* records with no epoch (a C producer's, an unnamed producer's, a C store's copy) are taken
  as before.
"""

from __future__ import annotations

from collections.abc import Iterable


class Runs:
    """The runs of one partition: ``(epoch, start)`` pairs, epochs and starts ascending."""

    __slots__ = ("entries",)

    def __init__(self, entries: Iterable[tuple[int, int]] = ()) -> None:
        self.entries: list[tuple[int, int]] = sorted(entries, key=lambda e: (e[1], e[0]))

    def newest(self) -> tuple[int, int]:
        """The newest run known, (0, 0) if none."""
        return self.entries[-1] if self.entries else (0, 0)

    def at(self, sequence: int) -> tuple[int, int]:
        """The run a record at ``sequence`` belongs to, (0, 0) if none said."""
        found = (0, 0)
        for entry in self.entries:
            if entry[1] > sequence:
                break
            found = entry
        return found

    def fences(self, epoch: int, sequence: int) -> bool:
        """Whether a run newer than ``epoch`` started at or before ``sequence``."""
        return any(e > epoch and start <= sequence for e, start in self.entries)

    def begin(self, epoch: int, start: int) -> None:
        """A run newer than all known starts at ``start``: the runs from there on are gone."""
        self.entries = [entry for entry in self.entries if entry[1] < start]
        self.entries.append((epoch, start))

    def split(self, first: int, count: int) -> list[tuple[int, int, int, int]]:
        """``[first, first + count)`` cut where runs begin: (first, count, epoch, start)."""
        chunks: list[tuple[int, int, int, int]] = []
        end = first + count
        epoch, start = self.at(first)
        at = first
        for e, s in self.entries:
            if s <= at:
                continue
            if s >= end:
                break
            chunks.append((at, s - at, epoch, start))
            at, epoch, start = s, e, s
        chunks.append((at, end - at, epoch, start))
        return chunks


__all__ = ["Runs"]
