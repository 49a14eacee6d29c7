"""Producers, stores and consumers together on the in-memory network, with losses and restarts."""

from __future__ import annotations

import pytest

from dafka.node import (
    BackpressureError,
    ConsumerConfig,
    ConsumerMachine,
    FetchPolicy,
    ProducerConfig,
    ProducerMachine,
    StoreMachine,
)
from dafka.protocol import DataMessage, DirectRecord, Head, Record
from dafka.testing import ManualClock, MemoryLog, MemoryNetwork

from .conftest import make_id

EARLIEST = ConsumerConfig(offset_reset="earliest")


def add_store(net: MemoryNetwork, name: str, log: MemoryLog | None = None) -> MemoryLog:
    log = log if log is not None else MemoryLog()
    net.add(name, StoreMachine(make_id(), make_id(), log), log=log)
    return log


def test_catch_up_far_behind_after_the_producer_is_gone() -> None:
    """150,000 records behind, no producer: fetch window after window to the end (C stalls)."""
    total = 150_000
    log = MemoryLog()
    log.append("hello", "GONE", 0, [b"%d" % s for s in range(total)])
    net = MemoryNetwork(ManualClock(), batch_size=4096)
    add_store(net, "store", log)  # a restarted store: heads recovered from its log
    consumer = ConsumerMachine(make_id(), EARLIEST)
    net.add("consumer", consumer)
    consumer.subscribe("hello", net.clock.now)
    net.run_until(lambda: len(net.delivered("consumer")) >= total, within=60.0)
    delivered = net.delivered("consumer")
    assert [d.sequence for d in delivered] == list(range(total))
    assert delivered[-1].content == b"%d" % (total - 1)
    stats = consumer.statistics()
    assert stats.fetches_sent == 15  # windows of 10,000
    assert (stats.fetches_in_flight, stats.dropped_duplicates) == (0, 0)


def test_catch_up_survives_lost_replies() -> None:
    total = 5_000
    log = MemoryLog()
    log.append("hello", "GONE", 0, [b"%d" % s for s in range(total)])
    net = MemoryNetwork(
        ManualClock(), drop_rate=0.02, seed=11, droppable=lambda m, _: isinstance(m, DirectRecord)
    )
    add_store(net, "store", log)
    config = ConsumerConfig(offset_reset="earliest", fetch=FetchPolicy(window=1_000))
    consumer = ConsumerMachine(make_id(), config)
    net.add("consumer", consumer)
    consumer.subscribe("hello", net.clock.now)
    net.run_until(lambda: len(net.delivered("consumer")) >= total, within=3_600.0)
    assert [d.content for d in net.delivered("consumer")] == [b"%d" % s for s in range(total)]
    assert net.stats.dropped > 0
    assert consumer.statistics().fetch_retries > 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_two_stores_replicate_identically_despite_losses(seed: int) -> None:
    net = MemoryNetwork(ManualClock(), drop_rate=0.05, seed=seed)
    producer = ProducerMachine("hello", make_id())
    net.add("producer", producer)
    first = add_store(net, "a")
    second = add_store(net, "b")
    consumer = ConsumerMachine(make_id(), EARLIEST)
    net.add("consumer", consumer)
    consumer.subscribe("hello", net.clock.now)
    published = []
    for burst in range(20):
        for i in range(100):
            content = b"record %d/%d" % (burst, i)
            producer.publish(content, net.clock.now)
            published.append(content)
        net.run_for(0.05)
    pid = producer.producer_id
    # The producer leaves as soon as one store ACKed everything (min_stores=1)...
    net.run_until(lambda: producer.unacked == 0, within=120.0)
    net.remove("producer")
    # ...and the stores still end up identical: the laggard fetches from the other's reader.
    net.run_until(
        lambda: (
            len(first.contents("hello", pid)) == len(second.contents("hello", pid)) == 2000
            and len(net.delivered("consumer")) >= 2000
        ),
        within=300.0,
    )
    assert first.contents("hello", pid) == second.contents("hello", pid) == published
    assert net.contents("consumer") == published  # in order, each once
    assert net.stats.dropped > 100


