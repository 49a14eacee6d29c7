"""The ACK latency histogram behind Producer.metrics()."""

from __future__ import annotations

import pytest

from dafka.node import LATENCY_BUCKETS, LatencyHistogram


def test_percentiles_are_bucket_bounds_capped_at_the_max() -> None:
    h = LatencyHistogram()
    assert h.snapshot().count == 0
    assert h.snapshot().p99 == 0.0
    # 100 µs (90: one run of 80 and 10 single RECORDs), 3 ms, 500 ms
    starts = [(10.0 - 0.0001, 80)] + [(10.0 - 0.0001, 1)] * 10 + [(10.0 - 0.003, 9), (9.5, 1)]
    h.observe_since(10.0, starts)
    h.observe_since(10.0, [(10.5, 1)])  # a clock going backwards counts as 0
    snap = h.snapshot()
    assert snap.count == 101
    # 91 of 101 at most 100 µs (the backwards one is 0), 9 in (1.6 ms, 3.2 ms], one 0.5 s
    assert snap.p50 == pytest.approx(0.0001)
    assert snap.p90 == pytest.approx(0.0001)
    assert snap.p99 == pytest.approx(0.0032)
    assert snap.max == 0.5
    assert abs(snap.mean - (90 * 0.0001 + 9 * 0.003 + 0.5) / 101) < 1e-9
    assert snap.buckets[-1] == (LATENCY_BUCKETS[-1], 101)
    assert [n for _, n in snap.buckets] == sorted(n for _, n in snap.buckets)  # cumulative
