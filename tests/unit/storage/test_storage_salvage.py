"""Issue 18 path 4: damage costs exactly the damaged records; the intact ones after them stay.

A record carries its offset, length and CRC, so the log finds the next intact record after a
bad one by itself (``_format.resync``) and keeps the rest of the segment as a segment of its
own (``_segment.salvage``); the offsets between are a hole (``Storage.holes``) that the store
fills from its peers (``Storage.fill``) or records as gone (``append(after_gap=True)``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dafka.storage import FsyncPolicy, InvalidArgumentError, Storage, StorageConfig
from dafka.storage._format import RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE
from dafka.storage._quarantine import QUARANTINE_DIR
from tests.unit.storage.storage_payloads import payload

ONE_SEGMENT = StorageConfig(fsync=FsyncPolicy.os())
SMALL = StorageConfig(segment_bytes=4096, index_interval_bytes=512, fsync=FsyncPolicy.os())


def fill_log(
    root: Path, count: int, size: int | None = 100, config: StorageConfig = ONE_SEGMENT
) -> list[bytes]:
    records = [payload("p", o, size) for o in range(count)]
    with Storage.open(root, config) as storage:
        for start in range(0, count, 1000):
            storage.append("t", "p", start, records[start : start + 1000])
    return records


def segment_files(root: Path) -> list[Path]:
    return sorted((root / "t" / "p").glob("*.log"))


def position_of(offset: int, records: list[bytes], base: int = 0) -> int:
    return SEGMENT_HEADER_SIZE + sum(RECORD_HEADER_SIZE + len(r) for r in records[base:offset])


def flip(path: Path, at: int, count: int = 3) -> None:
    data = bytearray(path.read_bytes())
    for i in range(at, at + count):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def everything(storage: Storage) -> list[tuple[int, bytes]]:
    return storage.read("t", "p", 0, 10**9)


def expected(records: list[bytes], lost: set[int]) -> list[tuple[int, bytes]]:
    return [(o, r) for o, r in enumerate(records) if o not in lost]


def quarantined(root: Path) -> list[Path]:
    folder = root / QUARANTINE_DIR / "t" / "p"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_a_3_byte_flip_mid_segment_costs_one_record_not_the_10000_after_it(tmp_path: Path) -> None:
    """The issue's case: 20,001 records of 100 B in one segment, 3 bytes flipped inside
    record 10,000's payload. Before: 10,001 records cut (the rest moved to the quarantine)."""
    records = fill_log(tmp_path, 20_001)
    (segment,) = segment_files(tmp_path)
    victim = 10_000
    flip(segment, position_of(victim, records) + RECORD_HEADER_SIZE + 40)
    with Storage.open(tmp_path, ONE_SEGMENT) as storage:
        assert everything(storage) == expected(records, {victim})
        (cut,) = storage.take_truncations()
        assert (cut.offset, cut.end_offset, cut.lost, cut.resumed) == (
            victim,
            victim + 1,
            1,
            victim + 1,
        )
        assert storage.holes("t", "p") == [(victim, victim + 1)]
        assert storage.head("t", "p") == 20_000
    (bad,) = quarantined(tmp_path)
    assert bad.stat().st_size == RECORD_HEADER_SIZE + 100  # exactly the bad record
    with Storage.open(tmp_path, ONE_SEGMENT) as storage:  # and so it stays
        assert everything(storage) == expected(records, {victim})
        assert storage.holes("t", "p") == [(victim, victim + 1)]


def test_a_damaged_length_is_stepped_over_by_searching_for_the_next_record(tmp_path: Path) -> None:
    records = fill_log(tmp_path, 3_000, size=None)  # lengths vary: 0..199 bytes
    (segment,) = segment_files(tmp_path)
    victim = 1_234
    at = position_of(victim, records) + 8  # the length field: a wrong but plausible length
    data = bytearray(segment.read_bytes())
    length = int.from_bytes(data[at : at + 4], "big")
    data[at : at + 4] = (length + 37).to_bytes(4, "big")
    segment.write_bytes(bytes(data))
    with Storage.open(tmp_path, ONE_SEGMENT) as storage:
        assert everything(storage) == expected(records, {victim})
        assert storage.holes("t", "p") == [(victim, victim + 1)]


