"""A read_committed batch read's task finds its own end: the last clean cut of its range.

The driver used to read every RECORD of a batch read first (its cut tracker) and plan each
range to the last clean cut; now the task reads to the heads and ends its rows at the last
clean cut it finds (``committed_to_cut``). The property: over random logs of one partition
(transactions of two producers, rollbacks, duplicates, ACKs inside runs, OUTSIDE and plain
messages) read in random polls (cut anywhere, inside a RECORD too), with holds that
overflow or not, the task's rows are exactly those the filter releases over the range up
to its last clean cut - the last boundary after a RECORD ending with a message that may
close spans (not a CONTINUE) where no span is open, found RECORD by RECORD - whatever the
polls. (The driver's plan looked for cuts only where its polls' last such RECORD ended:
a span open at the end could leave a batch read with no rows, though a transaction was
committed before it opened.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dafka.client import ConsumerSettings
from dafka.message import Flags
from dafka.records import (
    NO_UUID,
    UUID_SIZE,
    BatchSlice,
    CheckedBatch,
    CommittedFilter,
    Part,
    PlainRun,
    Record,
    RecordColumns,
)
from dafka.spark._committed import CommittedOffsets
from dafka.spark._read import RangePartition, _committed, committed_to_cut
from tests.unit.records.test_records_committed_runs import Log, T, as_columns, build, group

pytestmark = pytest.mark.unit

Row = tuple[int, int, bytes]
Spec = list[tuple[int, list[tuple[str, int, int, int, int]]]]


def _task(end: int) -> RangePartition:
    return RangePartition("127.0.0.1:1", T, "a", 0, end, 0.5, True, committed=True, find_cut=True)


def _polls(log: Log, records: list[Record], splits: list[int]) -> list[RecordColumns]:
    """``records`` as polls ending after each index of ``splits`` (inside a RECORD too)."""
    polls: list[RecordColumns] = []
    at = 0
    for stop in [*sorted(set(splits)), len(records)]:
        if at < stop <= len(records):
            polls.append(as_columns(log, records[at:stop]))
            at = stop
    return polls


def _rows(found: Iterable[RecordColumns]) -> list[Row]:
    return [row for c in found for row in zip(c.offsets, c.indexes, c.values, strict=True)]


def _closes(message: tuple[bytes, bytes | None]) -> bool:
    """Whether a message may close spans: no UUID, or flags other than CONTINUE_TXN."""
    uuid = message[1]
    return uuid is None or (uuid[8] << 8 | uuid[9]) & 0x3FF != int(Flags.CONTINUE_TXN)


def _last_cut(log: Log) -> int:
    """The last clean cut of partition ``a``, by definition: a decisions-only filter fed
    one whole RECORD at a time; the last boundary after a RECORD whose last message may
    close spans where nothing is pending (0: none)."""
    decisions = CommittedFilter(decisions_only=True)
    cut = 0
    for offset, messages in enumerate(log.parts.get("a", [])):
        decisions.feed_columns(as_columns(log, log.records("a", offset, offset)))
        if _closes(messages[-1]) and decisions.last_stable_position(T, "a") == offset + 1:
            cut = offset + 1
    return cut


class _ReadAgain:
    """The task's reads again, served from the log in one poll (as ``_read_again`` over a
    new bounded consumer): a range with ``find_cut`` RECORD by RECORD, else between cuts."""

    def __init__(
        self,
        log: Log,
        hold: int,
        anchor_every: int,
        shape: Callable[[RecordColumns], RecordColumns] = lambda c: c,
    ) -> None:
        self.log = log
        self.shape = shape
        self.hold = hold
        self.anchor_every = anchor_every
        self.ranges: list[tuple[int, int, tuple[tuple[str, int], ...], bool]] = []

    def __call__(self, task: RangePartition, settings: ConsumerSettings) -> Iterator[RecordColumns]:
        assert task.committed
        self.ranges.append((task.start, task.end, task.producers, task.find_cut))
        records = self.log.records("a", task.start, task.end - 1)
        polls = [self.shape(as_columns(self.log, records))] if records else []
        if task.find_cut:
            return committed_to_cut(
                polls, task, settings, self, self.hold, self.anchor_every, fine=True
            )
        return _committed(polls, task, settings)


def _read(
    log: Log, splits: list[int], hold: int, anchor_every: int = 64
) -> tuple[list[Row], list[Row], _ReadAgain]:
    """(the task's rows, the old plan's rows, the reads again) of partition ``a``."""
    records = log.records("a")
    polls = _polls(log, records, splits)
    end = len(log.parts.get("a", []))
    task = _task(end)
    again = _ReadAgain(log, hold, anchor_every)
    found = committed_to_cut(polls, task, task.settings(), again, hold, anchor_every)
    got = _rows(found)
    cut = _last_cut(log)
    old = _task(cut)
    below = [r for r in records if r.offset < cut]
    expected = _rows(_committed(_polls(log, below, splits), old, old.settings()))
    return got, expected, again


@settings(max_examples=300, deadline=None)
@example(  # a poll ends inside RECORD 2 after an OUTSIDE message: no cut there (the rest
    # of the RECORD opens producer 1's span), so neither that message nor T2 is a row
    spec=[
        [("run", 0, 3, 1, 0)],
        [("ack", 0, 1, 1, 0)],
        [("outside", 0, 1, 1, 0), ("run", 1, 1, 1, 0)],
        [("run", 0, 2, 1, 0)],
        [("ack", 0, 1, 1, 0)],
    ],
    splits=[5],
    hold=1 << 30,
    anchor_every=64,
)
@given(
    spec=st.lists(st.lists(group, min_size=1, max_size=2), max_size=25),
    splits=st.lists(st.integers(0, 80), max_size=6),
    hold=st.sampled_from([0, 1, 300, 1 << 30]),
    anchor_every=st.sampled_from([1, 3, 64]),
)
def test_a_task_yields_what_the_old_plan_gave_it(
    spec: list[list[tuple[str, int, int, int, int]]],
    splits: list[int],
    hold: int,
    anchor_every: int,
) -> None:
    log = build([(0, groups) for groups in spec])
    got, expected, _ = _read(log, splits, hold, anchor_every)
    assert got == expected


def test_a_transaction_committed_behind_one_still_open_is_not_a_row() -> None:
    """Producer 0 commits T1; producer 1 opens a span; producer 0 commits T2. At the end
    the only clean cut is after T1: T2 waits (held) and is never a row, as the driver's
    plan ended the range before producer 1's span."""
    spec: Spec = [
        (0, [("run", 0, 3, 1, 0)]),  # 0: T1
        (0, [("ack", 0, 1, 1, 0)]),  # 1
        (0, [("run", 1, 2, 1, 0)]),  # 2: producer 1's span, open at the end
        (0, [("run", 0, 2, 1, 0)]),  # 3: T2
        (0, [("ack", 0, 1, 1, 0)]),  # 4: T2 committed
    ]
    log = build(spec)
    got, expected, again = _read(log, [1, 3, 5, 7, 8], 1 << 30)
    assert [offset for offset, _, _ in got] == [0, 0, 0]
    assert got == expected
    assert again.ranges == []  # a poll ended after T1's ACK: that cut is the last
    # in one poll, the poll's steps find no cut (the poll's last closing RECORD is T2's
    # ACK): the stretch before producer 1's span is read again RECORD by RECORD
    got, expected, again = _read(log, [], 1 << 30)
    assert [offset for offset, _, _ in got] == [0, 0, 0]
    assert got == expected
    assert again.ranges == [(0, 2, (), True)]
    # producer 1 commits: every committed message is a row, in the order released
    log = build([*spec, (0, [("ack", 1, 1, 1, 0)])])
    got, expected, _ = _read(log, [1, 3, 5, 7, 8], 1 << 30)
    assert sorted(offset for offset, _, _ in got) == [0, 0, 0, 2, 2, 3, 3]
    assert got == expected


