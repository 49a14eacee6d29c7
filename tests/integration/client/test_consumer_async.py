"""AsyncConsumer under asyncio against a real cluster (tower + stores in their own processes)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from dafka import AsyncConsumer
from dafka.records import Record, encode_batch
from dafka.server import LocalCluster
from tests.integration.client.test_consumer_cluster import DEADLINE, client, raw_producer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(stores=1, beacon_interval=0.2) as running:
        yield running


def test_async_for_and_await_poll_read_live_and_stored_records(cluster: LocalCluster) -> None:
    topic = "async"

    async def scenario() -> tuple[list[Record], list[Record], bool, int]:
        with raw_producer(cluster, topic) as producer:
            producer.publish(encode_batch([b"a", b"b"]), b"plain")
            producer.wait_stored()
            async with AsyncConsumer(topic, **client(cluster, offset_reset="earliest")) as c:
                first: list[Record] = []
                async with asyncio.timeout(DEADLINE):
                    async for record in c:
                        first.append(record)
                        if len(first) == 3:
                            break
                # a poll waiting on an empty queue is woken by a live record
                waiting = asyncio.ensure_future(c.poll(timeout=DEADLINE))
                await asyncio.sleep(0)
                assert not waiting.done()
                producer.publish(b"live")
                later = await asyncio.wait_for(waiting, DEADLINE)
                async with asyncio.timeout(DEADLINE):
                    while not await c.at_end():
                        await asyncio.sleep(0.02)
                position = await c.position(topic, producer.id)
        return first, later, True, position

    first, later, end, position = asyncio.run(scenario())
    assert [(r.offset, r.index, r.value) for r in first] == [
        (0, 0, b"a"),
        (0, 1, b"b"),
        (1, 0, b"plain"),
    ]
    assert [r.value for r in later] == [b"live"]
    assert position == 3
    assert end
