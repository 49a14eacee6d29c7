"""Offset planning for the dafka source: pure functions of heads and offsets.

Offsets are Spark's: ``{topic: {partition: next_sequence}}`` (JSON in the checkpoint). A
micro-batch reads, per partition, the sequences ``[start, end)``. These functions run on the
driver, from the heads a :class:`~dafka.client.HeadWatcher` keeps (``head`` = highest sequence
known to exist, so the next offset is ``head + 1``); they never touch the network.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dafka.spark._options import Offsets

Heads = Mapping[tuple[str, str], int]


@dataclass(frozen=True, slots=True)
class Range:
    """Sequences ``[start, end)`` of one partition: what one Spark input partition reads."""

    topic: str
    partition: str
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def heads_offsets(heads: Heads) -> Offsets:
    """The offsets just after every known head."""
    out: Offsets = {}
    for (topic, partition), head in heads.items():
        out.setdefault(topic, {})[partition] = head + 1
    return out


def flatten(offsets: Offsets) -> dict[tuple[str, str], int]:
    return {(t, p): o for t, parts in offsets.items() for p, o in parts.items()}


def nest(flat: Mapping[tuple[str, str], int]) -> Offsets:
    out: Offsets = {}
    for (topic, partition), offset in sorted(flat.items()):
        out.setdefault(topic, {})[partition] = offset
    return out


def latest(start: Offsets, heads: Heads, max_records: int | None) -> Offsets:
    """The end of the next micro-batch from ``start``.

    Every partition goes to its head, except that partitions absent from ``start`` are new
    (they appeared after the query started) and start at 0, and that with ``max_records`` the
    batch holds at most that many offsets in all, shared fairly among the partitions that
    have something (water-filling: no partition gets more than its backlog, the rest is
    spread over the others). A partition never goes backwards: a head below ``start`` (a
    store that lost its tail) keeps ``start``.
    """
    begin = flatten(start)
    available: dict[tuple[str, str], int] = {}
    for key, head in heads.items():
        first = begin.get(key, 0)
        available[key] = max(head + 1 - first, 0)
    for key in begin:
        available.setdefault(key, 0)
    take = available if max_records is None else share(available, max_records)
    return nest({key: begin.get(key, 0) + n for key, n in take.items()})


def share(backlog: Mapping[tuple[str, str], int], budget: int) -> dict[tuple[str, str], int]:
    """``budget`` shared fairly among the partitions with a backlog (water-filling)."""
    take = dict.fromkeys(backlog, 0)
    waiting = sorted((n, key) for key, n in backlog.items() if n > 0)
    while waiting and budget > 0:
        fair = max(budget // len(waiting), 1)
        rest: list[tuple[int, tuple[str, str]]] = []
        for n, key in waiting:
            grant = min(n, fair, budget)
            take[key] += grant
            budget -= grant
            if n > grant:
                rest.append((n - grant, key))
        waiting = rest
    return take


def cap(end: Offsets, ceiling: Offsets) -> Offsets:
    """``end`` limited to ``ceiling`` per partition (partitions unknown to it are dropped)."""
    top = flatten(ceiling)
    return nest({k: min(o, top[k]) for k, o in flatten(end).items() if k in top})


def ranges(start: Offsets, end: Offsets, min_partitions: int | None) -> list[Range]:
    """The non-empty ranges from ``start`` to ``end``, split for ``min_partitions``.

    As Spark's Kafka source: with ``min_partitions`` larger than the number of ranges, big
    ranges are cut into pieces proportional to their size so that there are about that many.
    """
    begin = flatten(start)
    out = [
        Range(topic, partition, begin.get((topic, partition), 0), stop)
        for (topic, partition), stop in sorted(flatten(end).items())
        if stop > begin.get((topic, partition), 0)
    ]
    if not min_partitions or len(out) >= min_partitions:
        return out
    total = sum(r.size for r in out)
    split: list[Range] = []
    for r in out:
        pieces = max(1, min(r.size, round(r.size * min_partitions / total)))
        step, extra = divmod(r.size, pieces)
        at = r.start
        for i in range(pieces):
            n = step + (1 if i < extra else 0)
            split.append(Range(r.topic, r.partition, at, at + n))
            at += n
    return split


__all__ = ["Heads", "Range", "cap", "flatten", "heads_offsets", "latest", "nest", "ranges", "share"]