def test_past_its_hold_a_task_reads_the_range_between_its_last_cuts_again() -> None:
    """With a hold of 1 byte, T2 (waiting behind producer 1's span) overflows it: the task
    drops it, reads on for a cut (after producer 1's ACK) and reads the range up to that
    cut again - from the cut after T1 with the producer states there when it took them
    there, else from the start - keeping the rows from the cut after T1 on: the same rows."""
    spec: Spec = [
        (0, [("run", 0, 3, 1, 0)]),
        (0, [("ack", 0, 1, 1, 0)]),
        (0, [("run", 1, 2, 1, 0)]),
        (0, [("run", 0, 2, 1, 0)]),
        (0, [("ack", 0, 1, 1, 0)]),
        (0, [("ack", 1, 1, 1, 0)]),
        (0, [("run", 1, 1, 1, 0)]),  # 6: open at the end: the last cut is 6
    ]
    log = build(spec)
    for anchor_every, (start, end, acks) in [(1, (2, 6, [1004])), (64, (0, 6, []))]:
        got, expected, again = _read(log, list(range(1, 12)), 1, anchor_every)
        assert got == expected
        assert sorted(offset for offset, _, _ in got) == [0, 0, 0, 2, 2, 3, 3]
        assert len(again.ranges) == 1
        assert again.ranges[0][:2] == (start, end)
        assert not again.ranges[0][3]  # between cuts
        # producer 0's last ACK at offset 2 (T1's), or no state at the start
        assert [ack for _, ack in again.ranges[0][2]] == acks


