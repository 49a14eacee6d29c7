"""AsyncProducer under asyncio, on a real cluster (loopback sockets)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dafka import AsyncProducer, BackpressureError, DeliveryError, RecordMetadata
from tests.integration.client.test_producer import FAST, Cluster, read_back


def test_await_send_resolves_on_storage(tmp_path: Path) -> None:
    with Cluster(tmp_path, stores=2) as cluster:

        async def main() -> list[RecordMetadata]:
            async with AsyncProducer("aio", towers=cluster.towers, partitions=2, **FAST) as p:
                first = await p.send(b"first", key=b"k")
                heads = [s.heads("aio").get(first.partition, -1) for s in cluster.stores]
                assert max(heads) >= first.offset  # stored when the await returned
                many = await asyncio.gather(
                    *(p.send(b"m%d" % i, key=b"k%d" % (i % 5)) for i in range(300))
                )
                assert await p.flush(5) == 0
                return [first, *many]

        metas = asyncio.run(main())
        records = read_back(cluster, "aio", 301)
        assert {(r.partition, r.offset, r.index) for r in records} == {
            (m.partition, m.offset, m.index) for m in metas
        }


def test_send_nowait_pipelines_and_backpressure_awaits(tmp_path: Path) -> None:
    with Cluster(tmp_path, stores=1) as cluster:

        async def main() -> int:
            async with AsyncProducer(
                "aio-bp", towers=cluster.towers, max_in_flight=50, linger_ms=1, **FAST
            ) as p:
                futures = [p.send_nowait(b"x%d" % i) for i in range(50)]
                with pytest.raises(BackpressureError):
                    p.send_nowait(b"one too many")
                # send() awaits room instead of raising or blocking the loop
                last = await p.send(b"after room")
                metas = await asyncio.gather(*futures)
                assert last.offset >= max(m.offset for m in metas)
                return len(metas) + 1

        assert asyncio.run(main()) == 51
        assert len(read_back(cluster, "aio-bp", 51)) == 51


def test_async_futures_fail_on_close_without_stores(tmp_path: Path) -> None:
    with Cluster(tmp_path, stores=0) as cluster:

        async def main() -> None:
            p = AsyncProducer("aio-gone", towers=cluster.towers, **FAST)
            await p.start()
            pending = p.send_nowait(b"never stored")
            await p.close(timeout=0)
            with pytest.raises(DeliveryError):
                await asyncio.wait_for(pending, 10)

        asyncio.run(main())


def test_flush_returns_with_every_stored_future_done(tmp_path: Path) -> None:
    with Cluster(tmp_path, stores=1) as cluster:

        async def main() -> None:
            async with AsyncProducer("aio-flush", towers=cluster.towers, **FAST) as p:
                for _ in range(3):
                    futures = [p.send_nowait(b"v%d" % i) for i in range(2000)]
                    assert await p.flush(20) == 0
                    assert all(f.done() for f in futures)  # no await needed after flush
                    assert len({f.result() for f in futures}) == 2000

        asyncio.run(main())
