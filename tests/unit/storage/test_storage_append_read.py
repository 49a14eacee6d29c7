"""Appending and reading: contiguity rules, ranges, segments, sparse index, batching."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dafka.storage import (
    FsyncPolicy,
    GapAppendError,
    InvalidArgumentError,
    NonContiguousAppendError,
    OverlapAppendError,
    Storage,
    StorageClosedError,
    StorageConfig,
    StorageIOError,
    StorageLockedError,
)
from dafka.storage._format import RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE
from tests.unit.storage.storage_payloads import payload

SMALL = StorageConfig(
    segment_bytes=4096, index_interval_bytes=256, index_flush_entries=4, fsync=FsyncPolicy.os()
)


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[Storage]:
    with Storage.open(tmp_path / "data", SMALL) as s:
        yield s


def fill(storage: Storage, partition: str, count: int, batch: int = 37, topic: str = "t") -> None:
    offset = storage.next_offset(topic, partition) or 0
    while offset < count:
        n = min(batch, count - offset)
        last = storage.append(
            topic, partition, offset, [payload(partition, o) for o in range(offset, offset + n)]
        )
        assert last == offset + n - 1
        offset = last + 1


def expected(partition: str, start: int, stop: int) -> list[tuple[int, bytes]]:
    return [(o, payload(partition, o)) for o in range(start, stop)]


def test_append_then_read_everything(storage: Storage) -> None:
    fill(storage, "p", 1000)
    assert storage.read("t", "p", 0, 5000) == expected("p", 0, 1000)
    assert storage.head("t", "p") == 999
    assert storage.next_offset("t", "p") == 1000
    assert storage.heads("t") == {"p": 999}
    assert storage.topics() == ["t"]


@pytest.mark.parametrize(
    ("start", "count", "lo", "hi"),
    [
        (0, 1, 0, 1),
        (10, 0, 0, 0),
        (10, -3, 0, 0),
        (500, 100, 500, 600),
        (990, 100, 990, 1000),
        (1000, 10, 0, 0),
        (5000, 10, 0, 0),
        (123, 1, 123, 124),
        (0, 1000, 0, 1000),
    ],
)
def test_read_returns_exactly_the_records_held(
    storage: Storage, start: int, count: int, lo: int, hi: int
) -> None:
    fill(storage, "p", 1000)
    assert storage.read("t", "p", start, count) == expected("p", lo, hi)


def test_every_single_offset_is_found_through_the_sparse_index(storage: Storage) -> None:
    fill(storage, "p", 600)
    log = storage.log("t", "p")
    assert log is not None
    assert len(log.segments) > 3
    assert all(len(seg.index) > 2 for seg in log.segments[:-1])
    for offset in range(600):
        assert storage.read("t", "p", offset, 1) == expected("p", offset, offset + 1)


def test_segments_are_named_by_base_and_capped(storage: Storage, tmp_path: Path) -> None:
    fill(storage, "p", 800)
    log = storage.log("t", "p")
    assert log is not None
    names = sorted(p.name for p in log.directory.glob("*.log"))
    assert names == [f"{seg.base:020d}.log" for seg in log.segments]
    assert names[0] == "00000000000000000000.log"
    for seg in log.segments:
        assert seg.path.stat().st_size <= SMALL.segment_bytes
        assert seg.path.stat().st_size == seg.size
    for a, b in zip(log.segments, log.segments[1:], strict=False):
        assert a.next_offset == b.base


def test_a_record_larger_than_a_segment_gets_its_own(storage: Storage) -> None:
    storage.append("t", "p", 0, [b"a", b"x" * 10_000, b"b"])
    log = storage.log("t", "p")
    assert log is not None
    assert [seg.records for seg in log.segments] == [1, 1, 1]
    assert storage.read("t", "p", 0, 3) == [(0, b"a"), (1, b"x" * 10_000), (2, b"b")]


def test_gaps_and_overlaps_are_refused_and_write_nothing(storage: Storage) -> None:
    fill(storage, "p", 100)
    size = storage.log("t", "p").size_bytes  # type: ignore[union-attr]
    with pytest.raises(GapAppendError) as gap:
        storage.append("t", "p", 101, [b"x"])
    assert (gap.value.expected, gap.value.got) == (100, 101)
    with pytest.raises(OverlapAppendError) as dup:
        storage.append("t", "p", 99, [b"x", b"y"])
    assert dup.value.expected == 100
    assert isinstance(dup.value, NonContiguousAppendError)
    assert storage.log("t", "p").size_bytes == size  # type: ignore[union-attr]
    assert storage.head("t", "p") == 99
    assert storage.append("t", "p", 100, [b"z"]) == 100


def test_new_partitions_start_at_first_offset(tmp_path: Path) -> None:
    with Storage.open(tmp_path / "a", SMALL) as storage:
        with pytest.raises(GapAppendError) as err:
            storage.append("t", "late", 5, [b"x"])
        assert err.value.expected == 0
        assert storage.topics() == []  # nothing was created
        assert not any((tmp_path / "a").glob("t*"))
    anywhere = StorageConfig(fsync=FsyncPolicy.os(), first_offset=None)
    with Storage.open(tmp_path / "b", anywhere) as storage:
        assert storage.append("t", "late", 1_000_000, [b"x", b"y"]) == 1_000_001
        assert storage.read("t", "late", 0, 2_000_000) == [(1_000_000, b"x"), (1_000_001, b"y")]
        assert storage.start_offset("t", "late") == 1_000_000
    with Storage.open(tmp_path / "b", anywhere) as storage:
        assert storage.heads("t") == {"late": 1_000_001}
        with pytest.raises(OverlapAppendError):  # only an empty log may start anywhere
            storage.append("t", "late", 5, [b"x"])


def test_empty_batches_are_no_ops(storage: Storage) -> None:
    assert storage.append("t", "p", 0, []) == -1
    assert storage.topics() == []
    fill(storage, "p", 10)
    assert storage.append("t", "p", 10, []) == 9


def test_bad_arguments_get_typed_errors(storage: Storage) -> None:
    with pytest.raises(InvalidArgumentError):
        storage.append("t", "p", -1, [b"x"])
    with pytest.raises(InvalidArgumentError):
        storage.append("t", "p", 2**64, [b"x"])
    with pytest.raises(InvalidArgumentError):
        storage.read("t", "p", -1, 1)
    fill(storage, "p", 3)
    with pytest.raises(InvalidArgumentError):
        storage.append("t", "p", 3, [b"x" * (SMALL.max_record_bytes + 1)])
    with pytest.raises(InvalidArgumentError):
        storage.append("t", "p", 3, [b"ok", "text"])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError):
        storage.append("t", "p", 3, [b"ok", 7])  # type: ignore[list-item]
    assert storage.head("t", "p") == 2
    assert storage.append("t", "p", 3, [bytearray(b"ba"), memoryview(b"mv")]) == 4
    assert storage.read("t", "p", 3, 2) == [(3, b"ba"), (4, b"mv")]


def test_offsets_end_at_two_to_the_64(tmp_path: Path) -> None:
    config = StorageConfig(fsync=FsyncPolicy.os(), first_offset=None)
    with Storage.open(tmp_path / "d", config) as storage:
        top = 2**64 - 1
        assert storage.append("t", "p", top - 1, [b"a", b"b"]) == top
        with pytest.raises(InvalidArgumentError):
            storage.append("t", "p", 2**64, [b"c"])
        assert storage.read("t", "p", top - 5, 10) == [(top - 1, b"a"), (top, b"b")]


def test_a_batch_is_one_write(storage: Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    fill(storage, "p", 1)
    calls: list[int] = []
    real_pwrite = os.pwrite
    real_write = os.write

    def counting_pwrite(fd: int, data: bytes, position: int) -> int:
        calls.append(len(data))
        return real_pwrite(fd, data, position)

    def counting_write(fd: int, data: bytes) -> int:
        calls.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "pwrite", counting_pwrite)
    monkeypatch.setattr(os, "write", counting_write)
    storage.append("t", "p", 1, [b"x" * 10] * 20)
    assert calls == [20 * (RECORD_HEADER_SIZE + 10)]


def test_record_bytes_match_the_documented_format(storage: Storage) -> None:
    storage.append("t", "p", 0, [b"hello"])
    log = storage.log("t", "p")
    assert log is not None
    data = log.segments[0].path.read_bytes()
    assert data[:8] == b"DAFKALOG"
    rec = data[SEGMENT_HEADER_SIZE:]
    from crc32c import crc32c

    assert rec[:8] == (0).to_bytes(8, "big")
    assert rec[8:12] == (5).to_bytes(4, "big")
    assert rec[12:16] == crc32c(rec[16:21], crc32c(rec[:12])).to_bytes(4, "big")
    assert rec[16:] == b"hello"


def test_many_partitions_and_topics(storage: Storage) -> None:
    for topic in ("a", "b"):
        for part in ("p1", "p2", "p3"):
            fill(storage, part, 20, topic=topic)
    assert storage.topics() == ["a", "b"]
    assert storage.partitions("a") == ["p1", "p2", "p3"]
    assert storage.heads("b") == {"p1": 19, "p2": 19, "p3": 19}
    assert storage.heads("nope") == {}
    assert storage.head("a", "nope") is None
    assert storage.read("a", "nope", 0, 10) == []


def test_open_twice_is_refused_and_closed_storage_says_so(tmp_path: Path) -> None:
    first = Storage.open(tmp_path / "d", SMALL)
    with pytest.raises(StorageLockedError):
        Storage.open(tmp_path / "d", SMALL)
    first.close()
    first.close()  # idempotent
    with pytest.raises(StorageClosedError):
        first.append("t", "p", 0, [b"x"])
    with pytest.raises(StorageClosedError):
        first.read("t", "p", 0, 1)
    Storage.open(tmp_path / "d", SMALL).close()


def test_reopen_keeps_everything_and_continues(tmp_path: Path) -> None:
    with Storage.open(tmp_path / "d", SMALL) as storage:
        fill(storage, "p", 500)
        fill(storage, "q", 3)
    with Storage.open(tmp_path / "d", SMALL) as storage:
        assert storage.recovery_report.clean
        assert storage.recovery_report.records == 503
        assert storage.heads("t") == {"p": 499, "q": 2}
        fill(storage, "p", 700)
        assert storage.read("t", "p", 0, 1000) == expected("p", 0, 700)


def test_disk_trouble_is_a_storage_io_error(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(StorageIOError):
        Storage.open(not_a_dir, SMALL)
    with Storage.open(tmp_path / "d", SMALL) as storage:
        fill(storage, "p", 300)
        log = storage.log("t", "p")
        assert log is not None
        log.segments[0].path.unlink()  # a closed segment vanishes under the store
        with pytest.raises(StorageIOError):
            storage.read("t", "p", 0, 10)
        assert storage.read("t", "p", 299, 1) == expected("p", 299, 300)
