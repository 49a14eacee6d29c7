"""The asyncio consumer: the same machine, runner and queue as :class:`Consumer`.

Bridging: the runner thread, when records land in an empty queue (or the node fails, or the
consumer closes), schedules ``event.set()`` on the application's loop with
``call_soon_threadsafe`` - one hand-over per burst, not per record. ``poll`` takes what is
queued without blocking (the same ``_built`` that builds Records in bulk) and otherwise
awaits the event. Calls that need the node thread (``seek``, ``positions``, ``heads``,
``at_end``...) and starting/closing (which wait for a tower's welcome / the thread's exit)
run in the loop's default executor so the loop never blocks on them.

``async with AsyncConsumer(["orders"], towers=...) as consumer:`` starts it (or ``await
consumer.start()``); ``async for record in consumer`` iterates until it is closed; ``await
consumer.poll_columns()`` is :meth:`Consumer.poll_columns` (the same ``_take_parts``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, TypeVar

from dafka.client._consumer import Consumer, Key, PollStatistics, checked_reads
from dafka.client._metrics import ConsumerMetrics
from dafka.client._offsets import Position
from dafka.client._read_committed import ReadCommittedConsumer
from dafka.client._settings import ConsumerSettings, resolve_settings
from dafka.errors import DafkaError, NodeFailedError
from dafka.lifecycle import AsyncClosing
from dafka.node import ConsumerStatistics, GroupStatistics
from dafka.records import CommittedOffset, Record, RecordColumns

_Taken = TypeVar("_Taken", list[Record], RecordColumns)


class AsyncConsumer(AsyncClosing):
    """asyncio flavour of :class:`Consumer`; takes the same arguments.

    It wraps a blocking consumer, chosen by the settings: a :class:`ReadCommittedConsumer`
    when ``isolation_level="read_committed"`` (its arguments, such as ``checkpoint=``, are
    then accepted too), a :class:`Consumer` otherwise. :attr:`consumer` is typed
    :class:`Consumer`, which both are.
    """

    quiet_errors = (NodeFailedError,)  # after an error in the block: it says more

    def __init__(
        self,
        topics: Iterable[str] | str | None = None,
        *,
        assign: Mapping[Key, int] | None = None,
        end_offsets: Mapping[Key, int] | None = None,
        **kwargs: Any,
    ) -> None:
        checked_reads(topics, assign, end_offsets)  # fail when built, as Consumer does
        known = {f.name for f in dataclasses.fields(ConsumerSettings)} | {"config_file"}
        fields = {k: kwargs.pop(k) for k in list(kwargs) if k in known}
        settings = resolve_settings(ConsumerSettings, kwargs.pop("settings", None), fields)
        kind: type[Consumer] = Consumer
        if settings.isolation_level == "read_committed":
            kind = ReadCommittedConsumer
        self._make = functools.partial(
            kind, topics, settings=settings, assign=assign, end_offsets=end_offsets, **kwargs
        )
        self._consumer: Consumer | None = None
        self._event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        """Join the cluster (waits for a tower's welcome in an executor thread)."""
        if self._consumer is not None:
            return
        loop = asyncio.get_running_loop()
        self._loop = loop
        consumer = await loop.run_in_executor(None, self._make)
        consumer._wakeup = self._wake
        self._consumer = consumer
        self._event.set()  # records may have arrived before the hook was set

    def _wake(self) -> None:
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: no one is waiting any more
            loop.call_soon_threadsafe(self._event.set)

    @property
    def consumer(self) -> Consumer:
        """The underlying blocking consumer (same node); raises before :meth:`start`."""
        if self._consumer is None:
            raise DafkaError("AsyncConsumer not started: use 'async with' or 'await start()'")
        return self._consumer

    @property
    def consumer_id(self) -> str:
        return self.consumer.consumer_id

    async def poll(self, timeout: float | None = 1.0, max_records: int = 10_000) -> list[Record]:
        """Like :meth:`Consumer.poll`, awaiting instead of blocking."""
        consumer = self.consumer
        found: list[Record] = await self._poll(consumer._poll_now, timeout, max_records)
        return found

    async def poll_columns(
        self, timeout: float | None = 1.0, max_records: int = 10_000
    ) -> RecordColumns:
        """Like :meth:`Consumer.poll_columns`, awaiting instead of blocking."""
        consumer = self.consumer
        found: RecordColumns = await self._poll(consumer._poll_columns_now, timeout, max_records)
        return found

    async def _poll(
        self, take: Callable[[int], _Taken], timeout: float | None, max_records: int
    ) -> _Taken:
        """``take(max_records)`` (which never blocks) until it finds messages or time is up."""
        consumer = self.consumer
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        event = self._event
        while True:
            if consumer._rebalance_due():  # callbacks and commits: in a worker thread
                await self._run(consumer._rebalance)
            found = take(max_records)
            if found or consumer._closed:
                return found
            event.clear()
            found = take(max_records)  # what arrived before the clear
            if found:
                return found
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return found
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                return take(max_records)

    def __aiter__(self) -> AsyncIterator[Record]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Record]:
        consumer = self.consumer
        while not consumer._closed:
            for record in await self.poll(timeout=0.5):
                yield record

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    async def seek(self, topic: str, partition: str, offset: int) -> None:
        await self._run(self.consumer.seek, topic, partition, offset)

    async def pause(self, partitions: Iterable[Key]) -> None:
        """:meth:`Consumer.pause`."""
        keys = list(partitions) if not isinstance(partitions, tuple) else partitions
        await self._run(self.consumer.pause, keys)

    async def resume(self, partitions: Iterable[Key]) -> None:
        """:meth:`Consumer.resume`."""
        keys = list(partitions) if not isinstance(partitions, tuple) else partitions
        await self._run(self.consumer.resume, keys)

    def paused(self) -> set[Key]:
        """:meth:`Consumer.paused` (no wait: read under the consumer's lock)."""
        return self.consumer.paused()

    async def offsets_for_times(
        self, times: Mapping[Key, int], timeout: float = 10.0
    ) -> dict[Key, int | None]:
        """:meth:`Consumer.offsets_for_times` (in a worker thread)."""
        result: dict[Key, int | None] = await self._run(
            self.consumer.offsets_for_times, times, timeout
        )
        return result

    async def seek_to_timestamp(
        self, timestamp: int, partitions: Iterable[Key] | None = None, timeout: float = 10.0
    ) -> dict[Key, int]:
        """:meth:`Consumer.seek_to_timestamp` (in a worker thread)."""
        keys = None if partitions is None else list(partitions)
        result: dict[Key, int] = await self._run(
            self.consumer.seek_to_timestamp, timestamp, keys, timeout
        )
        return result

    async def position(self, topic: str, partition: str) -> int:
        result: int = await self._run(self.consumer.position, topic, partition)
        return result

    async def positions(self) -> dict[Key, int]:
        result: dict[Key, int] = await self._run(self.consumer.positions)
        return result

    async def heads(self) -> dict[Key, int]:
        result: dict[Key, int] = await self._run(self.consumer.heads)
        return result

    async def at_end(self) -> bool:
        result: bool = await self._run(self.consumer.at_end)
        return result

    async def statistics(self) -> ConsumerStatistics:
        result: ConsumerStatistics = await self._run(self.consumer.statistics)
        return result

    async def group_statistics(self) -> GroupStatistics | None:
        """:meth:`Consumer.group_statistics` (asked in a worker thread)."""
        result: GroupStatistics | None = await self._run(self.consumer.group_statistics)
        return result

    def poll_statistics(self) -> PollStatistics:
        return self.consumer.poll_statistics()

    async def metrics(self) -> ConsumerMetrics:
        """:meth:`Consumer.metrics` (taken in a worker thread: it asks the node's thread)."""
        result: ConsumerMetrics = await self._run(self.consumer.metrics)
        return result

    async def commit(
        self,
        offsets: Mapping[Key, Position] | None = None,
        *,
        timeout: float | None = None,
        metadata: str = "",
    ) -> None:
        """:meth:`Consumer.commit`: awaits until the stores hold the commit."""
        consumer = self.consumer
        await self._run(
            functools.partial(consumer.commit, offsets, timeout=timeout, metadata=metadata)
        )

    def commit_async(
        self, offsets: Mapping[Key, Position] | None = None, *, metadata: str = ""
    ) -> asyncio.Future[None]:
        """:meth:`Consumer.commit_async`, as an asyncio future of this loop."""
        return asyncio.wrap_future(self.consumer.commit_async(offsets, metadata=metadata))

    async def committed(
        self, partitions: Iterable[Key] | None = None, *, timeout: float | None = None
    ) -> dict[Key, CommittedOffset | None]:
        """:meth:`Consumer.committed` (read in a worker thread)."""
        keys = None if partitions is None else list(partitions)
        consumer = self.consumer
        result: dict[Key, CommittedOffset | None] = await self._run(
            functools.partial(consumer.committed, keys, timeout=timeout)
        )
        return result

    async def seek_to_committed(
        self, partitions: Iterable[Key], *, timeout: float | None = None
    ) -> list[Key]:
        """:meth:`Consumer.seek_to_committed`."""
        keys = list(partitions)
        consumer = self.consumer
        result: list[Key] = await self._run(
            functools.partial(consumer.seek_to_committed, keys, timeout=timeout)
        )
        return result

    async def close(self) -> None:
        if self._consumer is None:
            return
        await self._run(self._consumer.close)


__all__ = ["AsyncConsumer"]
