"""Damage segment and index files at random byte positions (seeded), reopen, check invariants.

Invariants after any damage: a partition holds offsets ``0..head`` contiguously with the
exact payloads and nothing is served past a gap; damage to a ``.log`` keeps every record
before the damaged one (a flipped byte is always detected: CRC-32C catches every burst of up
to 32 bits); damage to an ``.idx`` loses nothing; a second open finds nothing to repair; and
the log accepts appends at its next offset again.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from dafka.storage import FsyncPolicy, Storage, StorageConfig
from dafka.storage._format import RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE

TOTAL = 600


def config(verify: bool) -> StorageConfig:
    return StorageConfig(
        segment_bytes=16 * 1024,
        index_interval_bytes=300,
        index_flush_entries=2,
        max_record_bytes=4096,
        fsync=FsyncPolicy.os(),
        verify_on_open=verify,
    )


def payload(offset: int) -> bytes:
    rng = random.Random(offset)
    return rng.randbytes(rng.randint(0, 120))


@pytest.fixture(scope="module")
def pristine(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, dict[Path, list[tuple[int, int, int]]]]:
    """A partition of several segments, and each segment's record layout (offset, start, end)."""
    root = tmp_path_factory.mktemp("pristine")
    with Storage.open(root, config(False)) as storage:
        for start in range(0, TOTAL, 40):
            storage.append("t", "p", start, [payload(o) for o in range(start, start + 40)])
    layout: dict[Path, list[tuple[int, int, int]]] = {}
    offset = 0
    for seg in sorted((root / "t" / "p").glob("*.log")):
        records = []
        pos = SEGMENT_HEADER_SIZE
        size = seg.stat().st_size
        while pos < size:
            end = pos + RECORD_HEADER_SIZE + len(payload(offset))
            records.append((offset, pos, end))
            pos, offset = end, offset + 1
        layout[seg.relative_to(root)] = records
    assert offset == TOTAL
    assert len(layout) >= 3
    return root, layout


def first_lost(records: list[tuple[int, int, int]], position: int, *, cut: bool) -> int:
    """The first offset a flip (or a cut) at ``position`` of a segment must cost."""
    for offset, start, end in records:
        if (cut and end > position) or (not cut and start <= position < end):
            return offset
        if position < start:
            return offset
    return TOTAL


def held(storage: Storage) -> int:
    records = storage.read("t", "p", 0, TOTAL + 100)
    assert records == [(o, payload(o)) for o in range(len(records))]
    head = storage.head("t", "p")
    assert head == (len(records) - 1 if records else None)
    assert storage.read("t", "p", len(records), 100) == []
    return len(records)


@pytest.mark.parametrize("verify", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_random_damage(
    tmp_path: Path,
    pristine: tuple[Path, dict[Path, list[tuple[int, int, int]]]],
    seed: int,
    verify: bool,
) -> None:
    source, layout = pristine
    rng = random.Random(seed * 2 + verify)
    files = sorted(p.relative_to(source) for p in (source / "t" / "p").iterdir())
    for trial in range(30):
        work = tmp_path / f"trial{trial}"
        shutil.copytree(source, work)
        rel = rng.choice(files)
        target = work / rel
        size = target.stat().st_size
        kind = rng.choice(["flip", "truncate", "garbage"])
        position = rng.randrange(max(size, 1))
        original = target.read_bytes()
        data = bytearray(original)
        if kind == "flip" and size:
            data[position] ^= rng.randrange(1, 256)
        elif kind == "garbage" and size:
            chunk = rng.randbytes(rng.randint(1, 64))
            data[position : position + len(chunk)] = chunk
            data = data[: max(size, position + len(chunk))]
        else:
            kind = "truncate"
            del data[position:]
        target.write_bytes(bytes(data))

        with Storage.open(work, config(verify)) as storage:
            kept = held(storage)
            if rel.suffix == ".idx":
                assert kept == TOTAL, (kind, rel, position)
            else:
                records = layout[rel]
                if kind != "truncate":  # the first byte that really changed
                    position = next(
                        (i for i, (a, b) in enumerate(zip(original, data, strict=False)) if a != b),
                        len(original),
                    )
                if position < SEGMENT_HEADER_SIZE:
                    must_keep = records[0][0]
                else:
                    must_keep = first_lost(records, position, cut=kind == "truncate")
                assert kept == must_keep, (kind, rel, position, kept, must_keep)
            for cut in storage.recovery_report.truncations + storage.take_truncations():
                assert cut.offset == kept or cut.reason == "gap"
            if kept < TOTAL:
                storage.append("t", "p", kept, [payload(o) for o in range(kept, TOTAL)])
        with Storage.open(work, config(True)) as storage:
            assert storage.recovery_report.truncations == []
            assert held(storage) == TOTAL
        shutil.rmtree(work)
