"""Storage.delete_through (a topic delete's tombstone): nothing at or below the cut is held,
read or appended again - across a reopen - and what follows the cut is kept."""

from __future__ import annotations

from pathlib import Path

from dafka.storage import FsyncPolicy, Storage, StorageConfig


def config() -> StorageConfig:
    return StorageConfig(fsync=FsyncPolicy.os(), segment_bytes=4096)


def values(n: int, first: int = 0) -> list[bytes]:
    return [b"r%05d" % i + b"x" * 100 for i in range(first, first + n)]


def test_a_cut_inside_the_log_keeps_what_follows_and_survives_a_reopen(tmp_path: Path) -> None:
    with Storage.open(tmp_path, config()) as storage:
        storage.append("t", "p", 0, values(200))
        segments = len(storage.log("t", "p").segments)  # type: ignore[union-attr]
        assert storage.delete_through("t", "p", 149)
        assert not storage.delete_through("t", "p", 100)  # an older cut: nothing to do
        assert len(storage.log("t", "p").segments) < segments  # type: ignore[union-attr]
        assert storage.read_contents("t", "p", 0, 1000) == (150, values(50, 150))
        assert [o for o, _ in storage.read("t", "p", 140, 20)] == list(range(150, 160))
        assert storage.start_offset("t", "p") == 150
        assert storage.heads("t") == {"p": 199}
    with Storage.open(tmp_path, config()) as storage:
        assert storage.read_contents("t", "p", 0, 1000) == (150, values(50, 150))
        assert storage.deleted() == {("t", "p"): 149}


def test_a_cut_at_the_head_empties_the_partition_and_later_records_follow_it(
    tmp_path: Path,
) -> None:
    with Storage.open(tmp_path, config()) as storage:
        storage.append("t", "p", 0, values(50))
        storage.append("t", "q", 0, values(5))
        storage.delete_through("t", "p", 49)
        storage.delete_through("t", "q", 99)  # cut beyond what this store holds
        assert storage.heads("t") == {}
        # emptied, the partitions start after their cuts (before: None, as for a partition
        # never held, so a FETCH from 0 got no LOG-START and retried for ~37 s)
        assert storage.start_offset("t", "p") == 50
        assert storage.start_offset("t", "q") == 100
        assert storage.start_offset("t", "never") is None
        assert storage.read_contents("t", "p", 0, 100) == (0, [])
        # a producer still writing: records at or below the cut are taken and dropped
        assert storage.append("t", "p", 40, values(15, 40)) == 54
        assert storage.read_contents("t", "p", 0, 100) == (50, values(5, 50))
        assert storage.append("t", "q", 7, values(3, 7)) == 99
        assert storage.heads("t") == {"p": 54}
    with Storage.open(tmp_path, config()) as storage:
        assert storage.heads("t") == {"p": 54}
        assert storage.append("t", "q", 100, values(1, 100)) == 100
