"""The bulk append path: a run encoded with C-level maps equals records encoded one by one.

``PartitionLog.append`` encodes a run that fits its segment with ``encode_run`` and finds
its index entries with ``SparseIndex.offer_run``; a run that crosses a segment boundary
goes record by record. Both must write the same bytes and keep the same index entries as
appending the records one at a time, whatever the run boundaries.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dafka.storage import FsyncPolicy, Storage, StorageConfig
from dafka.storage._format import (
    MAX_OFFSET,
    RECORD_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
    Payload,
    encode_record,
    encode_run,
)
from dafka.storage._index import SparseIndex

payload_lists = st.lists(st.binary(max_size=300), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(payloads=payload_lists, first=st.integers(min_value=0, max_value=MAX_OFFSET - 40))
def test_encode_run_equals_records_one_by_one(payloads: list[bytes], first: int) -> None:
    lengths = [len(p) for p in payloads]
    joined = b"".join(encode_run(first, payloads, lengths))
    assert joined == b"".join(encode_record(first + i, p) for i, p in enumerate(payloads))


def test_encode_run_takes_bytes_like_payloads() -> None:
    payloads: list[Payload] = [bytearray(b"ab"), memoryview(b"cde"), b""]
    parts = encode_run(7, payloads, [2, 3, 0])
    assert b"".join(parts) == b"".join(
        encode_record(7 + i, bytes(p)) for i, p in enumerate(payloads)
    )


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=RECORD_HEADER_SIZE, max_value=900), max_size=60),
    interval=st.integers(min_value=1, max_value=3000),
    skip=st.integers(min_value=0, max_value=2000),
)
def test_offer_run_equals_offers_one_by_one(sizes: list[int], interval: int, skip: int) -> None:
    starts = []
    position = SEGMENT_HEADER_SIZE + skip
    for size in sizes:
        starts.append(position)
        position += size
    one, run = SparseIndex(1000, interval), SparseIndex(1000, interval)
    for index in (one, run):
        index.offer(1000, SEGMENT_HEADER_SIZE + skip // 2)  # an entry before the run
    for i, start in enumerate(starts):
        one.offer(1001 + i, start)
    run.offer_run(1001, starts)
    assert (run.offsets, run.positions, run.last_position) == (
        one.offsets,
        one.positions,
        one.last_position,
    )


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.*")) if p.is_file()
    }


@settings(max_examples=40, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=200), min_size=1, max_size=80),
    cuts=st.lists(st.integers(min_value=1, max_value=30), max_size=10),
)
def test_runs_write_what_single_records_write(payloads: list[bytes], cuts: list[int]) -> None:
    """Same segment files and index files, whatever the runs (small segments: runs cross
    boundaries and take the record-by-record path, single records mostly the bulk one)."""
    config = StorageConfig(
        segment_bytes=1024,
        index_interval_bytes=100,
        index_flush_entries=3,
        fsync=FsyncPolicy.os(),
    )
    with tempfile.TemporaryDirectory() as tmp:
        one_root, runs_root = Path(tmp) / "one", Path(tmp) / "runs"
        with Storage.open(one_root, config) as one:
            for offset, content in enumerate(payloads):
                one.append("t", "p", offset, [content])
            one_read = one.read("t", "p", 0, len(payloads))
        with Storage.open(runs_root, config) as runs:
            offset = 0
            for cut in [*cuts, len(payloads)]:
                run = payloads[offset : offset + cut]
                if run:
                    assert runs.append("t", "p", offset, run) == offset + len(run) - 1
                offset += len(run)
            runs_read = runs.read("t", "p", 0, len(payloads))
        assert _files(runs_root) == _files(one_root)
        assert runs_read == one_read
        assert [content for _, content in runs_read] == payloads
