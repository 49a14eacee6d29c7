"""The C reference's dafka_consumer self test, scenario by scenario, without sockets or sleeps.

Each C ``zclock_sleep`` that waited for sockets to connect is gone: the in-memory network is
connected at once, and waits for delivery are ``run_until`` conditions in virtual time.
"""

from __future__ import annotations

from dafka.node import ConsumerConfig, ConsumerMachine, ProducerMachine, StoreMachine
from dafka.protocol import Fetch, GetHeads
from dafka.testing import ManualClock, MemoryLog, MemoryNetwork, ScriptedPeer

from .conftest import make_id

EARLIEST = ConsumerConfig(offset_reset="earliest")
LATEST = ConsumerConfig(offset_reset="latest")


def test_earliest_triggered_by_head() -> None:
    # GIVEN a dafka consumer
    consumer = ConsumerMachine(make_id(), EARLIEST)
    peer = ScriptedPeer(consumer)
    # WHEN consumer subscribes to topic 'hello'
    consumer.subscribe("hello", peer.clock.now)
    peer.drain()
    # THEN the consumer will send a GET_HEADS msg for the topic 'hello'
    get_heads = peer.expect(GetHeads)
    assert (get_heads.topic, get_heads.requester) == ("hello", consumer.consumer_id)
    # WHEN a HEAD msg with sequence larger 0 is sent on topic 'hello'
    peer.send_head("hello", 1)
    # THEN the consumer will send a FETCH msg for the topic 'hello'
    fetch = peer.expect(Fetch)
    assert (fetch.topic, fetch.producer, fetch.sequence) == ("hello", peer.peer_id, 0)
    assert fetch.requester == consumer.consumer_id
    assert fetch.count == 2  # sequences 0 and 1: exactly the gap, not the C's fixed window
    # WHEN a RECORD msg with sequence 0 and content 'CONTENT' is send on topic 'hello'
    peer.send_record("hello", 0, b"CONTENT")
    # THEN a consumer msg is sent to the user with topic 'hello' and content 'CONTENT'
    assert [(d.topic, d.content) for d in peer.delivered] == [("hello", b"CONTENT")]


def test_earliest_triggered_by_record() -> None:
    consumer = ConsumerMachine(make_id(), EARLIEST)
    peer = ScriptedPeer(consumer)
    consumer.subscribe("hello", peer.clock.now)
    peer.drain()
    assert peer.expect(GetHeads).topic == "hello"
    # WHEN a RECORD msg with sequence larger 0 is sent on topic 'hello'
    peer.send_record("hello", 1, b"CONTENT")
    # THEN the consumer will send a FETCH msg for the topic 'hello'
    fetch = peer.expect(Fetch)
    assert (fetch.topic, fetch.sequence) == ("hello", 0)
    assert peer.delivered == []
    # WHEN a RECORD msg with sequence 0 is sent, THEN it is delivered, and (unlike C, which
    # dropped it and fetched it again) the record 1 that arrived ahead follows it
    peer.send_record("hello", 0, b"CONTENT")
    assert [(d.topic, d.sequence, d.content) for d in peer.delivered] == [
        ("hello", 0, b"CONTENT"),
        ("hello", 1, b"CONTENT"),
    ]


def test_producer_store_and_earliest_consumer() -> None:
    net = MemoryNetwork(ManualClock())
    producer = ProducerMachine("hello", make_id())
    store = StoreMachine(make_id(), make_id(), log := MemoryLog())
    consumer = ConsumerMachine(make_id(), EARLIEST)
    net.add("producer", producer)
    net.add("store", store, log=log)
    net.add("consumer", consumer)
    net.settle()

    producer.publish(b"HELLO MATE", net.clock.now)
    net.settle()  # published before the consumer subscribes
    consumer.subscribe("hello", net.clock.now)
    net.settle()
    producer.publish(b"HELLO ATEM", net.clock.now)
    net.settle()
    producer.publish(b"HELLO TEMA", net.clock.now)

    net.run_until(lambda: len(net.delivered("consumer")) >= 3)
    assert net.contents("consumer") == [b"HELLO MATE", b"HELLO ATEM", b"HELLO TEMA"]
    assert [d.sequence for d in net.delivered("consumer")] == [0, 1, 2]


def test_producer_and_latest_consumer_then_store_acks_everything() -> None:
    net = MemoryNetwork(ManualClock())
    producer = ProducerMachine("hello", make_id())
    consumer = ConsumerMachine(make_id(), LATEST)
    net.add("producer", producer)
    net.add("consumer", consumer)
    net.settle()

    # This message is missed by the consumer and ignored because the offset reset is latest.
    producer.publish(b"HELLO MATE", net.clock.now)
    net.settle()
    consumer.subscribe("hello", net.clock.now)
    net.settle()
    producer.publish(b"HELLO ATEM", net.clock.now)
    net.run_until(lambda: len(net.delivered("consumer")) >= 1)
    assert net.contents("consumer") == [b"HELLO ATEM"]

    # A store ACKs every record so that the producer may let them go (and could exit).
    assert producer.unacked == 2
    net.add("store", StoreMachine(make_id(), make_id(), log := MemoryLog()), log=log)
    net.run_until(lambda: producer.unacked == 0)
    assert log.contents("hello", producer.producer_id) == [b"HELLO MATE", b"HELLO ATEM"]
    net.run_for(5.0)
    assert net.contents("consumer") == [b"HELLO ATEM"]  # latest never went back for MATE
