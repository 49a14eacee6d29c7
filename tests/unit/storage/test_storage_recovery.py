"""Recovery at open, and corruption met by reads: exactly the bad records are lost (a hole),
the intact records after them are kept, and all of it is reported."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dafka.storage import FsyncPolicy, Storage, StorageConfig
from dafka.storage._format import RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE
from tests.unit.storage.storage_payloads import payload

CONFIG = StorageConfig(
    segment_bytes=8192, index_interval_bytes=512, index_flush_entries=2, fsync=FsyncPolicy.os()
)
SIZE = 40  # payload bytes: every record is 56 bytes on disk


def build(root: Path, count: int = 500, config: StorageConfig = CONFIG) -> None:
    with Storage.open(root, config) as storage:
        for start in range(0, count, 50):
            storage.append(
                "t", "p", start, [payload("p", o, SIZE) for o in range(start, start + 50)]
            )


def segments(root: Path) -> list[Path]:
    return sorted((root / "t" / "p").glob("*.log"))


def record_position(offset_in_segment: int) -> int:
    return SEGMENT_HEADER_SIZE + offset_in_segment * (RECORD_HEADER_SIZE + SIZE)


def all_records(storage: Storage) -> list[tuple[int, bytes]]:
    return storage.read("t", "p", 0, 10**9)


def assert_prefix(records: list[tuple[int, bytes]], count: int) -> None:
    assert records == [(o, payload("p", o, SIZE)) for o in range(count)]


def assert_all_but(records: list[tuple[int, bytes]], lost: set[int], count: int = 500) -> None:
    """Every record of ``range(count)`` except the ``lost`` ones, intact and in order."""
    assert records == [(o, payload("p", o, SIZE)) for o in range(count) if o not in lost]


def test_clean_open_scans_only_tails(tmp_path: Path) -> None:
    build(tmp_path)
    with Storage.open(tmp_path, CONFIG) as storage:
        report = storage.recovery_report
        assert report.clean
        assert (report.partitions, report.records) == (1, 500)
        assert report.segments == len(segments(tmp_path)) > 2
        # at most one index interval (plus a record) per segment is read
        assert report.bytes_scanned <= report.segments * (512 + 56)


def test_torn_tail_is_cut_and_reported(tmp_path: Path) -> None:
    build(tmp_path)
    last = segments(tmp_path)[-1]
    base = int(last.stem)
    size = last.stat().st_size
    os.truncate(last, size - 7)
    with Storage.open(tmp_path, CONFIG) as storage:
        (cut,) = storage.recovery_report.truncations
        assert cut.reason == "torn"
        assert cut.segment == last
        assert cut.offset == 499
        assert cut.position == record_position(499 - base)
        assert cut.bytes_dropped == size - 7 - cut.position
        assert storage.head("t", "p") == 498
        assert_prefix(all_records(storage), 499)
        storage.append("t", "p", 499, [payload("p", 499, SIZE)])
    with Storage.open(tmp_path, CONFIG) as storage:
        assert storage.recovery_report.clean
        assert_prefix(all_records(storage), 500)


def test_zero_filled_tail_counts_as_torn(tmp_path: Path) -> None:
    build(tmp_path)
    last = segments(tmp_path)[-1]
    with last.open("ab") as f:
        f.write(bytes(300))
    with Storage.open(tmp_path, CONFIG) as storage:
        (cut,) = storage.recovery_report.truncations
        assert (cut.reason, cut.detail, cut.bytes_dropped) == ("torn", "zero-filled tail", 300)
        assert_prefix(all_records(storage), 500)


def test_a_corrupt_record_near_the_tail_costs_only_itself(tmp_path: Path) -> None:
    build(tmp_path)
    last = segments(tmp_path)[-1]
    base = int(last.stem)
    victim = 495
    pos = record_position(victim - base) + RECORD_HEADER_SIZE + 3
    with last.open("r+b") as f:
        f.seek(pos)
        byte = f.read(1)
        f.seek(pos)
        f.write(bytes([byte[0] ^ 0x10]))
    with Storage.open(tmp_path, CONFIG) as storage:
        (cut,) = storage.recovery_report.truncations
        assert (cut.reason, cut.offset, cut.end_offset, cut.resumed) == (
            "corrupt",
            victim,
            victim + 1,
            victim + 1,
        )
        assert cut.position == record_position(victim - base)
        assert cut.detail == "CRC-32C mismatch"
        assert cut.bytes_dropped == RECORD_HEADER_SIZE + SIZE
        assert storage.head("t", "p") == 499
        assert storage.holes("t", "p") == [(victim, victim + 1)]
        assert_all_but(all_records(storage), {victim})


def test_a_corrupt_last_record_takes_the_head_back(tmp_path: Path) -> None:
    build(tmp_path)
    last = segments(tmp_path)[-1]
    with last.open("r+b") as f:
        f.seek(-5, os.SEEK_END)
        f.write(b"\xee")
    with Storage.open(tmp_path, CONFIG) as storage:
        (cut,) = storage.recovery_report.truncations
        assert (cut.reason, cut.offset, cut.end_offset, cut.resumed) == ("corrupt", 499, None, None)
        assert storage.head("t", "p") == 498
        assert storage.holes("t", "p") == []
        assert_prefix(all_records(storage), 499)


def test_mid_log_corruption_found_by_a_read_leaves_a_hole_of_one_record(tmp_path: Path) -> None:
    build(tmp_path)
    first = segments(tmp_path)[0]
    victim = 10
    with first.open("r+b") as f:
        f.seek(record_position(victim) + 2)  # inside the offset field
        f.write(b"\xff")
    with Storage.open(tmp_path, CONFIG) as storage:
        assert storage.recovery_report.clean  # only tails are checked at open
        assert storage.head("t", "p") == 499
        assert storage.read("t", "p", 0, 5) == [(o, payload("p", o, SIZE)) for o in range(5)]
        assert_all_but(all_records(storage), {victim})
        (cut,) = storage.take_truncations()
        assert (cut.reason, cut.offset, cut.position, cut.end_offset, cut.resumed) == (
            "corrupt",
            victim,
            record_position(victim),
            victim + 1,
            victim + 1,
        )
        assert cut.segment == first
        assert storage.head("t", "p") == 499  # nothing after the hole was given up
        assert storage.durable_offset("t", "p") == 499
        assert storage.holes("t", "p") == [(victim, victim + 1)]
        # a FETCH reply's read stops at the hole, the next one starts after it
        assert storage.read_contents("t", "p", 5, 10) == (
            5,
            [payload("p", o, SIZE) for o in range(5, victim)],
        )
        assert storage.read_contents("t", "p", victim, 3) == (
            victim + 1,
            [payload("p", o, SIZE) for o in range(victim + 1, victim + 3)],
        )
        assert storage.read("t", "p", victim, 1) == []  # never a record that is not there
        storage.fill("t", "p", victim, [payload("p", victim, SIZE)])
        assert storage.holes("t", "p") == []
        assert_prefix(all_records(storage), 500)
    with Storage.open(tmp_path, CONFIG) as storage:
        assert storage.recovery_report.clean
        assert_prefix(all_records(storage), 500)


def test_verify_on_open_finds_a_damaged_length_and_keeps_what_follows(tmp_path: Path) -> None:
    build(tmp_path)
    second = segments(tmp_path)[1]
    base = int(second.stem)
    with second.open("r+b") as f:
        f.seek(record_position(3) + 9)  # inside the length field
        f.write(b"\x7f")
    config = StorageConfig(
        segment_bytes=8192,
        index_interval_bytes=512,
        fsync=FsyncPolicy.os(),
        verify_on_open=True,
        max_record_bytes=1024,  # so the damaged length is recognisably corrupt
    )
    with Storage.open(tmp_path, config) as storage:
        (cut,) = storage.recovery_report.truncations
        assert (cut.reason, cut.offset, cut.segment, cut.end_offset) == (
            "corrupt",
            base + 3,
            second,
            base + 4,
        )
        (copy,) = storage.recovery_report.quarantined
        assert copy.exists()
        assert ".quarantine" in copy.parts
        assert copy.stat().st_size == RECORD_HEADER_SIZE + SIZE
        assert storage.head("t", "p") == 499
        assert_all_but(all_records(storage), {base + 3})


def test_explicit_verify_salvages_like_a_read(tmp_path: Path) -> None:
    build(tmp_path)
    first = segments(tmp_path)[0]
    with first.open("r+b") as f:
        f.seek(record_position(20) + 30)
        f.write(b"\x00\x01")
    with Storage.open(tmp_path, CONFIG) as storage:
        (cut,) = storage.verify()
        assert (cut.offset, cut.end_offset) == (20, 21)
        assert storage.head("t", "p") == 499
        assert storage.holes("t", "p") == [(20, 21)]
        assert storage.verify() == []
        assert_all_but(all_records(storage), {20})


def test_missing_indexes_are_rebuilt_identically(tmp_path: Path) -> None:
    build(tmp_path)
    idx = sorted((tmp_path / "t" / "p").glob("*.idx"))
    before = {p: p.read_bytes() for p in idx}
    for p in idx:
        p.unlink()
    with Storage.open(tmp_path, CONFIG) as storage:
        assert sorted(storage.recovery_report.indexes_rebuilt) == idx
        assert storage.recovery_report.truncations == []
        assert_prefix(all_records(storage), 500)
    assert {p: p.read_bytes() for p in idx} == before


def test_garbage_index_entries_are_dropped_and_data_kept(tmp_path: Path) -> None:
    build(tmp_path)
    idx = sorted((tmp_path / "t" / "p").glob("*.idx"))[0]
    data = bytearray(idx.read_bytes())
    assert len(data) >= 16
    data[-8:] = (5).to_bytes(4, "big") + (60).to_bytes(4, "big")  # wrong position
    data += b"\x01\x02\x03"  # partial entry
    idx.write_bytes(bytes(data))
    with Storage.open(tmp_path, CONFIG) as storage:
        assert idx in storage.recovery_report.indexes_repaired
        assert storage.recovery_report.truncations == []
        assert_prefix(all_records(storage), 500)


def test_an_index_pointing_at_the_wrong_record_does_not_lose_data(tmp_path: Path) -> None:
    build(tmp_path)
    idx = sorted((tmp_path / "t" / "p").glob("*.idx"))[0]
    data = bytearray(idx.read_bytes())
    # shift the first entry's position by one record: sane-looking, but wrong
    pos = int.from_bytes(data[4:8], "big")
    data[4:8] = (pos + RECORD_HEADER_SIZE + SIZE).to_bytes(4, "big")
    idx.write_bytes(bytes(data))
    with Storage.open(tmp_path, CONFIG) as storage:
        assert_prefix(all_records(storage), 500)
        for o in range(60):
            assert storage.read("t", "p", o, 1) == [(o, payload("p", o, SIZE))]
        assert storage.take_truncations() == []


def test_a_missing_segment_file_leaves_a_hole_and_the_later_ones_are_kept(
    tmp_path: Path,
) -> None:
    build(tmp_path)
    segs = segments(tmp_path)
    segs[1].unlink()
    lost = set(range(int(segs[1].stem), int(segs[2].stem)))
    with Storage.open(tmp_path, CONFIG) as storage:
        (gap,) = storage.recovery_report.truncations
        assert (gap.reason, gap.offset, gap.end_offset) == ("gap", min(lost), max(lost) + 1)
        assert segments(tmp_path) == [segs[0], *segs[2:]]
        assert storage.holes("t", "p") == [(min(lost), max(lost) + 1)]
        assert storage.head("t", "p") == 499
        assert_all_but(all_records(storage), lost)


def test_torn_segment_header_and_orphan_index(tmp_path: Path) -> None:
    build(tmp_path)
    segs = segments(tmp_path)
    last = segs[-1]
    last.write_bytes(last.read_bytes()[:10])
    orphan = tmp_path / "t" / "p" / ("0" * 12 + "9" * 8 + ".idx")
    orphan.write_bytes(b"")
    stray = tmp_path / "t" / "p" / "notes.txt"
    stray.write_text("not ours")
    with Storage.open(tmp_path, CONFIG) as storage:
        report = storage.recovery_report
        (cut,) = report.truncations
        assert (cut.reason, cut.position, cut.offset) == ("torn", 0, int(last.stem))
        assert orphan in report.removed
        assert stray in report.skipped
        assert stray.exists()
        assert_prefix(all_records(storage), int(last.stem))
        assert last.stat().st_size == SEGMENT_HEADER_SIZE


def test_a_bad_segment_header_is_rewritten_and_costs_no_record(tmp_path: Path) -> None:
    build(tmp_path)
    first = segments(tmp_path)[0]
    with first.open("r+b") as f:
        f.write(b"XAFKALOG")
    with Storage.open(tmp_path, CONFIG) as storage:
        (cut,) = storage.recovery_report.truncations
        assert (cut.reason, cut.position, cut.offset, cut.end_offset) == ("corrupt", 0, 0, 0)
        assert "bad segment header" in cut.detail
        assert storage.head("t", "p") == 499
        assert_prefix(all_records(storage), 500)
    with Storage.open(tmp_path, CONFIG) as storage:
        assert storage.recovery_report.clean


def test_a_segment_whose_records_are_all_damaged_is_emptied_not_dropped(tmp_path: Path) -> None:
    build(tmp_path)
    first = segments(tmp_path)[0]
    size = first.stat().st_size
    with first.open("r+b") as f:  # garbage over every record of the first segment
        f.seek(SEGMENT_HEADER_SIZE)
        f.write(bytes((i * 7 + 1) % 251 for i in range(size - SEGMENT_HEADER_SIZE)))
    with Storage.open(tmp_path, CONFIG) as storage:
        lost = set(range(int(segments(tmp_path)[1].stem)))
        assert storage.holes("t", "p") == [(0, max(lost) + 1)]
        assert_all_but(all_records(storage), lost)
        (cut,) = storage.recovery_report.truncations
        assert (cut.offset, cut.end_offset, cut.resumed) == (0, None, None)


def test_heads_come_from_tails_only(tmp_path: Path) -> None:
    config = StorageConfig(segment_bytes=1 << 20, index_interval_bytes=4096, fsync=FsyncPolicy.os())
    with Storage.open(tmp_path, config) as storage:
        for part in ("a", "b", "c"):
            storage.append("t", part, 0, [b"x" * 100] * 20_000)
    with Storage.open(tmp_path, config) as storage:
        assert storage.heads("t") == {"a": 19_999, "b": 19_999, "c": 19_999}
        report = storage.recovery_report
        assert report.bytes_scanned < report.segments * 8192
        assert report.bytes_scanned < 0.01 * 3 * 20_000 * 116


@pytest.mark.parametrize("cut_at", [1, 15, 16, 17, 55, 56])
def test_any_cut_in_the_first_record(tmp_path: Path, cut_at: int) -> None:
    build(tmp_path, 1)
    (seg,) = segments(tmp_path)
    os.truncate(seg, SEGMENT_HEADER_SIZE + cut_at)
    with Storage.open(tmp_path, CONFIG) as storage:
        complete = cut_at >= RECORD_HEADER_SIZE + SIZE
        assert storage.head("t", "p") == (0 if complete else None)
        assert bool(storage.recovery_report.truncations) is not complete
