"""TopicProducerMachine, adaptive batching (issue 23): ``close_idle`` sends the open batch of
a quiet partition at once, and leaves it to fill while enough RECORDs await their ACKs."""

from __future__ import annotations

from typing import Any

from dafka.client._topic_machine import ADAPTIVE_IN_FLIGHT, TopicProducerMachine
from dafka.node import ProducerConfig
from dafka.protocol import Ack, Record, StoreHello
from dafka.records import decode_batch
from dafka.testing import ScriptedPeer

TOPIC = "adapt"
PARTITION = "0123ABCD456789EF0123456789ABCDEF.0"


def make() -> tuple[TopicProducerMachine, ScriptedPeer]:
    machine = TopicProducerMachine(
        TOPIC,
        [PARTITION],
        ProducerConfig(),
        batching=True,
        batch_size=1 << 20,
        linger=60.0,
        resume=False,
        settle=1.0,
        now=0.0,
    )
    machine.on_message(StoreHello(PARTITION, "STORE"), 0.0)  # its ACKs count
    return machine, ScriptedPeer(machine)


def entry(i: int) -> Any:
    value = b"m%d" % i
    return (0, value, None, None, 1_700_000_000_000 + i, None, (None, len(value)))


def records(peer: ScriptedPeer) -> list[Record]:
    peer.drain()
    return [m for m in peer.recv_all() if isinstance(m, Record)]


def test_a_quiet_partition_sends_at_once_and_batches_form_while_records_are_in_flight() -> None:
    machine, peer = make()
    sent: list[Record] = []
    for i in range(ADAPTIVE_IN_FLIGHT):  # quiet: each message leaves alone, no linger
        machine.add_many([entry(i)], 0.0)
        machine.close_idle(0.0)
        got = records(peer)
        assert len(got) == 1, f"message {i}: {len(got)} RECORDs sent at once"
        sent += got
    for i in range(ADAPTIVE_IN_FLIGHT, ADAPTIVE_IN_FLIGHT + 100):  # loaded: they batch
        machine.add_many([entry(i)], 0.0)
        machine.close_idle(0.0)
    assert records(peer) == []
    machine.on_message_from(Ack(PARTITION, TOPIC, sent[-1].sequence), 0.0, "STORE")
    machine.close_idle(0.0)  # the ACKs came: the batch that formed leaves
    batch = records(peer)
    assert len(batch) == 1
    values = [v for r in sent + batch for v in decode_batch(r.content).values]
    assert values == [b"m%d" % i for i in range(ADAPTIVE_IN_FLIGHT + 100)]