def test_after_an_overflow_the_stretch_before_an_open_span_is_read_from_the_later_cut() -> None:
    """The hold overflows behind producer 1's span; a later cut is found (its ACK, then an
    OUTSIDE message); then producer 1 opens another span that stays open. The task reads
    up to the later cut again, then the stretch after it RECORD by RECORD from there, with
    the producer states it took at that cut: a re-sent copy of T1's first message there is
    a duplicate (its clock is at or below producer 0's last ACK), never a row."""
    spec: Spec = [
        (0, [("run", 0, 3, 1, 0)]),  # 0: T1
        (0, [("ack", 0, 1, 1, 0)]),  # 1: a cut at 2 (poll A ends here)
        (0, [("run", 1, 1, 1, 0)]),  # 2: producer 1's span
        (0, [("run", 0, 1, 1, 0)]),  # 3: T2 ...
        (0, [("ack", 0, 1, 1, 0)]),  # 4: ... committed behind it: the hold overflows
        (0, [("ack", 1, 1, 1, 0)]),  # 5: producer 1 commits
        (0, [("outside", 0, 1, 1, 0)]),  # 6: the later cut at 7 (poll C ends here)
        (0, [("dup", 0, 1, 1, 0), ("outside", 0, 1, 1, 0)]),  # 7: a cut at 8
        (0, [("run", 1, 1, 1, 0)]),  # 8: producer 1's next span, open at the end
        (0, [("outside", 0, 1, 1, 0)]),  # 9
    ]
    log = build(spec)
    got, expected, again = _read(log, [4, 7, 9], 1, anchor_every=1)
    assert got == expected
    rows = [(0, 0), (0, 1), (0, 2), (2, 0), (3, 0), (6, 0), (7, 1)]  # not the dup (7, 0)
    assert sorted((offset, index) for offset, index, _ in got) == rows
    assert [(start, end, fine) for start, end, _, fine in again.ranges] == [
        (2, 7, False),
        (7, 8, True),
    ]
    assert len(again.ranges[1][2]) == 2  # producer 0's and 1's last ACKs at the cut at 7


def _plain_runs(columns: RecordColumns) -> RecordColumns:
    """``columns`` with each RECORD of one message without a UUID as a plain RECORD (a
    ``PlainRun``, consecutive ones joined), as ``poll_columns`` hands out unbatched ones."""
    parts: list[Part] = []
    for part in columns.parts:
        assert isinstance(part, BatchSlice)
        batch = part.batch
        if batch.count != 1 or (batch.layout.uuids_at >= 0 and _uuid_of(batch) != NO_UUID):
            parts.append(part)
            continue
        value = RecordColumns([part]).values[0]
        last = parts[-1] if parts else None
        if isinstance(last, PlainRun) and last.first + last.size == batch.offset:
            parts[-1] = PlainRun(T, "a", last.first, [*last.contents, value])
        else:
            parts.append(PlainRun(T, "a", batch.offset, [value]))
    return RecordColumns(parts)


def _uuid_of(batch: CheckedBatch) -> bytes:
    at = batch.layout.uuids_at
    return batch.content[at : at + UUID_SIZE]