def test_restarted_store_replicates_what_it_missed_from_another_store() -> None:
    """A store that was down catches up from another store's reader; the producer is gone."""
    full, partial = MemoryLog(), MemoryLog()
    records = [b"%d" % s for s in range(2_000)]
    full.append("hello", "GONE", 0, records)
    partial.append("hello", "GONE", 0, records[:500])
    net = MemoryNetwork(ManualClock())
    add_store(net, "full", full)
    add_store(net, "partial", partial)  # asks for heads at start: the full store answers
    net.run_until(lambda: len(partial.contents("hello", "GONE")) == 2_000)
    assert partial.contents("hello", "GONE") == records


def test_store_hello_lets_a_late_store_serve_an_early_consumer() -> None:
    log = MemoryLog()
    log.append("hello", "GONE", 0, [b"a", b"b", b"c"])
    net = MemoryNetwork(ManualClock())
    consumer = ConsumerMachine(make_id(), ConsumerConfig("earliest", heads_refresh=None))
    net.add("consumer", consumer)
    consumer.subscribe("hello", net.clock.now)
    net.settle()  # its GET-HEADS reached nobody
    add_store(net, "store", log)  # sees the consumer's 'L' subscription: STORE-HELLO
    net.run_until(lambda: len(net.delivered("consumer")) >= 3)
    assert net.contents("consumer") == [b"a", b"b", b"c"]


def test_topic_prefix_does_not_leak_between_topics() -> None:
    net = MemoryNetwork(ManualClock())
    hello = ProducerMachine("hello", make_id())
    hello2 = ProducerMachine("hello2", make_id())
    consumer = ConsumerMachine(make_id(), EARLIEST)
    for name, machine in (("p1", hello), ("p2", hello2), ("consumer", consumer)):
        net.add(name, machine)
    consumer.subscribe("hello", net.clock.now)
    net.settle()
    hello.publish(b"mine", net.clock.now)
    hello2.publish(b"not mine", net.clock.now)
    net.run_for(3.0)
    assert net.contents("consumer") == [b"mine"]
    assert consumer.statistics().dropped_foreign >= 2  # the RECORD and the HEADs of hello2


def test_producer_memory_is_bounded_until_a_store_acks() -> None:
    net = MemoryNetwork(ManualClock())
    producer = ProducerMachine("hello", make_id(), ProducerConfig(max_unacked_records=100))
    net.add("producer", producer)
    for _ in range(100):
        producer.publish(b"x", net.clock.now)
    with pytest.raises(BackpressureError):
        producer.publish(b"x", net.clock.now)
    # What a 'block' driver does: keep running the node until the machine accepts again.
    log = add_store(net, "store")
    net.run_until(producer.can_publish)
    producer.publish(b"y", net.clock.now)
    net.run_until(lambda: producer.unacked == 0)
    assert log.contents("hello", producer.producer_id) == [b"x"] * 100 + [b"y"]


def test_consumer_gets_exactly_once_in_order_through_losses() -> None:
    def lossy(message: DataMessage, recipient: str) -> bool:
        del recipient
        return isinstance(message, Record | DirectRecord)

    net = MemoryNetwork(ManualClock(), drop_rate=0.1, seed=5, droppable=lossy)
    producer = ProducerMachine("hello", make_id())
    net.add("producer", producer)
    add_store(net, "store")
    consumer = ConsumerMachine(make_id(), EARLIEST)
    net.add("consumer", consumer)
    consumer.subscribe("hello", net.clock.now)
    net.settle()
    for i in range(500):
        producer.publish(b"%d" % i, net.clock.now)
        if i % 50 == 0:
            net.run_for(0.01)
    net.run_until(lambda: len(net.delivered("consumer")) >= 500, within=120.0)
    net.run_for(5.0)
    assert net.contents("consumer") == [b"%d" % i for i in range(500)]


