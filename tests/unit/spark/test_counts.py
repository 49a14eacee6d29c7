"""maxOffsetsPerTrigger's planner (issue 21): micro-batches capped in messages, from the
driver's per-RECORD message counts, RECORDs never split."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dafka.spark._counts import count_messages, plan_messages
from dafka.spark._plan import share

Key = tuple[str, str]


def counts_of(
    sizes: dict[Key, list[int]], start: int = 0
) -> dict[Key, tuple[list[int], list[int]]]:
    """(RECORD ends, messages before each) of partitions whose RECORDs hold ``sizes``."""
    out = {}
    for key, records in sizes.items():
        ends, cums = [start], [0]
        for n in records:
            ends.append(ends[-1] + 1)
            cums.append(cums[-1] + n)
        out[key] = (ends, cums)
    return out


A, B, C = ("t", "a.0"), ("t", "b.0"), ("t", "c.0")


def test_the_cap_counts_messages_not_records() -> None:
    counts = counts_of({A: [5] * 8})
    end = plan_messages({}, {A: 7}, counts, 10, share)
    assert end == {A: 2}  # two RECORDs of 5: 10 messages (maxRecordsPerTrigger=10: 8 RECORDs)


def test_a_partition_whose_records_exceed_its_share_still_moves() -> None:
    counts = counts_of({A: [5] * 8, B: [4] * 3})
    end = plan_messages({}, {A: 7, B: 2}, counts, 10, share)
    # fair shares of 5 each: A takes one RECORD (5), B one (4); 1 left fits nothing
    assert end == {A: 1, B: 1}
    assert sum(counts[k][1][end[k]] for k in end) <= 10


def test_a_record_larger_than_the_cap_is_taken_whole() -> None:
    counts = counts_of({A: [15, 1], B: [2]})
    end = plan_messages({}, {A: 1, B: 0}, counts, 10, share)
    assert end == {A: 1, B: 1}


def test_nothing_past_the_heads_or_the_counts() -> None:
    counts = counts_of({A: [1, 1, 1]})
    assert plan_messages({}, {A: 1}, counts, 100, share) == {A: 2}  # head 1: RECORDs 0, 1
    assert plan_messages({}, {A: 9}, counts, 100, share) == {A: 3}  # counted up to 3
    assert plan_messages({A: 3}, {A: 9}, counts, 100, share) == {A: 3}
    assert plan_messages({}, {B: 4}, counts, 100, share) == {}  # B not counted yet


def test_a_start_inside_the_counts() -> None:
    counts = counts_of({A: [3, 3, 3, 3]}, start=10)  # counting began at offset 10
    assert plan_messages({A: 12}, {A: 13}, counts, 3, share) == {A: 13}
    assert plan_messages({A: 5}, {A: 13}, counts, 3, share) == {A: 5}  # not counted there


@given(
    st.dictionaries(
        st.sampled_from([A, B, C]),
        st.lists(st.integers(0, 30), min_size=1, max_size=20),
        min_size=1,
    ),
    st.integers(1, 60),
)
def test_batches_hold_at_most_the_cap_and_always_move(
    sizes: dict[Key, list[int]], cap: int
) -> None:
    counts = counts_of(sizes)
    heads = {k: len(v) - 1 for k, v in sizes.items()}
    begin: dict[Key, int] = {}
    for _ in range(2 + sum(len(v) for v in sizes.values())):
        end = plan_messages(begin, heads, counts, cap, share)
        if end == begin:
            break
        taken = {k: counts[k][1][end[k]] - counts[k][1][begin.get(k, 0)] for k in end}
        records = {k: end[k] - begin.get(k, 0) for k in end}
        whole = [
            k
            for k in end
            if records[k] == 1 and taken[k] > cap  # one RECORD over the cap
        ]
        assert sum(taken.values()) <= cap or whole
        assert all(n >= 0 for n in records.values())
        begin = end
    assert begin == {k: len(v) for k, v in sizes.items()}  # everything planned, in the end


def test_min_offsets_counts_the_messages_counted_so_far() -> None:
    """minOffsetsPerTrigger's size of a batch: messages, up to what the counter has read."""
    counts = counts_of({A: [3, 3, 1], B: [2]}, start=4)
    assert count_messages({A: 4, B: 4}, {A: 7, B: 5}, counts) == 9
    assert count_messages({A: 5, B: 4}, {A: 6, B: 4}, counts) == 3  # B: nothing new
    # past the last counted RECORD (A's end 7): only what is counted
    assert count_messages({A: 4}, {A: 12}, counts) == 7
    # a partition whose start the counter has not reached, or never seen: nothing
    assert count_messages({A: 9, C: 0}, {A: 12, C: 3}, counts) == 0
