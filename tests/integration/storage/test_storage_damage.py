"""Damage segment and index files at random byte positions (seeded), reopen, check invariants.

Invariants after any damage: a partition holds exactly the records whose bytes were not
touched, with their exact payloads, and never one that is not there: damage to a ``.log``
costs exactly the records it touched (a flipped byte is always detected: CRC-32C catches
every burst of up to 32 bits; the intact records after it are kept, issue 18), a cut file
costs the records it cut, a damaged segment header costs nothing, damage to an ``.idx``
loses nothing; the lost records are holes (or, at the end, a shorter log) that the log
accepts again (``fill``, ``append``), after which a full check finds nothing to repair.
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


def lost_by(records: list[tuple[int, int, int]], first: int, last: int) -> set[int]:
    """The offsets whose bytes ``[start, end)`` meet the changed bytes ``[first, last]``."""
    return {offset for offset, start, end in records if start <= last and end > first}


def held(storage: Storage, lost: set[int]) -> None:
    records = storage.read("t", "p", 0, TOTAL + 100)
    assert records == [(o, payload(o)) for o in range(TOTAL) if o not in lost], sorted(lost)
    kept = {o for o, _ in records}
    for first, end in storage.holes("t", "p"):
        assert not kept.intersection(range(first, end))
    assert storage.read("t", "p", TOTAL, 100) == []


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

        lost: set[int] = set()
        if rel.suffix == ".log":
            records = layout[rel]
            if kind == "truncate":
                # a cut header empties the segment; else the records it cut short go
                lost = lost_by(records, 0 if position < SEGMENT_HEADER_SIZE else position, size)
            else:
                changed = [
                    i for i, (a, b) in enumerate(zip(original, data, strict=False)) if a != b
                ]
                if changed:
                    lost = lost_by(records, changed[0], changed[-1])
        with Storage.open(work, config(verify)) as storage:
            held(storage, lost)
            found = storage.recovery_report.truncations + storage.take_truncations()
            for cut in found:
                assert cut.end_offset is None or not set(range(cut.offset, cut.end_offset)) - lost
            for first, end in storage.holes("t", "p"):
                storage.fill("t", "p", first, [payload(o) for o in range(first, end)])
            nxt = storage.next_offset("t", "p")
            assert nxt is not None
            if nxt < TOTAL:
                storage.append("t", "p", nxt, [payload(o) for o in range(nxt, TOTAL)])
        with Storage.open(work, config(True)) as storage:
            assert storage.recovery_report.truncations == []
            held(storage, set())
        shutil.rmtree(work)