def _read_from(
    log: Log, start: int, splits: list[int], hold: int, anchor_every: int, plain: bool
) -> tuple[list[Row], list[Row]]:
    """(the task's rows, the old plan's rows) of partition ``a`` from ``start`` (a
    ``startingOffsets`` anywhere, a transaction's middle too: no producer states): the old
    plan's cut is the last one of a decisions-only filter restored at ``start``, fed one
    whole RECORD at a time; its task read ``[start, cut)``."""
    n = len(log.parts.get("a", []))
    records = log.records("a", start, n - 1) if start < n else []
    shape: Callable[[RecordColumns], RecordColumns] = _plain_runs if plain else (lambda c: c)

    def polls(recs: list[Record]) -> list[RecordColumns]:
        return [shape(p) for p in _polls(log, recs, splits)]

    task = replace(_task(max(n, start)), start=start)
    again = _ReadAgain(log, hold, anchor_every, shape)
    got = _rows(committed_to_cut(polls(records), task, task.settings(), again, hold, anchor_every))
    decisions = CommittedFilter(
        CommittedOffsets({(T, "a"): start}, {}).checkpoint(), decisions_only=True
    )
    cut = start
    for offset in range(start, n):
        decisions.feed_columns(as_columns(log, log.records("a", offset, offset)))
        if _closes(log.parts["a"][offset][-1]) and (
            decisions.last_stable_position(T, "a") == offset + 1
        ):
            cut = offset + 1
    old = replace(_task(cut), start=start)
    below = [r for r in records if r.offset < cut]
    expected = _rows(_committed(polls(below), old, old.settings()))
    return got, expected


_PLAIN = [("plain", 0, 1, 1, 0)]
"""A RECORD of one message without a UUID (a plain RECORD: a ``PlainRun`` with ``plain``)."""


@settings(max_examples=300, deadline=None)
@given(
    spec=st.lists(st.one_of(st.lists(group, min_size=1, max_size=2), st.just(_PLAIN)), max_size=25),
    at=st.floats(0, 1.1),
    splits=st.lists(st.integers(0, 80), max_size=6),
    hold=st.sampled_from([0, 1, 300, 1 << 30]),
    anchor_every=st.sampled_from([1, 3, 64]),
    plain=st.booleans(),
)
def test_a_task_from_any_start_yields_what_the_old_plan_gave_it(
    spec: list[list[tuple[str, int, int, int, int]]],
    at: float,
    splits: list[int],
    hold: int,
    anchor_every: int,
    plain: bool,
) -> None:
    """``startingOffsets`` anywhere (inside a transaction too: no producer states; an empty
    range; past the end) and plain RECORDs as ``PlainRun``s, as the bounded consumer hands
    them out (joined, one step each, a cut after the run): the task's rows are the old
    plan's."""
    log = build([(0, groups) for groups in spec])
    start = int(at * len(spec))
    got, expected = _read_from(log, start, splits, hold, anchor_every, plain)
    assert got == expected


@settings(max_examples=200, deadline=None)
@given(
    spec=st.lists(st.one_of(st.lists(group, min_size=1, max_size=2), st.just(_PLAIN)), max_size=25),
    at=st.floats(0, 1),
    attempts=st.lists(
        st.tuples(
            st.lists(st.integers(0, 80), max_size=6),
            st.sampled_from([0, 1, 300, 1 << 30]),
            st.sampled_from([1, 3, 64]),
        ),
        min_size=2,
        max_size=2,
    ),
    plain=st.booleans(),
)
def test_a_retried_task_yields_the_same_rows_in_the_same_order(
    spec: list[list[tuple[str, int, int, int, int]]],
    at: float,
    attempts: list[tuple[list[int], int, int]],
    plain: bool,
) -> None:
    """A task attempt Spark retries reads the same range in other polls (and may overflow
    its hold where the first did not): the same rows, in the same order."""
    log = build([(0, groups) for groups in spec])
    start = int(at * len(spec))
    (splits, hold, anchor), (splits2, hold2, anchor2) = attempts
    first, _ = _read_from(log, start, splits, hold, anchor, plain)
    again, _ = _read_from(log, start, splits2, hold2, anchor2, plain)
    assert first == again
