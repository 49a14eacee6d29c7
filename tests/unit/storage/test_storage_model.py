"""Hypothesis: the storage engine against a model (lists in memory), across reopens."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from dafka.storage import (
    FsyncPolicy,
    GapAppendError,
    OverlapAppendError,
    RetentionPolicy,
    Storage,
    StorageConfig,
)

PARTITIONS = st.sampled_from(["a", "b", "../c"])
PAYLOADS = st.lists(st.binary(max_size=300), max_size=12)


class StorageModel(RuleBasedStateMachine):
    """The model holds, per partition, its start offset and payloads from there on."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="dafka-storage-model-"))
        self.config = StorageConfig(
            segment_bytes=1024,
            index_interval_bytes=100,
            index_flush_entries=3,
            fsync=FsyncPolicy.records(5),
            first_offset=None,
            retention=RetentionPolicy(max_bytes=4000),
        )
        self.storage = Storage.open(self.dir, self.config)
        self.model: dict[str, tuple[int, list[bytes]]] = {}

    def teardown(self) -> None:
        self.storage.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def next_offset(self, part: str) -> int:
        start, records = self.model[part]
        return start + len(records)

    @rule(part=PARTITIONS, payloads=PAYLOADS, start=st.integers(0, 1000))
    def append(self, part: str, payloads: list[bytes], start: int) -> None:
        if part not in self.model or not self.model[part][1]:
            if not payloads:
                return
            if part in self.model:
                start = self.next_offset(part) if start % 2 else start
            self.model[part] = (start, [])
            first = start
        else:
            first = self.next_offset(part)
        last = self.storage.append("t", part, first, payloads)
        assert last == first + len(payloads) - 1
        self.model[part][1].extend(payloads)

    @precondition(lambda self: any(records for _, records in self.model.values()))
    @rule(part=PARTITIONS, shift=st.integers(-5, 5).filter(lambda s: s != 0))
    def non_contiguous_append_is_refused(self, part: str, shift: int) -> None:
        if part not in self.model or not self.model[part][1]:
            return
        expected = self.next_offset(part)
        if expected + shift < 0:
            return
        error = GapAppendError if shift > 0 else OverlapAppendError
        with pytest.raises(error):
            self.storage.append("t", part, expected + shift, [b"nope"])

    @rule(part=PARTITIONS, at=st.integers(0, 1200), count=st.integers(-1, 60))
    def read(self, part: str, at: int, count: int) -> None:
        got = self.storage.read("t", part, at, count)
        start, records = self.model.get(part, (0, []))
        lo, hi = max(at, start), min(at + count, start + len(records))
        assert got == [(o, records[o - start]) for o in range(lo, hi)]
        held, contents = self.storage.read_contents("t", part, at, count)
        assert contents == [content for _, content in got]
        if got:
            assert held == got[0][0]

    @rule()
    def reopen(self) -> None:
        self.storage.close()
        self.storage = Storage.open(self.dir, self.config)
        assert self.storage.recovery_report.clean

    @rule()
    def retention(self) -> None:
        moved = self.storage.apply_retention(0.0)
        for (_, part), new_start in moved.items():
            start, records = self.model[part]
            self.model[part] = (new_start, records[new_start - start :])

    @rule()
    def flush(self) -> None:
        self.storage.flush()
        for part in self.model:
            assert self.storage.durable_offset("t", part) == self.storage.head("t", part)

    @invariant()
    def heads_match(self) -> None:
        expected = {p: s + len(r) - 1 for p, (s, r) in self.model.items() if r}
        assert self.storage.heads("t") == expected
        for part, (start, records) in self.model.items():
            durable = self.storage.durable_offset("t", part)
            if records:
                assert durable is None or start - 1 <= durable <= start + len(records) - 1
                assert self.storage.start_offset("t", part) == start


TestStorageModel = StorageModel.TestCase
TestStorageModel.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
