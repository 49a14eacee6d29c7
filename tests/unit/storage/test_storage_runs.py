"""Storage.keep_runs: a partition's producer runs, and an older run's records set aside.

A newer producer run resumed at ``first``: the log ends before it, the records from there
on go to the quarantine (whole segments moved, the cut segment's tail copied), nothing is
deleted, and the runs survive a reopen (docs/guarantees.md, "A reused sequence: run
epochs").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dafka.storage import FsyncPolicy, Storage, StorageConfig

SMALL = StorageConfig(segment_bytes=4096, index_interval_bytes=256, index_flush_entries=4)


def payload(run: str, sequence: int) -> bytes:
    return f"{run}:{sequence}:".encode() + b"." * 90


@pytest.mark.parametrize("fsync", [FsyncPolicy.batch(), FsyncPolicy.os()])
@pytest.mark.parametrize("first", [0, 1, 17, 60, 61, 199])
def test_an_older_runs_tail_goes_to_the_quarantine_and_the_log_ends_before_it(
    tmp_path: Path, first: int, fsync: FsyncPolicy
) -> None:
    config = StorageConfig(
        segment_bytes=SMALL.segment_bytes,
        index_interval_bytes=SMALL.index_interval_bytes,
        index_flush_entries=SMALL.index_flush_entries,
        fsync=fsync,
    )
    root = tmp_path / "data"
    with Storage.open(root, config) as storage:
        for s in range(0, 200, 10):
            storage.append("t", "w", s, [payload("g1", i) for i in range(s, s + 10)])
        assert len(storage.log("t", "w").segments) > 3  # type: ignore[union-attr]
        moved = storage.keep_runs("t", "w", [(1, 0), (2, first)], first)
        assert moved, "nothing was set aside"
        assert all(path.exists() for path in moved)
        held = storage.read("t", "w", 0, 1000)
        assert held == [(s, payload("g1", s)) for s in range(first)]
        assert storage.head("t", "w") == (first - 1 if first else None)
        storage.append("t", "w", first, [payload("g2", first)])
        assert storage.read("t", "w", first, 5) == [(first, payload("g2", first))]
    set_aside = b"".join(path.read_bytes() for path in moved if path.suffix != ".idx")
    for s in range(first, 200):
        assert payload("g1", s) in set_aside, f"record {s} of the older run was lost"
    with Storage.open(root, config) as storage:
        assert storage.runs("t", "w") == ((1, 0), (2, first))
        assert storage.read("t", "w", 0, 1000)[-1] == (first, payload("g2", first))


def test_runs_without_a_cut_are_kept_and_nothing_moves(tmp_path: Path) -> None:
    with Storage.open(tmp_path / "data", SMALL) as storage:
        storage.append("t", "w", 0, [payload("g1", 0)])
        assert storage.keep_runs("t", "w", [(5, 1)]) == []
        assert storage.keep_runs("t", "w", [(5, 1), (6, 9)], 9) == []  # nothing held there
        assert storage.read("t", "w", 0, 10) == [(0, payload("g1", 0))]
        assert storage.runs("t", "w") == ((5, 1), (6, 9))
        assert storage.runs("t", "other") == ()
