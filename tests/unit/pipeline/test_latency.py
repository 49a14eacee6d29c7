"""Latency figures: when a window closes in a paced feed, and how late its aggregate showed."""

from __future__ import annotations

from pathlib import Path

import pytest

from dafka.pipeline import Kind, Message, Reading, encode
from dafka.pipeline._checks import latencies
from dafka.pipeline._run import RunOptions, Timings


def reading(index: int, ts: int) -> Message:
    r = Reading(f"e{index}", "d", ts, 1)
    return Message(index, b"d", encode(r), Kind.READING, r)


def test_closed_and_whole_window_latency() -> None:
    options = RunOptions(data_dir=Path("unused"), rate=10.0, window_ms=1_000, watermark_ms=2_000)
    # message i produced at 100 + i / 10 s; event time 500 ms per message
    messages = [reading(i, i * 500) for i in range(10)]
    timings = Timings(started=100.0)
    # window [0, 1000): last reading is message 1 (ts 500); it closes once event time reaches
    # 1000 + 2000 = 3000: message 6, produced at 100.6
    timings.appeared[(0, "d")] = 101.0
    # window [4000, 5000): messages 8 and 9; never closed by the data (needs 7000)
    timings.appeared[(4_000, "d")] = 105.0
    closed, whole = latencies(messages, options, timings)
    assert closed == [pytest.approx(0.4)]
    assert sorted(whole) == [pytest.approx(0.9), pytest.approx(4.1)]


def test_unpaced_runs_have_no_latency_figures() -> None:
    options = RunOptions(data_dir=Path("unused"), rate=0.0)
    assert latencies([reading(0, 0)], options, Timings(started=0.0)) == ([], [])
