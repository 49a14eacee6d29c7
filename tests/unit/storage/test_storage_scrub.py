"""The background scrub (``Storage.scrub``, paced by ``dafka.server.Scrubber``): it finds damage
no read met, salvages it like a read, and never reports damage that is not there."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dafka.server import Scrubber
from dafka.storage import FsyncPolicy, RetentionPolicy, Storage, StorageConfig
from dafka.storage._format import RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE
from dafka.storage._partition_log import ScrubMemo, Stretch
from tests.unit.storage.storage_payloads import payload

CONFIG = StorageConfig(segment_bytes=8192, index_interval_bytes=512, fsync=FsyncPolicy.os())
SIZE = 40  # 56 bytes on disk


def build(root: Path, partitions: tuple[str, ...] = ("p",), count: int = 500) -> None:
    with Storage.open(root, CONFIG) as storage:
        for p in partitions:
            storage.append("t", p, 0, [payload(p, o, SIZE) for o in range(count)])


def flip(root: Path, partition: str, offset: int) -> None:
    segs = sorted((root / "t" / partition).glob("*.log"))
    seg = [s for s in segs if int(s.stem) <= offset][-1]
    at = SEGMENT_HEADER_SIZE + (offset - int(seg.stem)) * (RECORD_HEADER_SIZE + SIZE) + 20
    data = bytearray(seg.read_bytes())
    data[at : at + 3] = bytes(b ^ 0x5A for b in data[at : at + 3])
    seg.write_bytes(bytes(data))


def test_the_scrub_finds_what_no_read_met_and_keeps_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    build(tmp_path, ("a", "b"))
    flip(tmp_path, "b", 321)
    with caplog.at_level(logging.WARNING), Storage.open(tmp_path, CONFIG) as storage:
        assert storage.recovery_report.clean  # only the tails are checked at open
        checked = 0
        while storage.scrub_progress.passes == 0:
            step = storage.scrub(4096)
            assert 0 < step <= 4096 + RECORD_HEADER_SIZE + SIZE  # the budget, give or take one
            checked += step
        progress = storage.scrub_progress
        assert (progress.damage, progress.records_lost) == (1, 1)
        assert progress.bytes_checked == checked
        assert progress.pass_bytes == checked  # the pass is complete, the next one not begun
        (cut,) = storage.take_truncations()
        assert (cut.partition, cut.offset, cut.end_offset) == ("b", 321, 322)
        assert storage.holes("t", "b") == [(321, 322)]
        assert len(storage.read("t", "b", 0, 1000)) == 499
        assert storage.read("t", "a", 0, 1000) == [(o, payload("a", o, SIZE)) for o in range(500)]
    assert any("scrub: partition 't'/'b' damaged" in r.getMessage() for r in caplog.records)


def test_a_scrub_position_survives_appends_and_a_repair_by_a_read(tmp_path: Path) -> None:
    build(tmp_path)
    flip(tmp_path, "p", 400)
    with Storage.open(tmp_path, CONFIG) as storage:
        storage.scrub(2000)  # part of the first segment
        storage.read("t", "p", 0, 1000)  # a read meets the damage first: the log changes
        (cut,) = storage.take_truncations()
        assert cut.offset == 400
        storage.append("t", "p", 500, [payload("p", o, SIZE) for o in range(500, 600)])
        while storage.scrub_progress.passes < 2:
            storage.scrub(3000)
        assert storage.scrub_progress.damage == 0  # nothing that is not there
        assert storage.take_truncations() == []


def test_a_store_with_nothing_scrubs_nothing(tmp_path: Path) -> None:
    with Storage.open(tmp_path, CONFIG) as storage:
        assert storage.scrub(1 << 20) == 0
        storage.append("t", "p", 0, [b""])  # a record of no payload: 16 bytes
        assert storage.scrub(1 << 20) == RECORD_HEADER_SIZE  # a call ends with its pass
        assert storage.scrub_progress.passes == 1


class Clock:
    def __init__(self) -> None:
        self.now = 100.0


def test_the_scrubber_keeps_to_its_rate(tmp_path: Path) -> None:
    build(tmp_path, ("a", "b", "c"), 2_000)
    with Storage.open(tmp_path, CONFIG) as storage:
        scrubber = Scrubber(storage, bytes_per_s=50_000)
        clock = Clock()
        scrubber.turn(clock.now)
        for _ in range(40):  # 4 s in steps of 0.1 s
            clock.now += 0.1
            scrubber.turn(clock.now)
        checked = storage.scrub_progress.bytes_checked
        assert 4 * 50_000 - 10_000 <= checked <= 4 * 50_000 + 10_000
        stats = scrubber.statistics()
        assert stats.bytes_checked == checked
        assert 0 < stats.pass_progress < 1
        assert (stats.bytes_per_s, stats.passes, stats.damage) == (50_000, 0, 0)
        off = Scrubber(storage, bytes_per_s=0)
        off.turn(clock.now)
        off.turn(clock.now + 100)
        assert storage.scrub_progress.bytes_checked == checked


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(1, 60), st.sampled_from("pq")),
            st.tuples(st.just("scrub"), st.integers(1, 5000), st.just("")),
            st.tuples(st.just("read"), st.integers(0, 400), st.sampled_from("pq")),
            st.tuples(st.just("retention"), st.just(0), st.just("")),
            st.tuples(st.just("reopen"), st.just(0), st.just("")),
        ),
        max_size=40,
    )
)
def test_a_scrub_of_a_healthy_log_never_finds_damage(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int, str]]
) -> None:
    """Whatever happens between its steps (appends, reads, retention, restarts)."""
    root = tmp_path_factory.mktemp("scrub")
    config = StorageConfig(
        segment_bytes=1024,
        index_interval_bytes=128,
        fsync=FsyncPolicy.os(),
        first_offset=None,
        retention=RetentionPolicy(max_bytes=3000),
    )
    storage = Storage.open(root, config)
    nxt = {"p": 0, "q": 0}
    try:
        for kind, n, p in steps:
            if kind == "append":
                storage.append("t", p, nxt[p], [payload(p, o) for o in range(nxt[p], nxt[p] + n)])
                nxt[p] += n
            elif kind == "scrub":
                storage.scrub(n)
            elif kind == "read":
                storage.read("t", p, n, 50)
            elif kind == "retention":
                storage.apply_retention(0.0)
            else:
                storage.close()
                storage = Storage.open(root, config)
        for _ in range(100):
            storage.scrub(10_000)
        assert storage.scrub_progress.damage == 0
        assert storage.take_truncations() == []
        for p, end in nxt.items():
            start = storage.start_offset("t", p) or 0
            assert storage.read("t", p, 0, end) == [(o, payload(p, o)) for o in range(start, end)]
    finally:
        storage.close()


def test_a_later_pass_reads_unchanged_stretches_whole_and_still_finds_a_flip(
    tmp_path: Path,
) -> None:
    build(tmp_path, ("a",), 2_000)  # 112,000 bytes of records in 14 segments
    with Storage.open(tmp_path, CONFIG) as storage:
        while storage.scrub_progress.passes < 1:
            storage.scrub(4096)
        assert storage.scrub_progress.bytes_unchanged == 0  # the first pass: record by record
        while storage.scrub_progress.passes < 2:
            storage.scrub(4096)
        progress = storage.scrub_progress
        size = 2_000 * (RECORD_HEADER_SIZE + SIZE)
        assert progress.bytes_unchanged == size  # the second: every stretch found unchanged
        assert progress.damage == 0
        assert Scrubber(storage, 1.0).statistics().bytes_unchanged == size  # (/metrics)
        flip(tmp_path, "a", 1_234)  # under a stretch the memo holds (files read by pread)
        while storage.scrub_progress.passes < 3:
            storage.scrub(4096)
        assert (progress.damage, progress.records_lost) == (1, 1)
        (cut,) = storage.take_truncations()
        assert (cut.offset, cut.end_offset) == (1_234, 1_235)
        assert progress.bytes_unchanged < 2 * size  # the changed stretch was checked anew


def test_the_scrub_memo_is_bounded_and_forgets_logs_that_changed() -> None:
    memo = ScrubMemo(capacity=3)
    for position in range(5):
        memo.keep(("t", "p", 0, position), Stretch(0, position, position + 1, position + 1, 7))
    assert len(memo) == 3  # more are not kept
    memo.keep(("t", "p", 0, 0), Stretch(0, 0, 2, 2, 8))  # one it holds is replaced
    assert memo.stretches[("t", "p", 0, 0)].end == 2
    memo.keep(("t", "q", 0, 0), Stretch(1, 0, 1, 1, 7))
    assert len(memo) == 3
    memo.purge({("t", "p"): 1})  # p's segments changed since (generation 1)
    assert len(memo) == 0


def _payload_at(root: Path, offset: int) -> tuple[Path, int, int]:
    """The segment file holding record ``offset`` of t/p, where its payload starts, and its
    length (walked by the records' headers: salvage may have split the segments)."""
    for seg in sorted((root / "t" / "p").glob("*.log"), reverse=True):
        if int(seg.stem) > offset:
            continue
        data = seg.read_bytes()
        at = SEGMENT_HEADER_SIZE
        while at + RECORD_HEADER_SIZE <= len(data):
            got = int.from_bytes(data[at : at + 8], "big")
            length = int.from_bytes(data[at + 8 : at + 12], "big")
            if got == offset:
                return seg, at + RECORD_HEADER_SIZE, length
            at += RECORD_HEADER_SIZE + length
    raise AssertionError(f"record {offset} not on disk")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(1, 60)),
            st.tuples(st.just("flip"), st.integers(0, 10**6)),
            st.tuples(st.just("scrub"), st.sampled_from([100, 700, 4096, 9000, 30_000])),
        ),
        min_size=10,
        max_size=60,
    )
)
def test_the_memo_never_hides_a_flip_whatever_the_steps_stretches_and_repairs(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]]
) -> None:
    """Bits flipped at any time under stretches the memo holds, with budgets that move the
    stretches' boundaries, appends to the active segment and the repairs of earlier flips
    between the steps: every flipped record is found by the scrub alone within three passes
    after the last step (review: ScrubMemo, 9c9455c)."""
    root = tmp_path_factory.mktemp("memo")
    storage = Storage.open(root, CONFIG)
    nxt = 300
    storage.append("t", "p", 0, [payload("p", o, SIZE if o % 3 else None) for o in range(nxt)])
    flipped: set[int] = set()
    lost: set[int] = set()

    def collect() -> None:
        for cut in storage.take_truncations():
            assert cut.end_offset is not None  # never the tail: flips stay 20 records behind
            gone = set(range(cut.offset, cut.end_offset))
            assert gone <= flipped, (gone, flipped)  # damage that is there, only
            flipped.difference_update(gone)
            lost.update(gone)

    try:
        for kind, n in steps:
            if kind == "append":
                values = [payload("p", o, SIZE if o % 3 else None) for o in range(nxt, nxt + n)]
                storage.append("t", "p", nxt, values)
                nxt += n
            elif kind == "flip":
                offset = n % (nxt - 20)
                if offset in flipped or offset in lost:
                    continue
                seg, at, length = _payload_at(root, offset)
                if not length:
                    continue
                data = bytearray(seg.read_bytes())
                data[at + n % length] ^= 1 << (n % 8)
                seg.write_bytes(bytes(data))
                flipped.add(offset)
            else:
                storage.scrub(n)
                collect()
        passes = storage.scrub_progress.passes
        while storage.scrub_progress.passes < passes + 3:
            storage.scrub(4096)
            collect()
        assert flipped == set(), f"missed by the scrub: {sorted(flipped)}"
    finally:
        storage.close()
