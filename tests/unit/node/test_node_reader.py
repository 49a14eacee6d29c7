"""The shared in-order reader (``dafka.node._reader``): take, keep ahead, drop, runs.

The consumer and the store's writer both take records through one ``PartitionReader``;
these tests pin its rule on a cursor and a real ``FetchScheduler``, and check that taking a
run whole ends in the same state as feeding the same records one by one.
"""

from __future__ import annotations

import random

import pytest

from dafka.node import FetchPolicy
from dafka.node._catchup import Cursor, FetchScheduler
from dafka.node._reader import PartitionReader
from dafka.node.actions import Action, Send
from dafka.protocol import Fetch

P = "A" * 32


def reader(window: int = 4) -> tuple[PartitionReader, FetchScheduler]:
    fetcher = FetchScheduler("R" * 32, FetchPolicy(window=window))
    return PartitionReader(fetcher), fetcher


def fetches(out: list[Action]) -> list[tuple[int, int]]:
    return [
        (a.message.sequence, a.message.count)
        for a in out
        if isinstance(a, Send) and isinstance(a.message, Fetch)
    ]


def test_the_next_record_is_taken_into_one_pending_run() -> None:
    r, _ = reader()
    cursor = Cursor("t", P, -1)
    out: list[Action] = []
    r.offer(cursor, 0, b"a", False, 0.0, out)
    r.offer(cursor, 1, b"b", False, 0.0, out)
    assert (cursor.last, cursor.pending_first, cursor.pending) == (1, 0, [b"a", b"b"])
    assert r.dirty == [cursor]  # listed once, for its first pending record
    assert r.take_dirty() == [cursor]
    assert r.dirty == []
    assert out == []


def test_a_duplicate_is_dropped_and_counted() -> None:
    r, _ = reader()
    cursor = Cursor("t", P, 4)
    out: list[Action] = []
    r.offer(cursor, 4, b"x", False, 0.0, out)
    r.offer(cursor, 2, b"x", True, 0.0, out)
    assert r.duplicates == 2
    assert (cursor.last, cursor.pending, r.dirty, out) == (4, [], [], [])


def test_a_record_ahead_is_kept_and_the_gap_fetched_then_taken_when_filled() -> None:
    r, fetcher = reader(window=10)
    cursor = Cursor("t", P, -1)
    out: list[Action] = []
    r.offer(cursor, 2, b"c", False, 0.0, out)  # 0 and 1 were lost
    assert r.arrived_ahead == 1
    assert cursor.fetching
    assert fetches(out) == [(0, 3)]
    assert cursor.pending == []
    assert cursor.ahead == {2: b"c"}
    # Records are kept ahead: a run is fed one by one (so that they are taken after it).
    assert r.take_run(cursor, 0, [b"a"], 0.1, out, while_fetching=True) is False
    r.offer(cursor, 0, b"a", True, 0.1, out)
    assert (cursor.last, cursor.pending) == (0, [b"a"])
    r.offer(cursor, 1, b"b", True, 0.2, out)  # fills the gap: 2 follows from the kept ones
    assert (cursor.last, cursor.pending, cursor.ahead) == (2, [b"a", b"b", b"c"], {})
    assert (cursor.fetching, fetcher.in_flight()) == (False, 0)  # caught up


def test_progress_past_a_window_asks_for_the_next_one() -> None:
    r, _ = reader(window=2)
    cursor = Cursor("t", P, -1)
    out: list[Action] = []
    r.offer(cursor, 5, b"f", False, 0.0, out)  # beyond one window: not kept
    assert cursor.ahead == {}
    assert fetches(out) == [(0, 2)]
    assert r.take_run(cursor, 0, [b"a", b"b"], 0.1, out, while_fetching=True) is True
    assert fetches(out) == [(0, 2), (2, 2)]
    r.offer(cursor, 2, b"c", True, 0.2, out)
    r.offer(cursor, 3, b"d", True, 0.2, out)
    assert fetches(out) == [(0, 2), (2, 2), (4, 2)]


