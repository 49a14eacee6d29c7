"""TopicProducerMachine, unbatched: one RECORD per message, remembered as runs.

A run is what one ``add_many`` sends to a partition: one ``SendRecords``, one entry until
stored. Delivery must be what one entry per RECORD gave: every message accounted once with
its size, in order, split where a cumulative ACK falls inside a run.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dafka.client._topic_machine import Chunk, TopicProducerMachine
from dafka.node import ProducerConfig
from dafka.protocol import Ack, Record, StoreHello
from dafka.testing import ScriptedPeer

TOPIC = "runs"
NAME = "0123ABCD456789EF0123456789ABCDEF"
PARTITIONS = [f"{NAME}.0", f"{NAME}.1"]
STORE = "STORE-WRITER"


def make() -> tuple[TopicProducerMachine, ScriptedPeer]:
    machine = TopicProducerMachine(
        TOPIC,
        PARTITIONS,
        ProducerConfig(),
        batching=False,
        batch_size=1 << 20,
        linger=0.0,
        resume=False,
        settle=1.0,
        now=0.0,
    )
    for partition in PARTITIONS:  # a store introduces itself to each partition
        machine.on_message(StoreHello(partition, STORE), 0.0)
    return machine, ScriptedPeer(machine)


def single(index: int, value: bytes, future: Any = None) -> tuple[Any, ...]:
    return (index, value, None, None, None, None, (future, len(value)))


def chunk(index: int, values: list[bytes], keys: list[bytes | None] | None) -> tuple[Any, ...]:
    size = sum(map(len, values)) + sum(len(k) for k in keys or [] if k is not None)
    return (index, values, keys, None, None, None, Chunk(len(values), size))


def ack(partition: int, sequence: int) -> Ack:
    return Ack(PARTITIONS[partition], TOPIC, sequence)


def test_a_run_is_one_record_per_message_and_splits_at_a_partial_ack() -> None:
    machine, peer = make()
    machine.add_many(
        [
            single(0, b"a"),
            single(1, b"other"),
            chunk(0, [b"bb", b"ccc"], [b"k", None]),
            single(0, b"dddd"),
        ],
        5.0,
    )
    peer.drain()
    assert peer.recv_all() == [
        Record(TOPIC, PARTITIONS[0], 0, b"a"),
        Record(TOPIC, PARTITIONS[0], 1, b"bb"),
        Record(TOPIC, PARTITIONS[0], 2, b"ccc"),
        Record(TOPIC, PARTITIONS[0], 3, b"dddd"),
        Record(TOPIC, PARTITIONS[1], 0, b"other"),
    ]
    assert machine.take_delivered() == []
    machine.on_message_from(
        ack(0, 1), 6.0, STORE
    )  # inside the run: its first two RECORDs are stored
    assert machine.take_delivered() == [(0, 0, [Chunk(2, 1 + 3, True)])]
    machine.on_message_from(ack(0, 3), 6.0, STORE)
    machine.on_message_from(ack(1, 0), 6.0, STORE)
    assert machine.take_delivered() == [
        (0, 2, [Chunk(2, 3 + 4, True)]),
        (1, 0, [Chunk(1, 5, True)]),
    ]
    assert machine.acked_sent == [(5.0, 2), (5.0, 2), (5.0, 1)]
    assert machine.take_delivered() == []


def test_a_run_with_futures_comes_back_one_entry_per_record() -> None:
    machine, _ = make()
    futures = [object(), object()]
    machine.add_many(
        [single(0, b"x", futures[0]), single(0, b"yy"), single(0, b"z", futures[1])], 1.0
    )
    machine.on_message_from(ack(0, 1), 2.0, STORE)
    assert machine.take_delivered() == [
        (0, 0, [(futures[0], 1)]),
        (0, 1, [(None, 2)]),
    ]
    machine.on_message_from(ack(0, 2), 2.0, STORE)
    assert machine.take_delivered() == [(0, 2, [(futures[1], 1)])]


def test_expired_and_unsent_runs_give_every_token() -> None:
    machine, _ = make()
    machine.add_many([single(0, b"a"), single(0, b"b")], 1.0)
    machine.add_many([single(0, b"c")], 3.0)
    machine.on_message_from(ack(0, 0), 3.0, STORE)
    assert machine.take_delivered() == [(0, 0, [Chunk(1, 1, True)])]
    assert machine.take_expired(2.0) == [(0, 1, [(None, 1)])]
    assert machine.take_unsent() == [(None, 1)]


@settings(max_examples=100, deadline=None)
@given(
    batches=st.lists(
        st.lists(st.tuples(st.integers(0, 1), st.binary(max_size=8), st.booleans()), max_size=6),
        max_size=5,
    ),
    acks=st.lists(st.tuples(st.integers(0, 1), st.integers(0, 40)), max_size=10),
)
def test_runs_deliver_what_one_entry_per_record_would(
    batches: list[list[tuple[int, bytes, bool]]], acks: list[tuple[int, int]]
) -> None:
    """Every stored message is delivered once, in sequence order per partition, with its
    size; a message with a future comes back with that future at its own sequence."""
    machine, _ = make()
    sequences = [0, 0]
    expected: list[list[tuple[int, bytes, Any]]] = [[], []]
    for batch in batches:
        entries = []
        for index, value, with_future in batch:
            future = object() if with_future else None
            entries.append(single(index, value, future))
            expected[index].append((sequences[index], value, future))
            sequences[index] += 1
        machine.add_many(entries, 0.0)
    delivered: list[list[tuple[int, int, Any]]] = [[], []]
    acked = [-1, -1]
    last = [(i, max(0, sequences[i] - 1)) for i in (0, 1)]
    for index, sequence in [*acks, *last]:
        machine.on_message_from(ack(index, sequence), 1.0, STORE)
        if sequence < sequences[index]:  # an ACK beyond what was sent counts for nothing
            acked[index] = max(acked[index], sequence)
        for partition, first, tokens in machine.take_delivered():
            for token in tokens:
                if isinstance(token, Chunk):
                    assert token.spread
                    sizes = _sizes(expected[partition], first, token)
                    delivered[partition] += [(first + j, n, None) for j, n in enumerate(sizes)]
                else:
                    delivered[partition].append((first, token[1], token[0]))
        for partition in (0, 1):
            assert len(delivered[partition]) == acked[partition] + 1
    for partition in (0, 1):
        assert delivered[partition] == [
            (sequence, len(value), future) for sequence, value, future in expected[partition]
        ]


def _sizes(expected: list[tuple[int, bytes, Any]], first: int, token: Chunk) -> list[int]:
    sizes = [len(value) for _, value, _ in expected[first : first + token.count]]
    assert sum(sizes) == token.size
    assert all(future is None for _, _, future in expected[first : first + token.count])
    return sizes
