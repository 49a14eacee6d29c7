"""``scan`` checking records of one length many at a time (the scrub's and ``verify``'s way)
finds exactly what the per-record check finds: the same stop, the same problem, the same
words - on healthy logs and on damaged ones, of one length, of mixed lengths and of runs."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dafka.storage._format import SEGMENT_HEADER_SIZE, ScanResult, encode_run, scan

MAX_LENGTH = 300


def _scan_both(
    path: Path, data: bytes, first: int, stop: int, chunk: int, max_length: int
) -> tuple[ScanResult, ScanResult]:
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        end = len(data)
        checked = scan(
            fd,
            SEGMENT_HEADER_SIZE,
            end,
            first,
            max_length=max_length,
            stop_offset=stop,
            chunk=chunk,
        )
        wanted: list[tuple[int, bytes]] = []  # wanting the records: one at a time
        one_by_one = scan(
            fd,
            SEGMENT_HEADER_SIZE,
            end,
            first,
            max_length=max_length,
            stop_offset=stop,
            chunk=chunk,
            out=wanted,
            want_from=first,
        )
    finally:
        os.close(fd)
    return checked, one_by_one


length = st.one_of(st.integers(0, 40), st.integers(0, MAX_LENGTH))
lengths = st.one_of(
    st.lists(length, min_size=1, max_size=400),  # mixed
    st.builds(lambda n, k: [n] * k, length, st.integers(1, 400)),  # one
    st.lists(  # runs of one length
        st.tuples(length, st.integers(1, 80)), min_size=1, max_size=8
    ).map(lambda runs: [n for n, k in runs for _ in range(k)]),
)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lengths=lengths,
    first=st.integers(0, 2**40),
    damage=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), max_size=3),
    cut=st.one_of(st.none(), st.floats(0, 1)),
    stop=st.one_of(st.none(), st.integers(0, 500)),
    chunk=st.sampled_from([64, 1000, 8192, 1 << 20]),
    max_length=st.sampled_from([MAX_LENGTH, 120]),
)
def test_checking_many_at_a_time_finds_what_one_at_a_time_finds(
    tmp_path: Path,
    lengths: list[int],
    first: int,
    damage: list[tuple[float, int]],
    cut: float | None,
    stop: int | None,
    chunk: int,
    max_length: int,
) -> None:
    payloads = [bytes([(first + i) % 251]) * n for i, n in enumerate(lengths)]
    data = bytearray(b"\0" * SEGMENT_HEADER_SIZE)
    for part in encode_run(first, payloads, lengths):
        data += part
    body = len(data) - SEGMENT_HEADER_SIZE
    for where, mask in damage:  # flipped bits anywhere: headers, CRCs, payloads
        data[SEGMENT_HEADER_SIZE + int(where * body)] ^= mask
    if cut is not None:  # a torn tail
        del data[SEGMENT_HEADER_SIZE + int(cut * body) :]
    stop_offset = first + (len(lengths) + 1 if stop is None else stop)
    checked, one_by_one = _scan_both(
        tmp_path / "seg.log", bytes(data), first, stop_offset, chunk, max_length
    )
    assert checked == one_by_one
    if not damage and cut is None and max(lengths) <= max_length:
        assert checked.problem is None
        assert checked.next_offset == min(stop_offset, first + len(lengths))
