"""The binary search of offsets_for_times (pure): the first RECORD whose time is at or after
the target, against a linear scan, reading at most ceil(log2(head + 2)) records."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from dafka.client._timestamps import Bisection, record_time
from dafka.records import encode_batch


def scan(times: list[int | None], target: int) -> int | None:
    return next((i for i, t in enumerate(times) if t is not None and t >= target), None)


@st.composite
def partitions(draw: st.DrawFn) -> tuple[list[int | None], int]:
    """Non-decreasing times, with a run of unreadable records (None) at the start: what
    retention trimmed, or plain RECORDs before the first stamped one."""
    steps = draw(st.lists(st.integers(0, 5), min_size=1, max_size=300))
    times: list[int | None] = []
    now = draw(st.integers(0, 1000))
    for step in steps:
        now += step
        times.append(now)
    gone = draw(st.integers(0, len(times)))
    times[:gone] = [None] * gone
    return times, draw(st.integers(0, now + 10))


@given(partitions())
def test_bisection_finds_what_a_scan_finds(case: tuple[list[int | None], int]) -> None:
    times, target = case
    search = Bisection(target, len(times) - 1)
    reads = 0
    while not search.done:
        search.answer(times[search.probe()])
        reads += 1
    assert search.result() == scan(times, target)
    assert reads <= math.ceil(math.log2(len(times) + 1))


def test_a_records_time_is_its_latest_message_and_plain_records_have_none() -> None:
    assert record_time(encode_batch([b"a", b"b"], timestamps=[5, 9])) == 9
    assert record_time(encode_batch([b"a"])) is None  # no timestamps
    assert record_time(b"plain content") is None
    corrupt = bytearray(encode_batch([b"a"], timestamps=[1]))
    corrupt[-1] ^= 0xFF
    assert record_time(bytes(corrupt)) is None
