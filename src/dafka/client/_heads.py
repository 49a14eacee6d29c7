"""HeadWatcher: the partitions of some topics and their heads, kept up to date in a thread.

For planners (the Spark driver) that must know how far each partition goes without reading
it. The runner thread drives a :class:`~dafka.node.HeadsMachine`; after every turn in which a
head moved, it publishes a fresh snapshot that :meth:`HeadWatcher.heads` returns without a
round-trip to that thread: a Spark driver asks every ~10 ms when idle, and a dict copy is all
it costs.

"Quiet" tells a planner that the first answers are in: :meth:`wait_quiet` returns once the
watcher has run ``quiet`` seconds without learning anything new (or at its deadline), which is
how a query's first offsets include the partitions the stores already hold.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from types import TracebackType

from dafka.node import HeadsMachine, HeadsStatistics
from dafka.protocol import new_node_id
from dafka.transport.config import TransportConfig
from dafka.transport.runner import Identity, NodeRunner
from dafka.transport.sockets import ZmqContext


class HeadWatcher:
    """``with HeadWatcher(["orders"], transport) as w: w.heads()[("orders", "w1.0")]``"""

    def __init__(
        self,
        topics: Iterable[str] = (),
        transport: TransportConfig | None = None,
        *,
        matching: Callable[[str], bool] | None = None,
        refresh: float = 0.2,
        context: ZmqContext | None = None,
        ready_timeout: float | None = 10.0,
    ) -> None:
        self.node_id = new_node_id()
        self._machine = HeadsMachine(self.node_id, refresh)
        self._snapshot: dict[tuple[str, str], int] = {}
        self._changed = threading.Condition()
        self._started = self._last_change = time.monotonic()
        self._version = 0
        self._stores = 0
        self._runner = NodeRunner(
            self._machine,
            [Identity(self.node_id)],
            transport or TransportConfig(),
            context=context,
            after_turn=self._after_turn,
            name="heads",
        )
        self._runner.start(ready_timeout)
        for topic in topics:
            self._subscribe(topic)
        if matching is not None:
            self._runner.call(lambda now: self._machine.watch_matching(matching, now))

    def _subscribe(self, topic: str) -> None:
        self._runner.call(lambda now: self._machine.subscribe(topic, now))

    def heads(self) -> dict[tuple[str, str], int]:
        """(topic, partition) -> highest sequence known to exist (a snapshot; no wait)."""
        return self._snapshot

    def wait_quiet(
        self,
        quiet: float = 0.5,
        timeout: float = 5.0,
        *,
        at_least: float = 0.0,
        min_stores: int = 0,
    ) -> dict[tuple[str, str], int]:
        """Wait until nothing new was learnt for ``quiet`` seconds (at most ``timeout``), at
        least ``at_least`` seconds after the watcher started, and ``min_stores`` stores
        greeted it (their answers are then in: a partition they did not name has no data)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                now = time.monotonic()
                settled = (
                    now - self._last_change >= quiet
                    and now >= self._started + at_least
                    and self._stores >= min_stores
                )
                if now >= deadline or settled:
                    return self._snapshot
                wake = max(self._last_change + quiet, self._started + at_least)
                if self._stores < min_stores:
                    wake = deadline  # woken by the greeting itself
                self._changed.wait(max(min(deadline, wake) - now, 0.001))

    def wait_for(
        self, ready: Callable[[dict[tuple[str, str], int]], bool], timeout: float
    ) -> dict[tuple[str, str], int]:
        """Wait (up to ``timeout``) until ``ready(heads)``; returns the last snapshot."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not ready(self._snapshot):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(remaining)
            return self._snapshot

    @property
    def stores(self) -> int:
        """How many stores greeted this watcher so far."""
        return self._stores

    def statistics(self) -> HeadsStatistics:
        return self._runner.call(lambda _now: self._machine.statistics())

    def close(self) -> None:
        self._runner.stop()

    def __enter__(self) -> HeadWatcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- runner thread ---------------------------------------------------------------------

    def _after_turn(self, now: float) -> None:
        del now
        version = self._machine.version
        if version != self._version:
            self._version = version
            heads = self._machine.heads()
            with self._changed:
                self._snapshot = heads
                self._stores = self._machine.stores
                self._last_change = time.monotonic()
                self._changed.notify_all()


__all__ = ["HeadWatcher"]
