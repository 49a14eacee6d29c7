"""Differential property: a tiny ring plus replays behaves exactly like an unbounded ring.

Streams of producers' messages are sequenced twice: once with a ring larger than the
stream, once with a ring of 1 to 4 entries whose misses are served by replays from the log.
Outcomes (ring vs replay aside), deliveries, read-through offsets and producer states must
be identical.

Streams have the properties every real log has: each producer mints clocks in increasing
order (the publisher's ordering rule), anything may be repeated later (duplicates,
re-sent ACKs - so rollbacks and ACK regressions happen too), and clock-0 messages carry
the nil UUID. (Gazette's ring and replay paths can disagree on a *fresh* message appended
with a clock below one already in the span - exactly what the ordering rule prevents.)
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dafka.message import (
    Envelope,
    JsonMessage,
    MustStartReplay,
    QueueOutcome,
    Sequencer,
    SequencerCheckpoint,
)
from tests.unit.message.seqtools import A, B, C, Generator

PRODUCERS = (A, B, C)

events = st.lists(
    st.tuples(
        st.integers(0, 2),  # producer
        st.sampled_from(["fresh", "fresh", "fresh", "repeat", "nil"]),
        st.integers(1, 3),  # clock step of a fresh message
        st.sampled_from([0, 1, 1, 1, 2, 2, 0x100]),  # flags, CONTINUE/ACK weighted
        st.integers(0, 10**6),  # which earlier message a repeat copies
    ),
    max_size=60,
)


def log_of(stream: list[tuple[int, str, int, int, int]]) -> list[Envelope[JsonMessage]]:
    """The log an ``events`` stream describes: each producer's clocks minted in increasing
    order, repeats copying an earlier message, nil-UUID messages at clock 0."""
    gen = Generator()
    clocks = [0, 0, 0]
    minted: list[tuple[bytes, int, int]] = []
    log = []
    for p, kind, step, flags, pick in stream:
        if kind == "nil":
            log.append(gen(bytes(6), 0, 0))
        elif kind == "repeat" and minted:
            log.append(gen(*minted[pick % len(minted)]))
        else:
            clocks[p] += step
            minted.append((PRODUCERS[p], clocks[p], flags))
            log.append(gen(*minted[-1]))
    return log


def run(
    log: list[Envelope[JsonMessage]], buffer: int
) -> tuple[list[QueueOutcome], list[int], SequencerCheckpoint]:
    seq: Sequencer[JsonMessage] = Sequencer(buffer=buffer, on_anomaly=lambda _: None)
    outcomes: list[QueueOutcome] = []
    delivered: list[int] = []
    for env in log:
        outcome = seq.queue_uncommitted(env)
        outcomes.append(
            QueueOutcome.ACK_COMMIT_RING if outcome == QueueOutcome.ACK_COMMIT_REPLAY else outcome
        )
        while True:
            try:
                out = seq.step()
            except MustStartReplay as need:
                seq.start_replay([e for e in log if need.begin <= e.begin and e.end <= need.end])
                continue
            if out is None:
                break
            delivered.append(out.begin)
    return outcomes, delivered, seq.checkpoint()


@settings(max_examples=300, deadline=None)
@given(stream=events, buffer=st.integers(1, 4))
def test_small_ring_with_replays_equals_unbounded_ring(
    stream: list[tuple[int, str, int, int, int]], buffer: int
) -> None:
    log = log_of(stream)
    assert run(log, buffer) == run(log, 10_000)


def run_drained(
    log: list[Envelope[JsonMessage]], buffer: int
) -> tuple[list[QueueOutcome], list[int], SequencerCheckpoint]:
    """As :func:`run`, with commits taken by ``drain()`` (one loop when all is in the ring)."""
    seq: Sequencer[JsonMessage] = Sequencer(buffer=buffer, on_anomaly=lambda _: None)
    outcomes: list[QueueOutcome] = []
    delivered: list[int] = []
    for env in log:
        outcome = seq.queue_uncommitted(env)
        outcomes.append(
            QueueOutcome.ACK_COMMIT_RING if outcome == QueueOutcome.ACK_COMMIT_REPLAY else outcome
        )
        while seq.committing:
            try:
                delivered.extend(out.begin for out in seq.drain())
            except MustStartReplay as need:
                seq.start_replay([e for e in log if need.begin <= e.begin and e.end <= need.end])
    return outcomes, delivered, seq.checkpoint()


@settings(max_examples=300, deadline=None)
@given(stream=events, buffer=st.integers(1, 4))
def test_drain_equals_stepping(stream: list[tuple[int, str, int, int, int]], buffer: int) -> None:
    log = log_of(stream)
    for size in (buffer, 10_000):
        assert run_drained(log, size) == run(log, size)


def run_many(
    log: list[Envelope[JsonMessage]], buffer: int
) -> tuple[list[int], SequencerCheckpoint, int]:
    """As :func:`run`, queueing with ``queue_many`` (a whole run, stopping at commits)."""
    seq: Sequencer[JsonMessage] = Sequencer(buffer=buffer, on_anomaly=lambda _: None)
    delivered: list[int] = []
    ints = [env.message.uuid.int for env in log]
    k = 0
    while k < len(log):
        k = seq.queue_many(log, ints, k)
        while seq.committing:
            try:
                delivered.extend(out.begin for out in seq.drain())
            except MustStartReplay as need:
                seq.start_replay([e for e in log if need.begin <= e.begin and e.end <= need.end])
    return delivered, seq.checkpoint(), seq.anomalies


def run_one_by_one(
    log: list[Envelope[JsonMessage]], buffer: int
) -> tuple[list[int], SequencerCheckpoint, int]:
    seq: Sequencer[JsonMessage] = Sequencer(buffer=buffer, on_anomaly=lambda _: None)
    _, delivered, checkpoint = run(log, buffer)
    for env in log:
        seq.queue_uncommitted(env)
        while seq.committing:
            try:
                seq.drain()
            except MustStartReplay as need:
                seq.start_replay([e for e in log if need.begin <= e.begin and e.end <= need.end])
    return delivered, checkpoint, seq.anomalies


@settings(max_examples=300, deadline=None)
@given(stream=events, buffer=st.integers(1, 4))
def test_queue_many_equals_one_by_one(
    stream: list[tuple[int, str, int, int, int]], buffer: int
) -> None:
    log = log_of(stream)
    for size in (buffer, 10_000):
        assert run_many(log, size) == run_one_by_one(log, size)
