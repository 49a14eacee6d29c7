"""What recovery and reads cannot read goes to the quarantine, and every loss is a WARNING."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dafka.storage import Storage
from dafka.storage._format import encode_segment_header
from dafka.storage._quarantine import QUARANTINE_DIR
from tests.unit.storage.test_storage_recovery import (
    CONFIG,
    SIZE,
    all_records,
    assert_all_but,
    assert_prefix,
    build,
    record_position,
    segments,
)


def quarantine(root: Path) -> list[Path]:
    return sorted((root / QUARANTINE_DIR / "t" / "p").iterdir())


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_bad_segment_magic_is_set_aside_and_its_records_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    build(tmp_path)
    first = segments(tmp_path)[0]
    damaged = b"XAFKALOG" + first.read_bytes()[8:]
    first.write_bytes(damaged)
    with caplog.at_level(logging.WARNING), Storage.open(tmp_path, CONFIG) as storage:
        assert storage.head("t", "p") == 499
        assert_prefix(all_records(storage), 500)
        assert first.read_bytes() == encode_segment_header(0) + damaged[24:]
        moved = storage.recovery_report.quarantined
    (header,) = quarantine(tmp_path)
    assert header.read_bytes() == damaged[:24]  # never deleted: the bad bytes are kept aside
    assert moved == [header]
    logged = warnings(caplog)
    assert any(
        "'t'/'p'" in m and "bad segment header" in m and "no records dropped" in m for m in logged
    ), logged


def test_an_unknown_log_file_is_quarantined_not_deleted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    build(tmp_path)
    stray = tmp_path / "t" / "p" / f"{10**9:020d}.log"
    stray.write_bytes(encode_segment_header(10**9) + b"someone else's bytes")
    original = stray.read_bytes()
    with caplog.at_level(logging.WARNING), Storage.open(tmp_path, CONFIG) as storage:
        assert_prefix(all_records(storage), 500)
        assert storage.head("t", "p") == 499  # a file after a gap holding nothing is no hole
        (gap,) = storage.recovery_report.truncations
        assert gap.reason == "gap"
    assert not stray.exists()
    (kept,) = quarantine(tmp_path)
    assert kept.read_bytes() == original
    assert kept.name.startswith(stray.name + ".")
    assert any(stray.name in m and "set aside" in m for m in warnings(caplog))


def test_a_read_that_meets_corruption_quarantines_the_bad_record_and_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    build(tmp_path)
    segs = segments(tmp_path)
    first = segs[0]
    victim = 10
    data = bytearray(first.read_bytes())
    data[record_position(victim) + 20] ^= 0xFF  # inside the payload
    first.write_bytes(bytes(data))
    later = {p.name: p.read_bytes() for p in segs[1:]}
    with caplog.at_level(logging.WARNING), Storage.open(tmp_path, CONFIG) as storage:
        assert storage.recovery_report.clean
        assert_all_but(all_records(storage), {victim})
        (cut,) = storage.take_truncations()
        assert (cut.offset, cut.end_offset, cut.resumed) == (victim, victim + 1, victim + 1)
    (bad,) = quarantine(tmp_path)
    assert bad.name.startswith(f"{first.name}.from-{record_position(victim)}.")
    assert bad.read_bytes() == bytes(data[record_position(victim) : record_position(victim + 1)])
    for name, content in later.items():  # later segments untouched
        assert (first.parent / name).read_bytes() == content
    # the records after it, in the same file, moved to a segment of their own, byte for byte
    rest = first.parent / f"{victim + 1:020d}.log"
    assert rest.read_bytes()[24:] == bytes(data[record_position(victim + 1) :])
    assert first.read_bytes() == bytes(data[: record_position(victim)])
    (line,) = [m for m in warnings(caplog) if "read:" in m]
    assert "'t'/'p'" in line
    assert f"offsets {victim}..{victim} (1 records) dropped" in line
    assert f"intact records from {victim + 1} on kept" in line


def test_a_torn_tail_is_cut_and_warned_but_not_quarantined(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    build(tmp_path, 50)
    (seg,) = segments(tmp_path)
    size = seg.stat().st_size
    seg.write_bytes(seg.read_bytes()[: size - SIZE // 2])
    with caplog.at_level(logging.WARNING), Storage.open(tmp_path, CONFIG) as storage:
        assert storage.head("t", "p") == 48
        assert storage.recovery_report.quarantined == []
    assert not (tmp_path / QUARANTINE_DIR).exists()
    assert any("torn" in m and "offsets 49 and later" in m for m in warnings(caplog))


def test_the_quarantine_is_not_taken_for_a_topic(tmp_path: Path) -> None:
    build(tmp_path)
    stray = tmp_path / "t" / "p" / f"{10**9:020d}.log"
    stray.write_bytes(encode_segment_header(10**9))
    Storage.open(tmp_path, CONFIG).close()
    with Storage.open(tmp_path, CONFIG) as storage:
        assert storage.recovery_report.clean
        assert storage.recovery_report.skipped == []
        assert storage.topics() == ["t"]
