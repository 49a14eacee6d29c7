"""The asyncio producer: ``await producer.send(...)`` resolves once the stores hold it.

Built on the same :class:`Producer` (its runner thread, its machines): ``send`` queues the
message exactly as the blocking one does, with an ``asyncio.Future`` instead of a
``concurrent.futures`` one. The runner thread completes the futures of a whole turn with one
``loop.call_soon_threadsafe`` (:class:`_LoopBridge`), so there is no thread and no wake-up of
the event loop per message.

Backpressure never blocks the event loop: at the in-flight bound ``send`` awaits until
deliveries make room (``backpressure="block"``) or raises :class:`BackpressureError`.
Starting (resuming a named producer waits for the stores), flushing and closing wait in the
loop's default executor.
"""

from __future__ import annotations

import asyncio
from typing import Any

from dafka.client._metrics import ProducerMetrics
from dafka.client._producer import HeadersArg, OnDelivery, Producer, checked_settings
from dafka.client._settings import ProducerSettings
from dafka.errors import DafkaError
from dafka.lifecycle import AsyncClosing
from dafka.node import BackpressureError
from dafka.records import RecordMetadata


def _nothing(now: float) -> None:
    del now


class _LoopBridge:
    """Completes asyncio futures from the runner thread, one loop call per turn."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.room = asyncio.Event()

    def complete(
        self, results: list[tuple[Any, RecordMetadata | None, BaseException | None]]
    ) -> None:
        if results:
            self._loop.call_soon_threadsafe(self._complete, results)

    def _complete(
        self, results: list[tuple[Any, RecordMetadata | None, BaseException | None]]
    ) -> None:
        for future, meta, error in results:
            if future.done():  # cancelled by the application
                continue
            if error is None:
                future.set_result(meta)
            else:
                future.set_exception(error)
        self.room.set()


class AsyncProducer(AsyncClosing):
    """``async with AsyncProducer("orders", towers=..., name="w1") as p: await p.send(b"v")``

    Same settings and keyword arguments as :class:`Producer`; construct it inside a running
    event loop.
    """

    def __init__(
        self,
        topic: str,
        *,
        settings: ProducerSettings | None = None,
        on_delivery: OnDelivery | None = None,
        **fields: Any,
    ) -> None:
        self.topic = topic
        self.settings = checked_settings(topic, settings, fields)
        self._on_delivery = on_delivery
        self._loop = asyncio.get_running_loop()
        self._bridge = _LoopBridge(self._loop)
        self._producer: Producer | None = None

    async def start(self) -> None:
        """Join the cluster (and resume a named producer's partitions)."""
        if self._producer is not None:
            return
        producer = await self._loop.run_in_executor(
            None,
            lambda: Producer(self.topic, settings=self.settings, on_delivery=self._on_delivery),
        )
        producer._bridge = self._bridge
        self._producer = producer

    @property
    def producer(self) -> Producer:
        """The blocking producer underneath (its partitions, name, statistics)."""
        if self._producer is None:
            raise DafkaError("AsyncProducer not started: use `async with` or await start()")
        return self._producer

    def send_nowait(
        self,
        value: bytes,
        key: bytes | None = None,
        headers: HeadersArg = None,
        timestamp: int | None = None,
        uuid: bytes | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one message now; the returned future resolves once it is stored.

        Raises :class:`BackpressureError` at the in-flight bound (never blocks the loop).
        """
        future: asyncio.Future[RecordMetadata] = self._loop.create_future()
        self.producer._enqueue(value, key, headers, timestamp, uuid, future, False)
        return future

    async def send(
        self,
        value: bytes,
        key: bytes | None = None,
        headers: HeadersArg = None,
        timestamp: int | None = None,
        uuid: bytes | None = None,
    ) -> RecordMetadata:
        """Queue one message and wait until the stores hold it."""
        room = self._bridge.room
        while True:
            room.clear()  # before trying: a delivery after the failed try sets it again
            try:
                future = self.send_nowait(value, key, headers, timestamp, uuid)
            except BackpressureError:
                if self.settings.backpressure == "error":
                    raise
                await room.wait()
                continue
            return await future

    async def flush(self, timeout: float | None = None) -> int:
        """Send open batches and wait until all is stored; returns the count still in flight.

        On return every future of a stored message is done: the runner thread releases the
        in-flight count just before it hands that turn's completions to this loop, so one
        more runner turn (a ``call``) and this loop's FIFO order make them land first."""
        producer = self.producer
        left = await self._loop.run_in_executor(None, producer.flush, timeout)
        await self._loop.run_in_executor(None, producer._runner.call, _nothing)
        return left

    async def metrics(self) -> ProducerMetrics:
        """:meth:`Producer.metrics` (taken in a worker thread: it asks the node's thread)."""
        return await self._loop.run_in_executor(None, self.producer.metrics)

    async def close(self, timeout: float | None = 10.0) -> None:
        """Flush for up to ``timeout``, fail the rest with ``DeliveryError``, leave."""
        if self._producer is None:
            return
        await self._loop.run_in_executor(None, self._producer.close, timeout)

    async def close_after_error(self) -> None:
        """The ``async with`` block raised: leave without waiting for the stores."""
        await self.close(timeout=0)


__all__ = ["AsyncProducer"]
