"""Storage.keep_runs: a partition's producer runs, and an older run's records set aside.

A newer producer run resumed at ``first``: the log ends before it, the records from there
on go to the quarantine (whole segments moved, the cut segment's tail copied), nothing is
deleted, and the runs survive a reopen (docs/guarantees.md, "A reused sequence: run
epochs").
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dafka.storage import FsyncPolicy, RetentionPolicy, Storage, StorageConfig
from dafka.storage._storage import runs_from

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


def test_runs_wholly_below_the_start_are_pruned_by_retention_and_deletes(tmp_path: Path) -> None:
    # one entry per producer restart: before, runs.json kept every run the partition ever
    # had, whatever retention removed (it grew for as long as the store lived)
    config = StorageConfig(
        segment_bytes=2048,
        index_interval_bytes=256,
        fsync=FsyncPolicy.os(),
        retention=RetentionPolicy(max_bytes=9000),
    )
    root = tmp_path / "data"
    runs = [(1, 0), (2, 10), (3, 30), (4, 100), (5, 150)]
    with Storage.open(root, config) as storage:
        for s in range(0, 200, 10):
            storage.append("t", "w", s, [payload("g", i) for i in range(s, s + 10)])
        storage.keep_runs("t", "w", runs)
        assert storage.runs("t", "w") == tuple(runs)
        moved = storage.apply_retention(time.time())
        start = moved[("t", "w")]
        assert 30 < start < 150, start
        kept = ((4, 100), (5, 150)) if start >= 100 else ((3, 30), (4, 100), (5, 150))
        assert storage.runs("t", "w") == kept  # the run that covers the start, and later
        storage.keep_runs("t", "w", runs)  # the store machine writes its whole list again
        assert storage.runs("t", "w") == kept
    with Storage.open(root, config) as storage:
        assert storage.runs("t", "w") == kept  # runs.json was rewritten
        assert storage.delete_through("t", "w", 160)
        assert storage.runs("t", "w") == ((5, 150),)
        assert storage.delete_through("t", "w", 500)  # everything: the producer may go on
        assert storage.runs("t", "w") == ((5, 150),)


@pytest.mark.parametrize(
    ("start", "kept"),
    [(0, [(1, 0), (2, 5)]), (4, [(1, 0), (2, 5)]), (5, [(2, 5)]), (9, [(2, 5)])],
)
def test_runs_from_keeps_the_run_that_covers_the_start_and_every_later_one(
    start: int, kept: list[tuple[int, int]]
) -> None:
    assert runs_from(((1, 0), (2, 5)), start) == tuple(kept)
    assert runs_from(((3, 7),), 2) == ((3, 7),)  # a run above the start stays
    assert runs_from(((1, 0), (2, 0)), 0) == ((1, 0), (2, 0))  # none began below it
    assert runs_from((), 5) == ()
