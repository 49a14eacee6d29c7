"""read_committed planning (pure parts): offsets, cut choice, candidate cut points."""

from __future__ import annotations

import pytest

from dafka.errors import ConfigError
from dafka.message import Flags, build_uuid
from dafka.records import (
    NO_UUID,
    BatchSlice,
    CheckedBatch,
    Part,
    PlainRun,
    Record,
    RecordColumns,
    check_batch,
    encode_batch,
)
from dafka.spark._committed import (
    CommittedOffsets,
    Cut,
    _closing_ends,
    _cut_points,
    _last_closing_record_end,
    _pieces,
    plan_end,
)
from dafka.spark._plan import share

A = ("t", "a")
B = ("t", "b")
PID = "0102030405ff"


def _cuts(*positions: int) -> list[Cut]:
    return [Cut(p, (("0102030405ff", p * 10),)) for p in positions]


def test_offsets_round_trip_and_refuse_a_read_uncommitted_checkpoint() -> None:
    offsets = CommittedOffsets({A: 3, B: 0}, {A: (("0102030405ff", 7),)})
    doc = offsets.to_json()
    assert doc == {
        "offsets": {"t": {"a": 3, "b": 0}},
        "producers": {"t": {"a": [["0102030405ff", 7]]}},
    }
    assert CommittedOffsets.from_json(doc) == CommittedOffsets(
        {A: 3, B: 0}, {A: (("0102030405ff", 7),)}
    )
    with pytest.raises(ConfigError, match="read_uncommitted"):
        CommittedOffsets.from_json({"t": {"a": 3}})


def test_the_end_is_the_latest_cut_and_carries_its_producer_states() -> None:
    start = CommittedOffsets({A: 2}, {A: (("0102030405ff", 20),)})
    end = plan_end(start, {A: _cuts(1, 2, 5, 9), B: _cuts(4)}, None, None, share)
    assert end.positions == {A: 9, B: 4}  # B is new: read from 0
    assert end.producers[A] == (("0102030405ff", 90),)
    # nothing beyond the start: the partition stays with its states
    same = plan_end(start, {A: _cuts(1, 2)}, None, None, share)
    assert same == start


def test_a_cap_chooses_cuts_within_the_share_but_never_splits_a_span() -> None:
    start = CommittedOffsets({A: 0, B: 0}, {})
    cuts = {A: _cuts(3, 4, 8), B: _cuts(10)}
    end = plan_end(start, cuts, None, 4, share)
    # shares of 4: 2 each; A has no cut at or below 2: its first cut (3) rather than none;
    # B's first cut is 10: the whole span, beyond the cap
    assert end.positions == {A: 3, B: 10}
    end = plan_end(start, cuts, None, 16, share)
    assert end.positions == {A: 8, B: 10}


def test_a_ceiling_keeps_cuts_below_it_and_drops_unknown_partitions() -> None:
    start = CommittedOffsets({}, {})
    end = plan_end(start, {A: _cuts(3, 6), B: _cuts(2)}, {A: 5}, None, share)
    assert end.positions == {A: 3}


def test_offsets_as_a_read_committed_consumer_checkpoint() -> None:
    cp = CommittedOffsets({A: 5}, {A: (("0102030405ff", 7),)}).checkpoint()
    assert cp == {
        "version": 1,
        "offsets": [["t", "a", 5 << 32]],
        "producers": [["t", "a", "0102030405ff", 7, -1]],
    }


def _rec(offset: int, index: int, flags: Flags | None) -> Record:
    uuid = None if flags is None else build_uuid(b"\x01abcde", 5, flags).bytes
    return Record("t", "a", offset, index, None, b"", (), None, uuid)


def test_candidate_cut_is_after_the_last_record_ending_with_a_closing_message() -> None:
    cont, ack = Flags.CONTINUE_TXN, Flags.ACK_TXN
    recs = [_rec(0, 0, cont), _rec(0, 1, ack), _rec(1, 0, cont), _rec(2, 0, None)]
    recs.append(_rec(3, 0, cont))
    assert _last_closing_record_end(recs) == 4  # after RECORD 2 (a plain message)
    # an ACK followed by CONTINUEs in the same RECORD: that RECORD ends inside a span
    recs = [_rec(0, 0, ack), _rec(0, 1, cont)]
    assert _last_closing_record_end(recs) == 0
    assert _last_closing_record_end([_rec(0, 0, cont), _rec(1, 0, Flags.OUTSIDE_TXN)]) == 2
    # every closing RECORD end, at least ``every`` RECORDs apart
    recs = [_rec(0, 0, ack), _rec(1, 0, None), _rec(2, 0, cont), _rec(3, 0, ack), _rec(4, 0, ack)]
    assert _closing_ends(recs, 1) == [1, 2, 4, 5]
    assert _closing_ends(recs, 2) == [1, 4]
    assert _closing_ends(recs, None) == [5]


def test_the_driver_cuts_columns_where_it_cuts_their_records() -> None:
    # The driver reads polls as columns (a piece per batched RECORD's slice, per run of
    # plain RECORDs): the candidate cuts are those of the same messages as Records.
    cont, ack, out = Flags.CONTINUE_TXN, Flags.ACK_TXN, Flags.OUTSIDE_TXN
    shapes: list[list[Flags | None] | int] = [
        [cont, ack],  # RECORD 0: ends with an ACK
        [ack, cont],  # 1: ends inside a span
        3,  # 2-4: plain RECORDs
        [cont],  # 5
        [None, out],  # 6: a message without UUID, then an OUTSIDE one
        [None],  # 7
    ]
    parts: list[Part] = []
    offset = 0
    for shape in shapes:
        if isinstance(shape, int):
            parts.append(PlainRun("t", "a", offset, [b"p"] * shape))
            offset += shape
            continue
        uuids = [NO_UUID if f is None else build_uuid(b"\x01abcde", 5, f).bytes for f in shape]
        content = encode_batch([b"v"] * len(shape), uuids=uuids)
        layout, _ = check_batch(content)
        batch = CheckedBatch("t", "a", offset, content, layout, None)
        parts.append(BatchSlice(batch, 0, len(shape)))
        offset += 1
    records = RecordColumns(parts).records()
    for every in (None, 1, 2, 3):
        pieces = [piece for part in parts for _, (_, piece) in _pieces(part, every)]
        by_pieces = [pieces[i - 1].last + 1 for i in _cut_points(pieces, every)]
        by_records = [records[i - 1].offset + 1 for i in _closing_ends(records, every)]
        assert by_pieces == by_records, every
    assert [records[i - 1].offset + 1 for i in _closing_ends(records, 1)] == [1, 3, 4, 5, 7, 8]
