"""A full disk (a real 2 MB tmpfs): a failed append leaves the log as it was, and the same
append succeeds once there is room again - also across segment rolls."""

from __future__ import annotations

import errno
from pathlib import Path

from dafka.storage import FsyncPolicy, Storage, StorageConfig, StorageIOError
from tests.integration.storage.tmpfs import fill

CONFIG = StorageConfig(segment_bytes=64 * 1024, index_flush_entries=1, fsync=FsyncPolicy.batch())
BATCH = [bytes([i % 251]) * 1000 for i in range(20)]


def test_a_full_disk_fails_appends_cleanly_and_they_succeed_after(small_disk: Path) -> None:
    root = small_disk / "log"
    with Storage.open(root, CONFIG) as storage:
        next_offset = 0
        storage.append("t", "p", 0, BATCH)
        next_offset += len(BATCH)
        filler = fill(small_disk)
        failures = 0
        errnos: set[int | None] = set()
        for _ in range(40):  # every append fails, at any point of a segment or a roll
            try:
                storage.append("t", "p", next_offset, BATCH)
            except StorageIOError as exc:
                errnos.add(exc.errno)
                failures += 1
                written = storage.next_offset("t", "p")  # what really got written
                assert written is not None
                assert written >= next_offset
                next_offset = written
                continue
            next_offset += len(BATCH)
        assert failures > 0
        assert errnos == {errno.ENOSPC}
        held = storage.read("t", "p", 0, 10**6)
        assert [o for o, _ in held] == list(range(next_offset))
        filler.unlink()
        for _ in range(10):
            storage.append("t", "p", next_offset, BATCH)
            next_offset += len(BATCH)
        assert storage.durable_offset("t", "p") == next_offset - 1
        assert len(list((root / "t" / "p").glob("*.log"))) > 2  # rolled after the disk was full
    with Storage.open(root, CONFIG) as storage:
        assert storage.recovery_report.truncations == []
        held = storage.read("t", "p", 0, 10**6)
        assert [o for o, _ in held] == list(range(next_offset))
        assert all(len(p) == 1000 for _, p in held)


def test_a_new_partition_on_a_full_disk_can_be_created_later(small_disk: Path) -> None:
    root = small_disk / "log"
    with Storage.open(root, CONFIG) as storage:
        filler = fill(small_disk)
        failed = 0
        for i in range(5):  # a directory may still fit in the last free page
            try:
                storage.append("t", f"p{i}", 0, BATCH)
            except StorageIOError:
                failed += 1
        assert failed > 0
        filler.unlink()
        for i in range(5):
            if storage.next_offset("t", f"p{i}") != len(BATCH):
                storage.append("t", f"p{i}", 0, BATCH)
        assert all(storage.head("t", f"p{i}") == len(BATCH) - 1 for i in range(5))


def test_closing_and_reopening_on_a_full_disk_lose_nothing(small_disk: Path) -> None:
    root = small_disk / "log"
    config = StorageConfig(index_flush_entries=10_000, fsync=FsyncPolicy.batch())
    storage = Storage.open(root, config)
    storage.append("t", "p", 0, BATCH * 20)  # index entries pending in memory
    fill(small_disk)
    storage.close()  # the index cannot be written: closes anyway
    for index in root.glob("t/p/*.idx"):
        index.write_bytes(b"")  # and an index to rebuild at open, still on the full disk
    with Storage.open(root, config) as reopened:
        assert [o for o, _ in reopened.read("t", "p", 0, 10**6)] == list(range(400))
