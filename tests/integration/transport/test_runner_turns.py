"""A runner turn is bounded: work that posts itself again runs once per turn, not forever.

A producer hands a long queue to its machine in slices, each slice posting the next. Were
the posted callables drained until none was left, one turn would last as long as the whole
queue, with no beacon and no socket read meanwhile, and the stores would expire the
producer (dropping everything queued for it). Here a consumer's runner is kept busy by a
callable that always posts itself again, and must still discover a producer and receive.
"""

from __future__ import annotations

import time

import pytest

from dafka.client import Consumer, PartitionProducer
from dafka.node import ConsumerConfig
from dafka.records import Record
from dafka.transport.config import TransportConfig
from dafka.transport.tower import Tower
from tests.integration.transport.transport_helpers import loopback, wait_for


@pytest.fixture
def transport(tower: Tower) -> TransportConfig:
    return loopback(tower)


def test_a_self_posting_callable_does_not_starve_the_turn(transport: TransportConfig) -> None:
    with Consumer(
        "turns", transport=transport, config=ConsumerConfig(offset_reset="earliest")
    ) as consumer:
        runner = consumer._runner
        turns = 0
        stop = False

        def busy(_now: float) -> None:
            nonlocal turns
            turns += 1
            if not stop:
                runner.post(busy)

        runner.post(busy)
        try:
            wait_for(lambda: turns > 10, "the busy callable to run")
            producer = PartitionProducer("turns", transport)
            try:
                producer.publish(b"while busy")
                got: list[Record] = []
                deadline = time.monotonic() + 10
                while not got and time.monotonic() < deadline:
                    got = consumer.poll(timeout=0.1)
                assert [r.value for r in got] == [b"while busy"]
            finally:
                producer.close(flush_timeout=None)  # no store here: nothing will ACK
        finally:
            stop = True
