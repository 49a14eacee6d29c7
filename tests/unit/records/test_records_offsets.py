"""The commit records of consumer groups and the fold that reads a group's offsets (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dafka.records import (
    CommitRecord,
    CommittedOffset,
    CorruptCommitError,
    TxnRef,
    commit_group,
    commit_partition,
    decode_commit,
    encode_commit,
    fenced_decisions,
    fold_commits,
    next_version,
    undecided_logs,
)

A = ("orders", "w.0")
B = ("orders", "w.1")


def test_a_commit_record_round_trips() -> None:
    record = CommitRecord(
        "g", "member-1", {A: CommittedOffset(5, 2, 10, "meta"), B: CommittedOffset(0, 0, 11)}
    )
    assert decode_commit(encode_commit(record)) == record
    txn = CommitRecord(
        "g", "tid", {A: CommittedOffset(7, 0, 12)}, TxnRef("t~n.0", 4, 3), {B: CommittedOffset(1)}
    )
    assert decode_commit(encode_commit(txn)) == txn
    tenured = CommitRecord("g", "m", {A: CommittedOffset(5, 0, 10, "", 9)})
    assert b'["orders","w.0",5,0,10,"",9]' in encode_commit(tenured)
    assert decode_commit(encode_commit(tenured)) == tenured


def test_a_commit_without_a_tenure_keeps_the_earlier_form() -> None:
    untenured = CommitRecord("g", "m", {A: CommittedOffset(5, 0, 10)})
    content = encode_commit(untenured)
    assert b'["orders","w.0",5,0,10,""]' in content
    assert decode_commit(content).offsets[A].tenure == 0


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{}",
        b"[1]",
        b'{"type":"commit","v":2}',
        b'{"type":"epoch","v":1}',
        b'{"type":"commit","v":1,"group":"g","writer":"w","offsets":[["t","p",-1,0,0,""]]}',
        b'{"type":"commit","v":1,"group":"g","writer":"w","offsets":[["t","p"]]}',
        b'{"type":"commit","v":1,"group":"g","writer":"w","offsets":[["t","p",1,0,0,"",-1]]}',
        # a tenure no clock reaches (it would rank above every later owner's commits)
        b'{"type":"commit","v":1,"group":"g","writer":"w","offsets":'
        b'[["t","p",1,0,0,"",4611686018427387904]]}',
        b'{"type":"commit","v":1,"group":"g","writer":"w","offsets":[["t","p",1,0,0,"",1,2]]}',
        b'{"type":"commit","v":1,"group":"g","writer":"w","offsets":["t"]}',
        # a number JSON reads as a float no int holds, nesting past Python's recursion
        # limit: OverflowError, RecursionError out of every reader of the group's offsets
        b'{"type":"commit","v":1,"group":"g","writer":"w","offsets":[["t","p",1,0,0,"",Infinity]]}',
        b'{"type":"commit","v":1,"group":"g","writer":"w","offsets":[["t","p",1e400,0,0,""]]}',
        b"[" * 100_000,
        # a transaction's slot below 0 (asked of its log: every head is >= -1), a
        # negative transaction number, a log that is no partition
        b'{"type":"commit","v":1,"group":"g","writer":"w","offsets":[],'
        b'"txn":["t~.0",-1,0],"base":[]}',
        b'{"type":"commit","v":1,"group":"g","writer":"w","offsets":[],'
        b'"txn":["t~.0",3,-1],"base":[]}',
        b'{"type":"commit","v":1,"group":"g","writer":"w","offsets":[],"txn":["t~",3,0],"base":[]}',
    ],
)
def test_anything_else_is_a_corrupt_commit(content: bytes) -> None:
    with pytest.raises(CorruptCommitError):
        decode_commit(content)


def test_partition_names_carry_the_group() -> None:
    assert commit_group(commit_partition("my~group", "abc")) == "my~group"
    assert commit_group("plain.0") is None
    assert commit_group("g~n.1") is None


def test_the_highest_version_wins_whoever_wrote_it() -> None:
    old = CommitRecord("g", "m1", {A: CommittedOffset(100, 0, 5), B: CommittedOffset(3, 0, 9)})
    new = CommitRecord("g", "m2", {A: CommittedOffset(40, 0, 6)})  # a seek back counts
    assert fold_commits([old, new]) == {A: CommittedOffset(40, 0, 6), B: CommittedOffset(3, 0, 9)}
    assert fold_commits([new, old]) == fold_commits([old, new])


def test_a_later_tenure_wins_whatever_the_versions() -> None:
    # a paused owner's commit written after its successor's: a later version, an earlier
    # tenure (docs/groups.md, "Tenures")
    successor = CommitRecord("g", "m2", {A: CommittedOffset(12, 0, 500, "", 300)})
    zombie = CommitRecord("g", "m1", {A: CommittedOffset(7, 0, 900, "", 200)})
    assert fold_commits([successor, zombie]) == {A: CommittedOffset(12, 0, 500, "", 300)}
    assert fold_commits([zombie, successor]) == fold_commits([successor, zombie])
    within = CommitRecord("g", "m3", {A: CommittedOffset(3, 0, 600, "", 300)})
    assert fold_commits([successor, within])[A].offset == 3  # one tenure: the version


def test_a_transaction_commit_counts_only_once_its_intent_is_found() -> None:
    ref = TxnRef("tid~n.0", 3, 7)
    record = CommitRecord(
        "g", "tid", {A: CommittedOffset(50, 0, 20)}, ref, {A: CommittedOffset(10, 0, 19)}
    )
    assert fold_commits([record]) == {A: CommittedOffset(10, 0, 19)}
    assert fold_commits([record], lambda r: r == ref) == {A: CommittedOffset(50, 0, 20)}


def test_a_version_is_above_every_version_seen() -> None:
    assert next_version(1000, 5) == 1000
    assert next_version(1000, 5000) == 5001  # a clock behind another host's


offsets = st.builds(
    CommittedOffset,
    st.integers(0, 1000),
    st.integers(0, 5),
    st.integers(0, 50),
    st.just(""),
    st.integers(0, 3),
)
records = st.lists(
    st.builds(
        CommitRecord,
        st.just("g"),
        st.sampled_from(["m1", "m2", "m3"]),
        st.dictionaries(st.sampled_from([A, B]), offsets, max_size=2),
    ),
    max_size=6,
)


@given(records, st.randoms())
def test_the_fold_does_not_depend_on_the_order_it_reads_partitions(
    found: list[CommitRecord], rnd: object
) -> None:
    shuffled = list(found)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    folded = fold_commits(found)
    assert fold_commits(shuffled) == folded
    for key, chosen in folded.items():
        ranks = [
            (o.tenure, o.version, r.writer) for r in found for k, o in r.offsets.items() if k == key
        ]
        assert max(ranks)[:2] == (chosen.tenure, chosen.version)


def test_a_take_fences_the_logs_of_undecided_transactions_of_its_partitions() -> None:
    # A paused between its last ownership check and its INTENT: its record's transaction
    # (slot 9 of a~.0) is undecided; B's decided one and C's plain commit need no fence,
    # nor D's undecided transaction of another partition, nor the taker's own log.
    paused = TxnRef("a~.0", 9, 4)
    records = [
        CommitRecord("g", "a", {A: CommittedOffset(30, 0, 5)}, paused, {A: CommittedOffset(25)}),
        CommitRecord("g", "b", {A: CommittedOffset(20, 0, 4)}, TxnRef("b~.0", 3, 1)),
        CommitRecord("g", "c", {A: CommittedOffset(10, 0, 3)}),
        CommitRecord("g", "d", {B: CommittedOffset(7, 0, 2)}, TxnRef("d~.0", 5, 0)),
        CommitRecord("g", "own", {A: CommittedOffset(40, 0, 6)}, TxnRef("own~.0", 2, 0)),
    ]
    decided = {TxnRef("b~.0", 3, 1): True}
    spare = {"own~.0"}.__contains__
    assert undecided_logs(records, [A], decided.get, spare) == {"a~.0": [paused]}
    assert set(undecided_logs(records, [A, B], decided.get, spare)) == {"a~.0", "d~.0"}
    assert undecided_logs(records, [A], {**decided, paused: False}.get, spare) == {}
    assert undecided_logs(records, [("other", "x.0")], decided.get, spare) == {}


def test_a_fence_decides_the_undecided_transactions_of_its_log_for_good() -> None:
    # Fenced at head 8: an INTENT slot past it is never written by the older run (the next
    # instance writes its EPOCH there), one at or below it is stored: read it.
    late, stored = TxnRef("a~.0", 9, 4), TxnRef("a~.0", 8, 3)
    assert fenced_decisions([late, stored], 8) == ({late: False}, [stored])
    assert fenced_decisions([late], 9) == ({}, [late])
    # with the fence's decision the fold counts the base, for every reader from now on
    record = CommitRecord("g", "a", {A: CommittedOffset(30, 0, 5)}, late, {A: CommittedOffset(25)})
    aborted, _ = fenced_decisions([late], 8)
    assert fold_commits([record], lambda ref: aborted.get(ref, False))[A].offset == 25