def test_a_run_is_taken_whole_only_when_it_continues_the_partition() -> None:
    r, _ = reader()
    cursor = Cursor("t", P, 1)
    out: list[Action] = []
    assert r.take_run(None, 2, [b"c"], 0.0, out, while_fetching=False) is False
    assert r.take_run(cursor, 3, [b"d"], 0.0, out, while_fetching=False) is False  # a gap
    assert r.take_run(cursor, 1, [b"b"], 0.0, out, while_fetching=False) is False  # behind
    assert r.take_run(cursor, 2, [], 0.0, out, while_fetching=False) is False
    cursor.limit = 3
    assert r.take_run(cursor, 2, [b"c", b"d", b"e"], 0.0, out, while_fetching=False) is False
    assert r.take_run(cursor, 2, [b"c", b"d"], 0.0, out, while_fetching=False) is True
    assert (cursor.last, cursor.pending_first, cursor.pending) == (3, 2, [b"c", b"d"])
    assert r.dirty == [cursor]


def test_a_live_run_is_not_taken_whole_while_fetching_a_reply_run_is() -> None:
    r, _ = reader(window=100)
    cursor = Cursor("t", P, -1)
    out: list[Action] = []
    r.offer(cursor, 9, b"j", False, 0.0, out)
    cursor.ahead.clear()  # as if the kept record were beyond the window
    assert cursor.fetching
    assert r.take_run(cursor, 0, [b"a", b"b"], 0.0, out, while_fetching=False) is False
    assert r.take_run(cursor, 0, [b"a", b"b"], 0.0, out, while_fetching=True) is True
    assert cursor.last == 1
    assert cursor.fetching


@pytest.mark.parametrize("seed", range(20))
def test_a_run_taken_whole_ends_where_one_by_one_ends(seed: int) -> None:
    rng = random.Random(seed)
    start = rng.randrange(-1, 5)
    first = start + 1
    contents = [b"%d" % i for i in range(rng.randrange(1, 8))]
    limit = first + rng.randrange(0, 10)
    whole_reader, _ = reader()
    single_reader, _ = reader()
    whole, single = Cursor("t", P, start), Cursor("t", P, start)
    whole.limit = single.limit = limit
    out_whole: list[Action] = []
    out_single: list[Action] = []
    if not whole_reader.take_run(whole, first, contents, 0.0, out_whole, while_fetching=False):
        assert first + len(contents) - 1 > limit
        return
    for offset, content in enumerate(contents):
        single_reader.offer(single, first + offset, content, False, 0.0, out_single)
    assert (whole.last, whole.pending_first, whole.pending) == (
        single.last,
        single.pending_first,
        single.pending,
    )
    assert whole_reader.dirty == [whole]
    assert single_reader.dirty == [single]
    assert out_whole == out_single == []


@pytest.mark.parametrize("seed", range(30))
def test_a_fetch_reply_starting_behind_ends_where_one_by_one_ends(seed: int) -> None:
    """A FETCH reply whose first records the cursor already has (a replier working through an
    earlier FETCH): its duplicates are dropped at once and hold the retry off, the rest is
    taken whole - the same end state, deadline included, as one record at a time."""
    rng = random.Random(seed)
    start = rng.randrange(3, 12)
    first = rng.randrange(0, start + 1)  # at or behind start: some duplicates
    contents = [b"%d" % i for i in range(rng.randrange(1, 10))]
    head = start + rng.randrange(1, 12)
    retried = rng.random() < 0.5
    window = rng.randrange(4, 12)
    limit = start + rng.randrange(0, 12)
    states = []
    for whole in (True, False):
        r, fetcher = reader(window=window)
        cursor = Cursor("t", P, start)
        cursor.limit = limit
        out: list[Action] = []
        fetcher.gap(cursor, head, 0.0, out)
        if retried:  # a retry doubled the wait: duplicates hold the retry off by more
            fetcher.on_timer(cursor.deadline, out)
        if not whole or not r.take_run(cursor, first, contents, 2.0, out, while_fetching=True):
            if whole:
                assert first + len(contents) - 1 > cursor.limit  # the only refusal here
            for offset, content in enumerate(contents):
                if first + offset <= cursor.limit:
                    r.offer(cursor, first + offset, content, True, 2.0, out)
        states.append(
            (
                cursor.last,
                cursor.pending,
                r.duplicates,
                cursor.fetching,
                cursor.deadline if cursor.fetching else None,
                fetches(out),
            )
        )
    assert states[0] == states[1]
    assert states[0][2] == min(len(contents), start + 1 - first)  # behind start: duplicates