def test_records_that_retention_removed_are_skipped_by_consumers_and_late_stores() -> None:
    """Records before the store's first held sequence are gone: a consumer starts after them
    (not data loss: where the partition starts now), a late store's log starts there too."""
    log = MemoryLog()
    log.append("hello", "GONE", 1_000, [b"%d" % s for s in range(1_000, 2_000)])
    net = MemoryNetwork(ManualClock())
    add_store(net, "store", log)
    late_store_log = add_store(net, "late store")
    late_store = net.machine("late store")
    assert isinstance(late_store, StoreMachine)
    late_store.on_message(Head("hello", "GONE", 1_999), net.clock.now)
    consumer = ConsumerMachine(make_id(), EARLIEST)
    net.add("consumer", consumer)
    consumer.subscribe("hello", net.clock.now)
    took = net.run_until(lambda: len(net.delivered("consumer")) >= 1_000, within=60.0)
    assert [d.sequence for d in net.delivered("consumer")] == list(range(1_000, 2_000))
    assert consumer.statistics().skipped_records == 1_000
    assert 30.0 <= took <= 45.0  # ten unanswered retries: 0.5 + 1 + 2 + 4 + 6 * 5 s
    net.run_for(60.0)
    assert late_store_log.contents("hello", "GONE") == [b"%d" % s for s in range(1_000, 2_000)]
    assert late_store_log.holes("hello", "GONE") == []  # a log that starts there: no hole
    stats = late_store.statistics()
    assert (stats.holes_recorded, stats.records_gone, stats.fetches_in_flight) == (1, 1_000, 0)


def test_a_lossy_network_does_not_make_a_consumer_skip() -> None:
    net = MemoryNetwork(
        ManualClock(), drop_rate=0.3, seed=9, droppable=lambda m, _: isinstance(m, DirectRecord)
    )
    log = MemoryLog()
    log.append("hello", "GONE", 0, [b"%d" % s for s in range(300)])
    add_store(net, "store", log)
    consumer = ConsumerMachine(make_id(), EARLIEST)
    net.add("consumer", consumer)
    consumer.subscribe("hello", net.clock.now)
    net.run_until(lambda: len(net.delivered("consumer")) >= 300, within=3_600.0)
    assert [d.sequence for d in net.delivered("consumer")] == list(range(300))
    assert consumer.statistics().skipped_records == 0


def test_a_log_start_answer_lets_an_earliest_consumer_start_after_retention_at_once() -> None:
    """The stores say where their logs start (LOG-START): no ten retries (~37 s) first."""
    log = MemoryLog()
    log.append("hello", "GONE", 1_000, [b"%d" % s for s in range(1_000, 2_000)])
    other = MemoryLog()
    other.append("hello", "GONE", 1_500, [b"%d" % s for s in range(1_500, 2_000)])
    net = MemoryNetwork(ManualClock())
    add_store(net, "store", log)
    add_store(net, "other store", other)  # retention moved its start further
    consumer = ConsumerMachine(make_id(), EARLIEST)
    net.add("consumer", consumer)
    consumer.subscribe("hello", net.clock.now)
    took = net.run_until(lambda: len(net.delivered("consumer")) >= 1_000, within=60.0)
    assert [d.sequence for d in net.delivered("consumer")] == list(range(1_000, 2_000))
    stats = consumer.statistics()
    assert (stats.skipped_records, stats.skipped_on_log_start) == (1_000, 1)
    assert took < 1.0, f"{took:.1f} virtual seconds: the FETCH retries decided"


def test_a_store_that_still_holds_the_gap_is_read_not_skipped() -> None:
    trimmed = MemoryLog()
    trimmed.append("hello", "GONE", 1_000, [b"%d" % s for s in range(1_000, 2_000)])
    whole = MemoryLog()
    whole.append("hello", "GONE", 0, [b"%d" % s for s in range(2_000)])
    net = MemoryNetwork(ManualClock())
    add_store(net, "trimmed", trimmed)
    add_store(net, "whole", whole)
    consumer = ConsumerMachine(make_id(), EARLIEST)
    net.add("consumer", consumer)
    consumer.subscribe("hello", net.clock.now)
    net.run_until(lambda: len(net.delivered("consumer")) >= 2_000, within=60.0)
    assert [d.sequence for d in net.delivered("consumer")] == list(range(2_000))
    assert consumer.statistics().skipped_records == 0
