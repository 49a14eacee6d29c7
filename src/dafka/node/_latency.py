"""A latency histogram: log-spaced buckets, percentiles from the buckets (pure, no clock).

The clients' ACK latency (``dafka.client``'s ``metrics()``) and the store's append, fsync and
write-to-durable latencies (``dafka.server``, served on ``/metrics``) use it: observing is a
bisect and two adds; a snapshot gives count, mean, p50/p90/p99 (the upper bound of the
bucket they fall in, capped at the largest seen), max and Prometheus-style cumulative buckets.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

LATENCY_BUCKETS: tuple[float, ...] = tuple(50e-6 * 2**i for i in range(22))
"""Upper bounds in seconds of the latency buckets: 50 µs, 100 µs, ... ~105 s (then +inf)."""


@dataclass(frozen=True, slots=True)
class LatencySnapshot:
    """A latency distribution in seconds (0.0 everywhere while ``count`` is 0)."""

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float
    buckets: tuple[tuple[float, int], ...]
    """(upper bound in seconds, cumulative count) per bucket, Prometheus style."""
    sum: float = 0.0
    """Total seconds observed."""


class LatencyHistogram:
    """Counts of latencies per bucket; observing is a bisect and two adds."""

    __slots__ = ("_counts", "count", "max", "sum")

    def __init__(self) -> None:
        self._counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.count = 0
        self.sum = 0.0
        self.max = 0.0

    def observe(self, seconds: float) -> None:
        """Record one latency."""
        if seconds < 0:
            seconds = 0.0
        self._counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.count += 1
        self.sum += seconds
        self.max = max(self.max, seconds)

    def observe_since(self, now: float, starts: list[tuple[float, int]]) -> None:
        """Record ``now - start`` ``n`` times for each ``(start, n)`` (then the caller clears
        ``starts``): a run of RECORDs sent in one turn shares its start."""
        counts = self._counts
        count = 0
        for start, n in starts:
            seconds = now - start
            if seconds < 0:
                seconds = 0.0
            counts[bisect_left(LATENCY_BUCKETS, seconds)] += n
            self.sum += seconds * n
            self.max = max(self.max, seconds)
            count += n
        self.count += count

    def snapshot(self) -> LatencySnapshot:
        count = self.count
        cumulative = []
        running = 0
        for bound, n in zip(LATENCY_BUCKETS, self._counts, strict=False):
            running += n
            cumulative.append((bound, running))

        def quantile(q: float) -> float:
            if not count:
                return 0.0
            rank = q * count
            for bound, seen in cumulative:
                if seen >= rank:
                    return min(bound, self.max)
            return self.max

        return LatencySnapshot(
            count=count,
            mean=self.sum / count if count else 0.0,
            p50=quantile(0.5),
            p90=quantile(0.9),
            p99=quantile(0.99),
            max=self.max,
            buckets=tuple(cumulative),
            sum=self.sum,
        )


__all__ = ["LATENCY_BUCKETS", "LatencyHistogram", "LatencySnapshot"]
