"""``on_records`` (a run of RECORDs, the driver's fast path) == ``on_message`` per record.

Twin machines get the same inputs, one through runs and one record by record; their outboxes
and counters must be identical after every batch, whatever the runs look like: in order,
ahead (gaps), behind (duplicates), on unknown partitions or topics, while fetching, with
HEADs and drains in between.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dafka.node import ConsumerConfig, ConsumerMachine, StoreConfig, StoreMachine
from dafka.protocol import Head, Record
from dafka.testing import MemoryLog

WID = "57000000000000000000000000000001"
RID = "52000000000000000000000000000002"
CID = "43000000000000000000000000000003"
TOPICS = ("hello", "hello2")
PRODUCERS = ("P1", "P2")

run_steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("run"),
            st.sampled_from(TOPICS),
            st.sampled_from(PRODUCERS),
            st.integers(0, 40),  # first sequence
            st.integers(0, 12),  # length (0: an empty run)
        ),
        st.tuples(  # continues where this partition's last run ended: the hot path
            st.just("next"),
            st.sampled_from(TOPICS),
            st.sampled_from(PRODUCERS),
            st.integers(-1, 1),  # offset from the continuation point
            st.integers(1, 12),
        ),
        st.tuples(
            st.just("head"),
            st.sampled_from(TOPICS),
            st.sampled_from(PRODUCERS),
            st.integers(0, 60),
            st.just(0),
        ),
        st.tuples(st.just("drain"), st.just(""), st.just(""), st.just(0), st.just(0)),
        st.tuples(st.just("timer"), st.just(""), st.just(""), st.just(0), st.just(0)),
    ),
    max_size=40,
)


def _contents(topic: str, producer: str, first: int, count: int) -> list[bytes]:
    return [f"{topic}/{producer}/{first + i}".encode() for i in range(count)]


def _replay(twins: tuple[Any, Any], steps: list[tuple[str, str, str, int, int]]) -> None:
    by_runs, one_by_one = twins
    now = 0.0
    ends: dict[tuple[str, str], int] = {}
    for kind, topic, producer, number, count in steps:
        now += 0.25
        first = number
        if kind == "next":
            first = max(0, ends.get((topic, producer), 0) + number)
        if kind in ("run", "next"):
            ends[topic, producer] = first + count
            contents = _contents(topic, producer, first, count)
            by_runs.on_records(topic, producer, first, contents, now)
            for i, content in enumerate(contents):
                one_by_one.on_message(Record(topic, producer, first + i, content), now)
        elif kind == "head":
            for machine in twins:
                machine.on_message(Head(topic, producer, first), now)
        elif kind == "timer":
            for machine in twins:
                machine.on_timer(now)
        else:
            assert by_runs.take_actions() == one_by_one.take_actions()
            assert by_runs.statistics() == one_by_one.statistics()
    assert by_runs.take_actions() == one_by_one.take_actions()
    assert by_runs.statistics() == one_by_one.statistics()


@settings(max_examples=150, deadline=None)
@given(steps=run_steps, earliest=st.booleans())
def test_consumer_runs_equal_records_one_by_one(
    steps: list[tuple[str, str, str, int, int]], earliest: bool
) -> None:
    config = ConsumerConfig(offset_reset="earliest" if earliest else "latest")
    twins = (ConsumerMachine(CID, config), ConsumerMachine(CID, config))
    for machine in twins:
        machine.subscribe("hello", 0.0)  # hello2 arrives only as a prefix leak
    _replay(twins, steps)


@settings(max_examples=150, deadline=None)
@given(steps=run_steps)
def test_store_runs_equal_records_one_by_one(steps: list[tuple[str, str, str, int, int]]) -> None:
    twins = (
        StoreMachine(WID, RID, MemoryLog(), StoreConfig()),
        StoreMachine(WID, RID, MemoryLog(), StoreConfig()),
    )
    _replay(twins, steps)


def test_an_in_order_run_is_one_delivery() -> None:
    consumer = ConsumerMachine(CID, ConsumerConfig(offset_reset="earliest"))
    consumer.subscribe("hello", 0.0)
    consumer.take_actions()
    consumer.on_records("hello", "P1", 0, [b"a", b"b"], 1.0)
    consumer.on_records("hello", "P1", 2, [b"c"], 1.0)
    delivers = consumer.take_actions()
    assert [(d.first_sequence, d.contents) for d in delivers] == [(0, (b"a", b"b", b"c"))]  # type: ignore[union-attr]
