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

import time
from collections.abc import Callable, Iterable

from dafka.client._cluster import listening_first
from dafka.client._watcher import Watcher
from dafka.node import HeadsMachine, HeadsStatistics
from dafka.protocol import new_node_id
from dafka.transport.config import TransportConfig
from dafka.transport.runner import Identity, NodeRunner
from dafka.transport.sockets import ZmqContext

STALLED_ROUND = 1.0
"""Seconds :meth:`HeadWatcher.refresh` waits for the "that is all" of every store that
greeted it before it falls back to a window of silence (a store that left still counts as
greeted)."""


class HeadWatcher(Watcher[dict[tuple[str, str], int]]):
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
        super().__init__({})
        self._version = 0
        self._stores = 0
        self._may_be_ours = True
        """HeadsMachine.may_be_ours (the runner thread publishes it)."""
        self._all_ours = False
        """HeadsMachine.all_ours (the runner thread publishes it)."""
        self._greeted_at: float | None = None
        """When the first store greeted this watcher (monotonic)."""
        self.last_refresh_answered = False
        """The last :meth:`refresh` ended on every store's "that is all", not on silence."""
        self.refreshes_settled = 0
        """How many :meth:`refresh` calls ended on their window of silence (or their
        timeout) rather than on every store's "that is all": each waited ``settle``."""
        self._answered = 0
        """The last :meth:`refresh` round every store answered (HeadsMachine.answered_round)."""
        joining = transport or TransportConfig()
        self.discovery_time = 0.0
        """Seconds after the start by which the stores have named their topics to a
        ``matching`` watcher: a store asks each new peer for the heads of every topic it
        holds once it has our beacon, which a watcher listening first sends after
        ``listen_first``; two beacon intervals more cover the store's own turn (0 for named
        topics, which need no discovery)."""
        if matching is not None:  # stores' GET-HEADS to a new peer name their topics
            joining = listening_first(joining)
            self.discovery_time = joining.listen_first + 2 * joining.beacon_interval
        self._runner = NodeRunner(
            self._machine,
            [Identity(self.node_id)],
            joining,
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

    def subscribe(self, topic: str) -> None:
        """Watch ``topic`` too (its heads are asked at once)."""
        self._subscribe(topic)

    @property
    def topics(self) -> tuple[str, ...]:
        return self._runner.call(lambda _now: self._machine.topics)

    def refresh(self, settle: float, timeout: float) -> dict[tuple[str, str], int]:
        """Ask the stores for every head now and return the snapshot once they answered
        (at most ``timeout``): how a reader gets heads no older than its call, not up to
        ``refresh`` seconds old.

        When every store that greeted the watcher says "that is all" (HEADS-END, our
        stores; or none has said anything yet), that is when they answered: no window of
        silence (:attr:`last_refresh_answered`). Otherwise (a C store, a store started
        less than two beacon intervals ago), or when the answers do not all come within
        ``STALLED_ROUND`` (a store that greeted left), the snapshot is returned once
        ``settle`` seconds passed after the ask with nothing new learnt, as before."""
        asked = time.monotonic()
        round_ = self._runner.call(self._machine.ask_now)
        deadline = asked + timeout
        with self._changed:
            while True:
                now = time.monotonic()
                self.last_refresh_answered = self._answered >= round_
                if self.last_refresh_answered:
                    return self._snapshot
                quiet_from = max(asked, self._last_change)
                wait_answer = self._may_be_ours and now < asked + STALLED_ROUND
                if (not wait_answer and now - quiet_from >= settle) or now >= deadline:
                    self.refreshes_settled += 1
                    return self._snapshot
                wake = deadline if wait_answer else min(quiet_from + settle, deadline)
                if wait_answer:
                    wake = min(wake, asked + STALLED_ROUND)
                self._changed.wait(max(wake - now, 0.001))

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
        greeted it and answered (a partition they did not name has no data).

        A store's greeting comes before its heads (it answers our CONSUMER-HELLO): "answered"
        is every greeted store's "that is all" (HEADS-END), or ``STALLED_ROUND`` seconds
        after the first greeting for a store that never says it (a C store, one that has
        not run ``peers_settle`` yet). Before, quiet alone decided: on a loaded machine the
        heads came more than ``quiet`` after the greeting and a plan held no partition."""
        if min_stores <= 0:
            return self._wait_quiet(quiet, timeout, at_least)

        def answered() -> bool:
            greeted = self._greeted_at
            return (
                self._stores >= min_stores
                and greeted is not None
                and (self._all_ours or time.monotonic() >= greeted + STALLED_ROUND)
            )

        return self._wait_quiet(quiet, timeout, at_least, answered, poll=0.05)

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

    # -- runner thread ---------------------------------------------------------------------

    def _after_turn(self, now: float) -> None:
        del now
        machine = self._machine
        version = machine.version
        if version != self._version:
            self._version = version
            heads = machine.heads()
            with self._changed:  # the store count and the heads it brought at once
                self._stores = machine.stores
                if self._stores and self._greeted_at is None:
                    self._greeted_at = time.monotonic()
                self._may_be_ours = machine.may_be_ours
                self._all_ours = machine.all_ours
                self._answered = machine.answered_round
                self._publish(heads, time.monotonic())


__all__ = ["STALLED_ROUND", "HeadWatcher"]
