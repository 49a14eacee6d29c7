"""The public test helpers themselves: clock, memory log, network routing, scripted peer."""

from __future__ import annotations

import pytest

from dafka.node import ConsumerConfig, ConsumerMachine, FetchPolicy, ProducerMachine
from dafka.protocol import (
    Ack,
    ConsumerHello,
    DirectHead,
    DirectRecord,
    Fetch,
    GetHeads,
    Head,
    Record,
    StoreHello,
    encode,
)
from dafka.testing import (
    LogContractError,
    ManualClock,
    MemoryLog,
    MemoryNetwork,
    NetworkStalledError,
    ScriptedPeer,
    lossy_records,
    prefix_of,
)


def test_manual_clock() -> None:
    clock = ManualClock(5.0)
    assert clock() == clock.now == 5.0
    assert clock.advance(1.5) == 6.5
    with pytest.raises(ValueError, match="back"):
        clock.advance(-1)
    assert not clock.jump([])


def test_memory_log_contract() -> None:
    log = MemoryLog()
    assert log.append("t", "p", 0, [b"a", b"b"]) == 1
    assert log.append("t", "p", 2, [b"c"]) == 2
    with pytest.raises(LogContractError):
        log.append("t", "p", 5, [b"x"])
    assert log.read("t", "p", 1, 10) == [(1, b"b"), (2, b"c")]
    assert log.read("t", "q", 0, 10) == []
    assert (log.heads("t"), log.topics(), log.head("t", "p"), log.head("t", "q")) == (
        {"p": 2},
        ["t"],
        2,
        None,
    )


def test_prefixes_are_the_wire_prefixes() -> None:
    assert prefix_of(Record("hello", "P", 0, b"")) == b"Mhello\x00"
    assert prefix_of(DirectRecord("C", "hello", "P", 0, b"")) == b"DC\x00"
    assert prefix_of(Fetch("P", "C", "hello", 0, 1)) == b"FP\x00"
    assert prefix_of(Ack("P", "hello", 0)) == b"KP\x00"
    assert prefix_of(Head("hello", "P", 0)) == b"Hhello\x00"
    assert prefix_of(DirectHead("C", "hello", "P", 0)) == b"EC\x00"
    assert prefix_of(GetHeads("hello", "C")) == b"Ghello\x00"
    assert prefix_of(ConsumerHello("S", "C", ())) == b"WS\x00"
    assert prefix_of(StoreHello("C", "S")) == b"LC\x00"


def test_network_routes_by_prefix_and_never_back_to_the_sender() -> None:
    net = MemoryNetwork(ManualClock())
    producer = ProducerMachine("hello", "P")
    consumer = ConsumerMachine("C", ConsumerConfig("earliest"))
    net.add("p", producer)
    net.add("c", consumer)
    with pytest.raises(ValueError, match="already"):
        net.add("c", consumer)
    consumer.subscribe("hello", 0.0)
    net.settle()
    producer.publish(b"x", 0.0)
    net.settle()
    assert net.contents("c") == [b"x"]
    assert net.stats.delivered == 2  # GET-HEADS (nothing published yet: no answer), RECORD


def test_run_until_gives_up_in_virtual_time() -> None:
    net = MemoryNetwork(ManualClock())
    config = ConsumerConfig("earliest", fetch=FetchPolicy(retry_initial=1.0, retry_max=1.0))
    consumer = ConsumerMachine("C", config)
    net.add("c", consumer)
    consumer.subscribe("hello", 0.0)
    consumer.on_message(Head("hello", "GONE", 5), 0.0)  # nobody will ever answer
    with pytest.raises(NetworkStalledError):
        net.run_until(lambda: False, within=30.0)
    assert 29.0 <= net.clock.now <= 30.0
    assert consumer.statistics().fetch_retries >= 29  # still trying, never stalled


def test_scripted_peer_reports_what_was_sent() -> None:
    peer = ScriptedPeer(ConsumerMachine("C"))
    with pytest.raises(AssertionError, match="sent nothing"):
        peer.recv()
    peer.machine.on_message(StoreHello("C", "S"), 0.0)  # no topics: silence
    peer.drain()
    peer.expect_nothing()
    assert peer.pending == 0
    consumer = peer.machine
    assert isinstance(consumer, ConsumerMachine)
    consumer.subscribe("hello", 0.0)
    peer.drain()
    with pytest.raises(AssertionError, match="expected Fetch"):
        peer.expect(Fetch)


def test_lossy_records_drops_a_seeded_share_of_records_only() -> None:
    record = encode(Record("t", "A" * 32, 1, b"x"))
    ack = encode(Ack("A" * 32, "t", 1))
    loss = lossy_records(0.25, seed=7)
    dropped = [loss(record) for _ in range(4000)]
    assert not any(loss(ack) for _ in range(100))  # never anything but a RECORD
    assert loss([b""]) is False  # an empty frame 0 is not a RECORD either
    assert (loss.seen, loss.dropped) == (4000, sum(dropped))
    assert 900 < loss.dropped < 1100
    again = lossy_records(0.25, seed=7)
    assert [again(record) for _ in range(4000)] == dropped  # seeded: reproducible
    with pytest.raises(ValueError, match="rate"):
        lossy_records(1.0, seed=1)
