"""Whatever order, duplication and loss records arrive in, a consumer delivers 0..n-1 once."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from dafka.node import (
    ConsumerConfig,
    ConsumerMachine,
    Deliver,
    FetchPolicy,
    NodeMachine,
    ProducerMachine,
    Send,
    StoreMachine,
)
from dafka.protocol import DirectRecord, Fetch, Head, Record
from dafka.testing import ManualClock, MemoryLog, MemoryNetwork

CID = "CONSUMER"


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 60),
    arrivals=st.lists(st.integers(0, 59), max_size=120),  # live RECORDs: any order, dups
    window=st.integers(1, 16),
    answer_rate=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
)
def test_any_arrival_order_gives_each_record_once_in_order(
    n: int, arrivals: list[int], window: int, answer_rate: float, seed: int
) -> None:
    rng = random.Random(seed)
    policy = FetchPolicy(window=window, retry_initial=0.5, retry_max=2.0)
    config = ConsumerConfig(offset_reset="earliest", heads_refresh=None, fetch=policy)
    consumer = ConsumerMachine(CID, config)
    consumer.subscribe("t", 0.0)
    clock = ManualClock()
    delivered: list[int] = []

    def drain() -> list[Fetch]:
        fetches = []
        for action in consumer.take_actions():
            if isinstance(action, Deliver):
                delivered.extend(
                    range(action.first_sequence, action.first_sequence + len(action.contents))
                )
            elif isinstance(action, Send) and isinstance(action.message, Fetch):
                fetches.append(action.message)
        return fetches

    def answer(fetches: list[Fetch]) -> None:
        for fetch in fetches:  # a lossy replier: each record answered or lost
            for s in range(fetch.sequence, min(fetch.sequence + fetch.count, n)):
                if rng.random() < answer_rate:
                    consumer.on_message(DirectRecord(CID, "t", "P", s, b"%d" % s), clock.now)

    drain()
    for s in arrivals:  # live records, in any order, duplicated, some beyond n never sent
        if s < n:
            consumer.on_message(Record("t", "P", s, b"%d" % s), clock.now)
            answer(drain())
    consumer.on_message(Head("t", "P", n - 1), clock.now)
    for _ in range(10_000):  # then a perfect replier until caught up
        fetches = drain()
        answer_rate = 1.0
        answer(fetches)
        if len(delivered) == n or not clock.jump([consumer]):
            break
    drain()
    assert delivered == list(range(n))
    assert consumer.statistics().skipped_records == 0


def test_every_machine_is_a_node_machine() -> None:
    machines: list[NodeMachine] = [
        ProducerMachine("t", "P"),
        ConsumerMachine("C"),
        StoreMachine("W", "R", MemoryLog()),
    ]
    assert all(m.take_actions() for m in machines)  # each starts with its subscriptions


def test_a_seeded_lossy_run_replays_identically() -> None:
    def run() -> tuple[int, int, int, list[bytes]]:
        net = MemoryNetwork(ManualClock(), drop_rate=0.1, seed=42)
        producer = ProducerMachine("t", "P")
        net.add("p", producer)
        log = MemoryLog()
        net.add("s", StoreMachine("W", "R", log), log=log)
        consumer = ConsumerMachine("C", ConsumerConfig("earliest"))
        net.add("c", consumer)
        consumer.subscribe("t", 0.0)
        for i in range(300):
            producer.publish(b"%d" % i, net.clock.now)
        net.run_until(lambda: len(net.delivered("c")) == 300 and producer.unacked == 0)
        return net.stats.sent, net.stats.dropped, net.stats.steps, net.contents("c")

    assert run() == run()
