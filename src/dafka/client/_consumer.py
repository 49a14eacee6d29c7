"""The public consumer: subscribe to topics and receive their records, in order, once.

The runner thread feeds the ``ConsumerMachine``; its ``Deliver`` batches are queued here and
the application takes them with :meth:`Consumer.poll` or by iterating. The queue is bounded
(``max_queued`` records): when the application falls behind, the runner stops reading the
data sockets, ZeroMQ's high-water marks drop what does not fit, and the machine FETCHes it
again once the application has caught up - memory stays bounded on every node.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from itertools import repeat
from types import TracebackType

import zmq

from dafka.client._ids import new_node_id
from dafka.client._records import ConsumedRecord
from dafka.errors import NodeFailedError
from dafka.node import (
    ConsumerConfig,
    ConsumerMachine,
    ConsumerStatistics,
    Deliver,
    PartitionPosition,
)
from dafka.transport.config import TransportConfig
from dafka.transport.runner import Identity, NodeRunner, RunnerStats


class Consumer:
    """``with Consumer(["hello"], transport, ConsumerConfig(offset_reset="earliest")) as c:``"""

    def __init__(
        self,
        topics: Iterable[str] | str,
        transport: TransportConfig | None = None,
        config: ConsumerConfig | None = None,
        *,
        start_positions: Mapping[tuple[str, str], int] | None = None,
        consumer_id: str | None = None,
        max_queued: int = 200_000,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
        ready_timeout: float | None = 10.0,
    ) -> None:
        self.consumer_id = consumer_id or new_node_id()
        self._machine = ConsumerMachine(
            self.consumer_id, config or ConsumerConfig(), start_positions=start_positions
        )
        self._batches: collections.deque[Deliver] = collections.deque()
        self._queued = 0
        self._max_queued = max_queued
        self._ready = threading.Condition()
        self._current: Deliver | None = None
        self._offset = 0
        self._closed = False
        self._runner = NodeRunner(
            self._machine,
            [Identity(self.consumer_id)],
            transport or TransportConfig(),
            context=context,
            on_deliver=self._on_deliver,
            receive_paused=self._paused,
            name="consumer",
        )
        self._runner.failure.add_listener(self._on_failure)
        self._runner.start(ready_timeout)  # stops its thread itself when it raises
        try:
            for topic in [topics] if isinstance(topics, str) else list(topics):
                self.subscribe(topic)
        except BaseException:
            self._runner.stop()  # a failed __init__ leaves no thread behind
            raise

    def subscribe(self, topic: str) -> None:
        self._runner.call(lambda now: self._machine.subscribe(topic, now))

    def unsubscribe(self, topic: str) -> None:
        self._runner.call(lambda now: self._machine.unsubscribe(topic, now))

    def seek(self, topic: str, partition: str, next_sequence: int) -> None:
        """Read ``partition`` of ``topic`` from ``next_sequence`` on."""
        self._runner.call(lambda now: self._machine.seek(topic, partition, next_sequence, now))

    def positions(self) -> dict[tuple[str, str], PartitionPosition]:
        """Where each partition stands, (topic, partition) -> position."""
        return self._runner.call(lambda _now: self._machine.positions())

    def statistics(self) -> ConsumerStatistics:
        return self._runner.call(lambda _now: self._machine.statistics())

    def transport_statistics(self) -> RunnerStats:
        """The runner's counters: messages received and sent, peers connected..."""
        return self._runner.statistics()

    def poll(self, timeout: float | None = None, max_records: int = 10_000) -> list[ConsumedRecord]:
        """Records received so far (at most ``max_records``); waits up to ``timeout`` for one.

        Raises :class:`NodeFailedError` (at once, also while waiting) if the node died.
        """
        out: list[ConsumedRecord] = []
        deadline = None if timeout is None else time.monotonic() + timeout
        failure = self._runner.failure
        with self._ready:
            failure.check()
            while self._current is None and not self._batches:
                failure.check()
                if self._closed:
                    return out
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return out
                self._ready.wait(remaining)
            while len(out) < max_records:
                if self._current is None:
                    if not self._batches:
                        break
                    self._current = self._batches.popleft()
                    self._offset = 0
                batch = self._current
                contents = batch.contents
                take = contents[self._offset : self._offset + max_records - len(out)]
                first = batch.first_sequence + self._offset
                topic, partition = batch.topic, batch.producer
                # map() over repeat()s builds the tuples without a generator frame per record
                out.extend(
                    map(
                        ConsumedRecord,
                        repeat(topic),
                        repeat(partition),
                        range(first, first + len(take)),
                        take,
                    )
                )
                self._offset += len(take)
                if self._offset >= len(contents):
                    self._current = None
            self._queued -= len(out)
        return out

    def __iter__(self) -> Iterator[ConsumedRecord]:
        while not self._closed:
            yield from self.poll(timeout=0.5)

    def close(self) -> None:
        """Leave the cluster; raises :class:`NodeFailedError` if the node had died."""
        failure = self._runner.failure
        if self._closed:
            failure.check()
            return
        self._closed = True
        with self._ready:
            self._ready.notify_all()
        self._runner.stop()
        failure.check()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
            return
        with contextlib.suppress(NodeFailedError):  # the error in flight says more
            self.close()

    # -- runner thread ---------------------------------------------------------------------

    def _on_failure(self, _error: NodeFailedError) -> None:
        """The runner died: wake every ``poll`` waiting for records."""
        with self._ready:
            self._ready.notify_all()

    def _on_deliver(self, batch: Deliver) -> None:
        with self._ready:
            self._batches.append(batch)
            self._queued += len(batch.contents)
            self._ready.notify()

    def _paused(self) -> bool:
        return self._queued >= self._max_queued


__all__ = ["Consumer"]