def test_two_damaged_stretches_leave_two_holes_and_two_quarantined_copies(tmp_path: Path) -> None:
    records = fill_log(tmp_path, 5_000)
    (segment,) = segment_files(tmp_path)
    flip(segment, position_of(1_000, records) + 30)
    flip(segment, position_of(3_000, records) + 5)  # offset field
    with Storage.open(tmp_path, ONE_SEGMENT) as storage:
        assert everything(storage) == expected(records, {1_000, 3_000})
        assert storage.holes("t", "p") == [(1_000, 1_001), (3_000, 3_001)]
        assert [c.offset for c in storage.take_truncations()] == [1_000, 3_000]
    assert [p.name for p in segment_files(tmp_path)] == [
        f"{base:020d}.log" for base in (0, 1_001, 3_001)
    ]
    assert len(quarantined(tmp_path)) == 2


def test_a_zeroed_page_in_the_middle_loses_only_the_records_it_touched(tmp_path: Path) -> None:
    records = fill_log(tmp_path, 2_000)
    (segment,) = segment_files(tmp_path)
    data = bytearray(segment.read_bytes())
    data[8192 : 8192 + 4096] = bytes(4096)  # a page lost in a power cut
    segment.write_bytes(bytes(data))
    hit = {
        o
        for o in range(2_000)
        if position_of(o, records) < 8192 + 4096 and position_of(o + 1, records) > 8192
    }
    with Storage.open(tmp_path, ONE_SEGMENT) as storage:
        assert everything(storage) == expected(records, hit)
        assert storage.holes("t", "p") == [(min(hit), max(hit) + 1)]


def test_damage_in_the_active_segment_keeps_appending_after_the_head(tmp_path: Path) -> None:
    records = fill_log(tmp_path, 1_000)
    (segment,) = segment_files(tmp_path)
    flip(segment, position_of(500, records) + 20)
    with Storage.open(tmp_path, ONE_SEGMENT) as storage:
        assert len(everything(storage)) == 999
        storage.append("t", "p", 1_000, [b"next"])
        assert storage.read("t", "p", 999, 5) == [(999, records[999]), (1_000, b"next")]
        storage.fill("t", "p", 500, [records[500]])
        assert everything(storage) == [*expected(records, set()), (1_000, b"next")]
    with Storage.open(tmp_path, ONE_SEGMENT) as storage:
        assert storage.recovery_report.clean
        assert storage.holes("t", "p") == []


def test_a_salvage_interrupted_before_its_cut_is_finished_at_open(tmp_path: Path) -> None:
    """A crash between writing the kept records' segment and cutting the damaged one leaves
    both: the next open checks the damaged segment whole and finishes (no record twice)."""
    records = fill_log(tmp_path, 4_000, config=SMALL)
    first = segment_files(tmp_path)[0]
    in_first = int(segment_files(tmp_path)[1].stem)
    victim = in_first // 2
    flip(first, position_of(victim, records) + 20)
    damaged = first.read_bytes()
    with Storage.open(tmp_path, SMALL) as storage:
        assert everything(storage) == expected(records, {victim})
    first.write_bytes(damaged)  # as if the cut never happened
    (first.parent / f"{victim + 1:020d}.log.salvage").write_bytes(b"half a copy")
    with Storage.open(tmp_path, SMALL) as storage:
        assert everything(storage) == expected(records, {victim})
        assert storage.holes("t", "p") == [(victim, victim + 1)]
        report = storage.recovery_report
        assert first.parent / f"{victim + 1:020d}.log.salvage" in report.removed
    with Storage.open(tmp_path, SMALL) as storage:  # a known hole is reported at each open
        (gap,) = storage.recovery_report.truncations
        assert (gap.reason, gap.offset, gap.end_offset, gap.bytes_dropped) == (
            "gap",
            victim,
            victim + 1,
            0,
        )
        assert everything(storage) == expected(records, {victim})


