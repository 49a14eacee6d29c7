"""Consumer.pause/resume/paused on a real cluster (tower and two stores in their processes):
a paused partition hands out nothing while the others flow, and after resume every one of
its messages comes once, in order - also one paused in the middle of a batch."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dafka import AsyncConsumer, Consumer, Producer, Record
from dafka.server import LocalCluster
from tests.integration.client.test_consumer_cluster import DEADLINE, client

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(stores=2, beacon_interval=0.2) as running:
        yield running


def produce(
    cluster: LocalCluster, topic: str, name: str, values: list[bytes]
) -> dict[str, list[bytes]]:
    """``values`` spread over the two partitions ``name.0``/``name.1`` (even ones to one,
    odd ones to the other), stored; returns what each partition got."""
    sent: dict[str, list[bytes]] = {f"{name}.0": [], f"{name}.1": []}
    with Producer(topic, name=name, partitions=2, **client(cluster)) as producer:
        keys = [b"0", b"1"]
        while producer.partition_for(keys[0]) == producer.partition_for(keys[1]):
            keys[1] += b"1"
        for i, value in enumerate(values):
            key = keys[i % 2]
            producer.send(value, key=key)
            sent[producer.partition_for(key)].append(value)
        assert producer.flush(DEADLINE) == 0
    return sent


def values_of(records: list[Record], partition: str) -> list[bytes]:
    return [r.value for r in records if r.partition == partition]


def read_until(consumer: Consumer, done: Any, max_records: int = 10_000) -> list[Record]:
    got: list[Record] = []
    deadline = time.monotonic() + DEADLINE
    while not done(got):
        if time.monotonic() > deadline:
            raise AssertionError(f"only {len(got)} records")
        got += consumer.poll(timeout=0.2, max_records=max_records)
    return got


def test_a_paused_partition_waits_while_the_other_flows(cluster: LocalCluster) -> None:
    topic = "pause-flow"
    sent = produce(cluster, topic, "pf", [b"v%d" % i for i in range(40)])
    first, second = "pf.0", "pf.1"
    with Consumer(topic, **client(cluster, offset_reset="earliest")) as consumer:
        consumer.pause([(topic, first)])
        assert consumer.paused() == {(topic, first)}
        got = read_until(consumer, lambda g: len(values_of(g, second)) >= 20)
        assert values_of(got, first) == []
        # the other partition flows on; the paused one stays quiet even with new records
        more = produce(cluster, topic, "pf", [b"w%d" % i for i in range(10)])
        got += read_until(consumer, lambda g: len(values_of(got + g, second)) >= 25)
        got += consumer.poll(timeout=1.0)
        assert values_of(got, first) == []
        consumer.resume([(topic, first)])
        assert consumer.paused() == set()
        got += read_until(consumer, lambda g: len(values_of(got + g, first)) >= 25)
        got += consumer.poll(timeout=0.5)
    assert values_of(got, first) == sent[first] + more[first]
    assert values_of(got, second) == sent[second] + more[second]


def test_pause_in_the_middle_of_a_batch_loses_and_repeats_nothing(cluster: LocalCluster) -> None:
    topic = "pause-cut"
    sent = produce(cluster, topic, "pc", [b"c%d" % i for i in range(200)])
    with Consumer(topic, **client(cluster, offset_reset="earliest")) as consumer:
        # cuts a batch; a lone first message (a RECORD of its own) makes it two polls, and
        # the second may take a 4th message: what was handed out before the pause is `before`
        got = read_until(consumer, lambda g: len(g) >= 3, max_records=3)
        before = list(got)
        key = (topic, got[0].partition)
        consumer.pause([key])
        later = read_until(consumer, lambda g: len(values_of(g, key[1])) == 0 and len(g) > 0)
        assert values_of(later, key[1]) == []
        got += later + consumer.poll(timeout=0.5)
        assert values_of(got, key[1]) == values_of(before, key[1])
        consumer.resume([key])
        got += read_until(consumer, lambda g: len(values_of(got + g, key[1])) >= 100)
        got += consumer.poll(timeout=0.5)
    assert values_of(got, key[1]) == sent[key[1]]


def test_async_consumer_pauses_and_resumes(cluster: LocalCluster) -> None:
    topic = "pause-async"
    sent = produce(cluster, topic, "pa", [b"a%d" % i for i in range(20)])

    async def run() -> list[Record]:
        async with AsyncConsumer(topic, **client(cluster, offset_reset="earliest")) as consumer:
            await consumer.pause([(topic, "pa.0"), (topic, "pa.1")])
            assert consumer.paused() == {(topic, "pa.0"), (topic, "pa.1")}
            assert await consumer.poll(timeout=1.5) == []
            await consumer.resume([(topic, "pa.0"), (topic, "pa.1")])
            got: list[Record] = []
            deadline = time.monotonic() + DEADLINE
            while len(got) < 20 and time.monotonic() < deadline:
                got += await consumer.poll(timeout=0.2)
            return got

    got = asyncio.run(run())
    assert values_of(got, "pa.0") == sent["pa.0"]
    assert values_of(got, "pa.1") == sent["pa.1"]
