"""TopicProducerMachine, batching: no RECORD is larger than ``max_message_bytes``.

A batch closes at ``batch_size`` bytes, so one big message joining it could take it past
the limit (and a store would keep a drop notice instead). Whatever the messages (each fits
a batch of its own: the producer checked that at the call), every RECORD sent fits, and the
RECORDs hold every message once, in order, each with its own token.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dafka.client._topic_machine import Chunk, TopicProducerMachine
from dafka.node import ProducerConfig
from dafka.protocol import Ack, Record, StoreHello
from dafka.records import BATCH_OF_ONE, decode_batch
from dafka.testing import ScriptedPeer

TOPIC = "cut"
PARTITION = "0123ABCD456789EF0123456789ABCDEF.0"
LIMIT = 1024


def make() -> tuple[TopicProducerMachine, ScriptedPeer]:
    machine = TopicProducerMachine(
        TOPIC,
        [PARTITION],
        ProducerConfig(max_message_bytes=LIMIT),
        batching=True,
        batch_size=1 << 20,
        linger=1.0,
        resume=False,
        settle=1.0,
        now=0.0,
        max_message_bytes=LIMIT,
    )
    machine.on_message(StoreHello(PARTITION, "STORE"), 0.0)  # its ACKs count
    return machine, ScriptedPeer(machine)


# a message: (value size, key size or None, header names and value sizes, with a future)
messages = st.lists(
    st.tuples(
        st.integers(0, LIMIT),
        st.none() | st.integers(0, 64),
        st.lists(st.tuples(st.text(max_size=4), st.integers(0, 16)), max_size=3),
        st.booleans(),
    ),
    min_size=1,
    max_size=40,
)


def entry(i: int, value_size: int, key_size: int | None, headers: Any, future: bool) -> Any:
    """One queued message that fits a batch of its own (as the producer admits it)."""
    key = None if key_size is None else b"k" * key_size
    hdrs = tuple((name, b"h" * n) for name, n in headers) or None
    weight = (0 if key is None else len(key)) + sum(
        len(n.encode()) + len(v) + 8 for n, v in hdrs or ()
    )
    value = b"%d:" % i + b"v" * max(0, min(value_size, LIMIT - BATCH_OF_ONE - weight - 8))
    size = len(value) + weight
    return (0, value, key, hdrs, 1_700_000_000_000 + i, None, (f"f{i}" if future else None, size))


@settings(max_examples=60, deadline=None)
@given(messages, st.integers(0, 30))
def test_every_record_fits_and_holds_each_message_once_in_order(
    batch: list[tuple[int, int | None, Any, bool]], chunked: int
) -> None:
    machine, peer = make()
    entries = [entry(i, *m) for i, m in enumerate(batch)]
    values = [b"c%d:" % j + b"x" * (j * 37 % 700) for j in range(chunked)]
    if values:  # a chunk of produce_many, as the producer cut it (it may weigh more than LIMIT)
        entries.append(
            (
                0,
                values,
                None,
                None,
                1_700_000_000_000,
                None,
                Chunk(len(values), sum(map(len, values))),
            )
        )
    machine.add_many(entries, 0.0)
    machine.close_all(0.0)
    peer.drain()
    sent = [m for m in peer.recv_all() if isinstance(m, Record)]
    assert all(len(r.content) <= LIMIT for r in sent)
    got = [v for r in sent for v in decode_batch(r.content).values]
    assert got == [e[1] for e in entries[: len(batch)]] + values
    for record in sent:
        machine.on_message_from(Ack(PARTITION, TOPIC, record.sequence), 0.0, "STORE")
    delivered = machine.take_delivered()
    futures = [t[0] for _, _, tokens in delivered for t in tokens if t.__class__ is not Chunk]
    assert [f for f in futures if f is not None] == [f"f{i}" for i, m in enumerate(batch) if m[3]]
    counted = sum(t.count if t.__class__ is Chunk else 1 for _, _, ts in delivered for t in ts)
    assert counted == len(batch) + chunked
