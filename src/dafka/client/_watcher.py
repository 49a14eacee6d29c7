"""Watcher: what ClusterWatcher and HeadWatcher share.

Both run a node in a thread that publishes a fresh snapshot after every turn in which it
learnt something, and both let a caller in another thread wait until the snapshot went
"quiet" (nothing new for a while): the first answers of the peers are then in. This base
holds that snapshot, the condition its readers wait on, the quiet wait and the close/``with``
plumbing; a subclass builds its runner and decides what counts as a change.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from dafka.lifecycle import Closing
from dafka.transport.runner import NodeRunner

S = TypeVar("S")


class Watcher(Closing, Generic[S]):
    """A snapshot ``S`` kept up to date by ``self._runner`` (set by the subclass)."""

    _runner: NodeRunner

    def __init__(self, snapshot: S) -> None:
        self._snapshot = snapshot
        # An RLock (Condition's default): a subclass may hold it around _publish to change
        # more state in the same step.
        self._changed = threading.Condition()
        self._started = self._last_change = time.monotonic()

    def _publish(self, snapshot: S, changed: float) -> None:
        """Runner thread: ``snapshot`` is the latest, learnt at ``changed`` (monotonic)."""
        with self._changed:
            self._snapshot = snapshot
            self._last_change = changed
            self._changed.notify_all()

    def _wait_quiet(
        self,
        quiet: float,
        timeout: float,
        at_least: float,
        ready: Callable[[], bool] | None = None,
        poll: float | None = None,
    ) -> S:
        """Wait until nothing new for ``quiet`` seconds, at least ``at_least`` seconds after
        start and ``ready()`` (checked under the lock; a publish wakes it), at most
        ``timeout`` seconds; returns the latest snapshot. ``poll``: how often ``ready`` is
        asked again while it is false (for a ready that also depends on time), else only a
        publish wakes the wait."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                now = time.monotonic()
                is_ready = ready is None or ready()
                settled = (
                    is_ready
                    and now - self._last_change >= quiet
                    and now >= self._started + at_least
                )
                if now >= deadline or settled:
                    return self._snapshot
                wake = max(self._last_change + quiet, self._started + at_least)
                if not is_ready:  # woken by the publish that makes it ready, or polled
                    wake = deadline if poll is None else now + poll
                self._changed.wait(max(min(deadline, wake) - now, 0.001))

    def close(self) -> None:
        self._runner.stop()


__all__ = ["Watcher"]
