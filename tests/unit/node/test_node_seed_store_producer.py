"""The C reference's dafka_producer and dafka_store self tests, without sockets or sleeps."""

from __future__ import annotations

from dafka.node import ConsumerConfig, ConsumerMachine, ProducerMachine, StoreMachine, Subscribe
from dafka.testing import ManualClock, MemoryLog, MemoryNetwork, ScriptedPeer

from .conftest import make_id


def test_producer_create_and_destroy() -> None:
    producer = ProducerMachine("dummy", make_id())
    peer = ScriptedPeer(producer)
    pid = producer.producer_id.encode()
    assert peer.subscriptions == {b"K" + pid, b"F" + pid, b"Gdummy", b"L" + pid}  # L: ours
    peer.expect_nothing()  # nothing published: no records, no HEAD
    assert producer.next_deadline() is None
    assert not peer.tick()


def test_store_fetches_from_producer_then_serves_consumer_after_producer_is_gone() -> None:
    net = MemoryNetwork(ManualClock())
    producer = ProducerMachine("TEST", make_id())
    net.add("producer", producer)
    # Producing before the store is alive, to test fetching between producer and store.
    producer.publish(b"1", net.clock.now)
    producer.publish(b"2", net.clock.now)
    net.settle()

    store = StoreMachine(make_id(), make_id(), log := MemoryLog())
    net.add("store", store, log=log)
    net.settle()
    producer.publish(b"3", net.clock.now)
    net.run_until(lambda: producer.unacked == 0)
    assert log.contents("TEST", producer.producer_id) == [b"1", b"2", b"3"]

    # Killing the producer, to make sure the HEADs are coming from the store.
    net.remove("producer")
    consumer = ConsumerMachine(make_id(), ConsumerConfig(offset_reset="earliest"))
    net.add("consumer", consumer)
    consumer.subscribe("TEST", net.clock.now)
    net.run_until(lambda: len(net.delivered("consumer")) >= 3)
    assert net.contents("consumer") == [b"1", b"2", b"3"]


def test_store_subscriptions_match_the_c_store() -> None:
    store = StoreMachine("WRITER", "READER", MemoryLog())
    assert [a for a in store.take_actions() if isinstance(a, Subscribe)] == [
        Subscribe(b"DWRITER"),
        Subscribe(b"M"),
        Subscribe(b"H"),
        Subscribe(b"EWRITER"),  # ours: answers to the writer's GET-HEADS
        Subscribe(b"F"),
        Subscribe(b"G"),
        Subscribe(b"WREADER"),
    ]
