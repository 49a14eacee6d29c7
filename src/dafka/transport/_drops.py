"""Counted, rate-limited drops: what a node does with input it cannot use.

Whatever a peer sends that fails validation (an undecodable frame, a beacon naming an
endpoint ZeroMQ cannot connect to, a subscription whose answer cannot be encoded) is
dropped, counted in the runner's statistics, and logged - but at most once per
``interval`` seconds per kind, with the count since the last line, so that a hostile or
broken peer flooding us cannot flood the log too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("dafka.transport.drops")


class DropLog:
    """``drop(kind, detail)``: count and log (rate-limited) one dropped input."""

    def __init__(
        self, name: str, interval: float = 5.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._name = name
        self._interval = interval
        self._clock = clock
        self._next_log: dict[str, float] = {}
        self._unlogged: dict[str, int] = {}

    def drop(self, kind: str, detail: object) -> None:
        now = self._clock()
        if now < self._next_log.get(kind, 0.0):
            self._unlogged[kind] = self._unlogged.get(kind, 0) + 1
            return
        self._next_log[kind] = now + self._interval
        more = self._unlogged.pop(kind, 0)
        also = f" (and {more} more since the last report)" if more else ""
        log.warning("%s: dropped %s: %s%s", self._name, kind, detail, also)


__all__ = ["DropLog"]
