"""The publisher: mapping, stamping in append order, transactions and ACK intents."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from dafka.message import (
    NIL_UUID,
    Clock,
    CsvRecord,
    EmptyPartitionsError,
    Flags,
    JsonMessage,
    ProducerID,
    Publisher,
    get_clock,
    get_flags,
    get_producer_id,
    modulo_mapping,
)

P = ProducerID.fromhex("0123456789ab")


class Log:
    """An in-memory log: append returns the offset of the message."""

    def __init__(self) -> None:
        self.entries: dict[str, list[JsonMessage]] = {}

    def append(self, partition: str, message: JsonMessage) -> int:
        entries = self.entries.setdefault(partition, [])
        entries.append(JsonMessage(dict(message.body), message.uuid))
        return len(entries) - 1


def to(partition: str) -> Callable[[JsonMessage], str]:
    """A mapping that sends every message to ``partition``."""
    return lambda _message: partition


def test_publish_committed_stamps_outside_txn_and_returns_append_result() -> None:
    log = Log()
    pub: Publisher[JsonMessage, int] = Publisher(log.append, clock=Clock(1000), producer=P)
    first = JsonMessage({"a": 1})
    assert pub.publish_committed(lambda _: "p", first) == 0
    assert pub.publish_committed(lambda _: "p", JsonMessage({"a": 2})) == 1
    stamped = log.entries["p"]
    assert [get_clock(m.uuid) for m in stamped] == [1001, 1002]
    assert {get_flags(m.uuid) for m in stamped} == {Flags.OUTSIDE_TXN}
    assert {get_producer_id(m.uuid) for m in stamped} == {P}
    assert first.uuid == stamped[0].uuid  # The message itself carries its UUID.
    assert pub.build_ack_intents() == []


def test_publish_uncommitted_and_ack_intents_in_order_first_touched() -> None:
    log = Log()
    pub: Publisher[JsonMessage, int] = Publisher(log.append, clock=Clock(0), producer=P)
    for partition in ["b", "a", "b", "c", "a"]:
        pub.publish_uncommitted(to(partition), JsonMessage({"p": partition}))
    assert pub.pending_partitions == ["b", "a", "c"]
    intents = pub.build_ack_intents()
    assert [i.partition for i in intents] == ["b", "a", "c"]
    # Each ACK has its own tick, after every message of the transaction.
    assert [get_clock(i.message.uuid) for i in intents] == [6, 7, 8]
    for intent in intents:
        assert get_flags(intent.message.uuid) == Flags.ACK_TXN
        assert get_producer_id(intent.message.uuid) == P
        assert intent.message.body == {}  # Otherwise empty message of the topic's type.
    assert {get_flags(m.uuid) for e in log.entries.values() for m in e} == {Flags.CONTINUE_TXN}
    assert sum(len(e) for e in log.entries.values()) == 5  # Intents are not appended.
    assert pub.build_ack_intents() == []  # Cleared.
    assert pub.pending_partitions == []


def test_csv_ack_has_the_records_field_count() -> None:
    appended: list[CsvRecord] = []
    pub: Publisher[CsvRecord, None] = Publisher(lambda _p, m: appended.append(m), producer=P)
    pub.publish_uncommitted(lambda _: "p", CsvRecord(["", "x", "y"]))
    (intent,) = pub.build_ack_intents()
    assert len(intent.message.fields) == 3
    assert intent.message.fields[1:] == ["", ""]
    assert intent.message.fields[0] == str(intent.message.uuid)


def test_internal_clock_follows_wall_time_and_provided_clock_is_not_updated() -> None:
    log = Log()
    auto: Publisher[JsonMessage, int] = Publisher(log.append)
    auto.publish_committed(lambda _: "p", JsonMessage())
    assert get_clock(log.entries["p"][0].uuid) > 1 << 60  # A 2020s wall time.
    manual: Publisher[JsonMessage, int] = Publisher(log.append, clock=Clock(5))
    manual.publish_committed(lambda _: "q", JsonMessage())
    assert get_clock(log.entries["q"][0].uuid) == 6
    assert manual.producer != auto.producer
    assert manual.producer[0] & 1


def test_mapping_and_validation_errors_propagate_before_stamping() -> None:
    log = Log()
    pub: Publisher[JsonMessage, int] = Publisher(log.append, clock=Clock(0))
    message = JsonMessage()
    with pytest.raises(EmptyPartitionsError):
        pub.publish_committed(modulo_mapping(lambda _: "k", list), message)
    assert message.uuid == NIL_UUID
    assert pub.clock.value == 0

    class Invalid(JsonMessage):
        def validate(self) -> None:
            raise ValueError("nope")

    with pytest.raises(ValueError, match="nope"):
        pub.publish_uncommitted(lambda _: "p", Invalid())
    assert log.entries == {}
    assert pub.build_ack_intents() == []


def test_concurrent_publishers_stamp_in_append_order_per_partition() -> None:
    """Clock order must equal log order in every partition, whatever the thread timing."""
    entries: dict[str, list[int]] = {"p0": [], "p1": []}

    def append(partition: str, message: JsonMessage) -> None:
        clock = get_clock(message.uuid)
        time.sleep(0)  # Not a wait: releases the GIL to invite a race between stamp and append.
        entries[partition].append(clock)

    pub: Publisher[JsonMessage, None] = Publisher(append, clock=Clock(0))
    barrier = threading.Barrier(4)

    def worker(n: int) -> None:
        barrier.wait()
        for i in range(500):
            partition = f"p{(i + n) % 2}"
            pub.publish_committed(to(partition), JsonMessage({"i": i}))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for clocks in entries.values():
        assert len(clocks) == 1000
        assert clocks == sorted(clocks)
        assert len(set(clocks)) == len(clocks)
