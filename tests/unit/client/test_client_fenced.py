"""A client producer fenced by a newer run of its name: its records in flight fail, never
reported stored (docs/guarantees.md, "A fenced producer")."""

from __future__ import annotations

from dafka.client._topic_machine import TopicProducerMachine
from dafka.node import ProducerConfig
from dafka.protocol import Ack, StoreHello
from dafka.testing import ScriptedPeer

TOPIC, P = "hello", "w.0"
STORE = "57000000000000000000000000000001"


def test_an_ack_of_a_newer_run_fails_the_records_in_flight_and_stays_fenced() -> None:
    machine = TopicProducerMachine(
        TOPIC,
        [P],
        ProducerConfig(),
        batching=False,
        batch_size=1 << 20,
        linger=0.0,
        resume=False,
        settle=0.5,
        now=0.0,
        heads={P: 9},
        epoch=7,
    )
    peer = ScriptedPeer(machine)
    assert machine.resumed
    machine.on_message_from(StoreHello(P, STORE), 0.0, STORE)
    machine.add_many([(0, b"a", None, None, None, None, (None, 1))] * 3, 0.0)
    peer.drain()
    assert machine.take_fenced() == []
    machine.on_message_from(Ack(P, TOPIC, 11, 8, 10), 1.0, STORE)  # run 8 resumed at 10
    assert machine.take_delivered() == []  # before: 10 and 11 reported stored
    [(index, why, tokens)] = machine.take_fenced()
    assert (index, len(tokens)) == (0, 3)
    assert why == (
        "producer 'w.0' of 'hello' was fenced: a newer run (epoch 8, start 10) writes the "
        "partition over this run (epoch 7, start 10); the stores refuse this run's records"
    )
    assert machine.rejected == 1
    machine.add_many([(0, b"b", None, None, None, None, (None, 1))], 2.0)
    peer.drain()
    [(_, _, later)] = machine.take_fenced()  # sent after the fence: fails too
    assert len(later) == 1
    assert machine.take_fenced() == []
