"""Retention per topic by size and age: whole closed segments from the front only."""

from __future__ import annotations

import os
import time
from pathlib import Path

from dafka.storage import FsyncPolicy, RetentionPolicy, Storage, StorageConfig


def fill(storage: Storage, topic: str, count: int) -> None:
    storage.append(topic, "p", 0, [b"%06d" % o + b"." * 94 for o in range(count)])


def test_size_retention_keeps_the_newest_segments(tmp_path: Path) -> None:
    config = StorageConfig(
        segment_bytes=2048, fsync=FsyncPolicy.os(), retention=RetentionPolicy(max_bytes=5000)
    )
    with Storage.open(tmp_path, config) as storage:
        fill(storage, "t", 200)
        log = storage.log("t", "p")
        assert log is not None
        assert log.size_bytes > 5000
        moved = storage.apply_retention(time.time())
        assert log.size_bytes <= 5000
        start = storage.start_offset("t", "p")
        assert moved == {("t", "p"): start}
        assert start is not None
        assert start > 0
        assert start == log.segments[0].base
        got = storage.read("t", "p", 0, 1000)
        assert [o for o, _ in got] == list(range(start, 200))
        assert storage.apply_retention(time.time()) == {}
    with Storage.open(tmp_path, config) as storage:
        assert storage.start_offset("t", "p") == start
        assert storage.head("t", "p") == 199


def test_the_active_segment_is_never_deleted(tmp_path: Path) -> None:
    config = StorageConfig(
        segment_bytes=2048,
        fsync=FsyncPolicy.os(),
        retention=RetentionPolicy(max_bytes=0, max_age_s=0),
    )
    with Storage.open(tmp_path, config) as storage:
        fill(storage, "t", 100)
        storage.apply_retention(time.time() + 3600)
        log = storage.log("t", "p")
        assert log is not None
        assert len(log.segments) == 1
        assert storage.head("t", "p") == 99
        assert storage.read("t", "p", 99, 1)[0][0] == 99


def test_age_retention_uses_the_last_write_time(tmp_path: Path) -> None:
    config = StorageConfig(
        segment_bytes=2048, fsync=FsyncPolicy.os(), retention=RetentionPolicy(max_age_s=60)
    )
    now = time.time()
    with Storage.open(tmp_path, config) as storage:
        fill(storage, "t", 100)
        log = storage.log("t", "p")
        assert log is not None
        old = log.segments[:2]
        for seg in old:
            os.utime(seg.path, (now - 120, now - 120))
        assert storage.apply_retention(now) == {("t", "p"): log.segments[0].base}
        assert all(not seg.path.exists() and not seg.index_path.exists() for seg in old)
        assert storage.apply_retention(now) == {}
        assert storage.apply_retention(now + 3600) != {}
        assert len(log.segments) == 1


def test_retention_is_per_topic(tmp_path: Path) -> None:
    config = StorageConfig(
        segment_bytes=2048,
        fsync=FsyncPolicy.os(),
        topic_retention={"short": RetentionPolicy(max_bytes=3000)},
    )
    with Storage.open(tmp_path, config) as storage:
        fill(storage, "short", 200)
        fill(storage, "long", 200)
        assert set(storage.apply_retention(time.time())) == {("short", "p")}
        assert storage.start_offset("long", "p") == 0
        assert (storage.start_offset("short", "p") or 0) > 0