def test_fill_writes_into_a_hole_only(tmp_path: Path) -> None:
    records = fill_log(tmp_path, 4_000, config=SMALL)
    segs = segment_files(tmp_path)
    gone = range(int(segs[1].stem), int(segs[4].stem))  # three segments' worth
    for seg in segs[1:4]:
        shutil.move(seg, tmp_path / seg.name)
    with Storage.open(tmp_path, SMALL) as storage:
        assert storage.holes("t", "p") == [(gone.start, gone.stop)]
        with pytest.raises(InvalidArgumentError, match="no hole starts"):
            storage.fill("t", "p", gone.start + 1, [records[gone.start + 1]])
        with pytest.raises(InvalidArgumentError, match="past the hole"):
            storage.fill("t", "p", gone.start, records[gone.start : gone.stop + 1])
        with pytest.raises(InvalidArgumentError, match="no hole starts"):
            storage.fill("t", "p", 0, [records[0]])
        half = (gone.start + gone.stop) // 2
        assert storage.fill("t", "p", gone.start, records[gone.start : half]) == half - 1
        assert storage.holes("t", "p") == [(half, gone.stop)]
        storage.fill("t", "p", half, records[half : gone.stop])  # rolls new segments
        assert storage.holes("t", "p") == []
        assert everything(storage) == expected(records, set())
    assert all(p.stat().st_size <= 4096 for p in segment_files(tmp_path))
    with Storage.open(tmp_path, SMALL) as storage:
        assert storage.recovery_report.clean
        assert everything(storage) == expected(records, set())


def test_append_after_a_gap_records_a_hole_that_survives_a_restart(tmp_path: Path) -> None:
    with Storage.open(tmp_path, SMALL) as storage:
        storage.append("t", "p", 0, [b"a", b"b"])
        with pytest.raises(Exception, match="expects offset 2"):
            storage.append("t", "p", 5, [b"f"])
        storage.append("t", "p", 5, [b"f", b"g"], after_gap=True)
        assert storage.holes("t", "p") == [(2, 5)]
        assert storage.head("t", "p") == 6
        storage.append("t", "p", 7, [b"h"])
    with Storage.open(tmp_path, SMALL) as storage:
        (gap,) = storage.recovery_report.truncations
        assert (gap.reason, gap.offset, gap.end_offset) == ("gap", 2, 5)
        assert everything(storage) == [(0, b"a"), (1, b"b"), (5, b"f"), (6, b"g"), (7, b"h")]
        storage.fill("t", "p", 2, [b"c", b"d", b"e"])
        assert [p for _, p in everything(storage)] == [
            b"a",
            b"b",
            b"c",
            b"d",
            b"e",
            b"f",
            b"g",
            b"h",
        ]


def test_a_new_partition_after_a_gap_simply_starts_there(tmp_path: Path) -> None:
    with Storage.open(tmp_path, SMALL) as storage:
        storage.append("t", "p", 100, [b"x"], after_gap=True)
        assert (storage.start_offset("t", "p"), storage.holes("t", "p")) == (100, [])


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.integers(0, 300), min_size=2, max_size=120),
    data=st.data(),
    verify_on_open=st.booleans(),
)
def test_any_damage_inside_one_record_loses_exactly_that_record(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[int],
    data: st.DataObject,
    verify_on_open: bool,
) -> None:
    root = tmp_path_factory.mktemp("salvage")
    config = StorageConfig(
        segment_bytes=2048, index_interval_bytes=256, fsync=FsyncPolicy.os(), max_record_bytes=1024
    )
    records = [payload("p", o, size) for o, size in enumerate(sizes)]
    with Storage.open(root, config) as storage:
        storage.append("t", "p", 0, records)
        starts = {}
        for seg in storage.log("t", "p").segments:  # type: ignore[union-attr]
            pos = SEGMENT_HEADER_SIZE
            for o in range(seg.base, seg.next_offset):
                starts[o] = (seg.path, pos)
                pos += RECORD_HEADER_SIZE + len(records[o])
    victim = data.draw(st.integers(0, len(records) - 1), label="victim")
    path, start = starts[victim]
    span = RECORD_HEADER_SIZE + len(records[victim])
    hits = data.draw(st.lists(st.integers(0, span - 1), min_size=1, max_size=3, unique=True))
    raw = bytearray(path.read_bytes())
    for at in hits:
        raw[start + at] ^= data.draw(st.integers(1, 255))
    path.write_bytes(bytes(raw))
    config = StorageConfig(
        segment_bytes=2048,
        index_interval_bytes=256,
        fsync=FsyncPolicy.os(),
        max_record_bytes=1024,
        verify_on_open=verify_on_open,
    )
    with Storage.open(root, config) as storage:
        assert everything(storage) == expected(records, {victim})
        if victim < len(records) - 1:
            assert storage.holes("t", "p") == [(victim, victim + 1)]
        else:  # the last record: the head goes back
            assert storage.head("t", "p") == victim - 1
    with Storage.open(root, config) as storage:
        assert everything(storage) == expected(records, {victim})
    assert all(p.exists() for p in quarantined(root))
    os.sync()
