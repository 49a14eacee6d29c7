"""A manual clock for driving node machines without sleeping (trio's ``MockClock`` idea)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol


class Timed(Protocol):
    """Anything with timers: every node machine and :class:`dafka.node.Discovery`."""

    def on_timer(self, now: float) -> None: ...

    def next_deadline(self) -> float | None: ...


class ManualClock:
    """Monotonic time that only moves when a test says so.

    ``clock()`` returns the time, so the clock can be injected wherever a ``time.monotonic``
    style function is expected. :meth:`jump` moves to the earliest deadline of some machines
    and fires their due timers: timer logic is tested at full speed, with no sleeps.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def __call__(self) -> float:
        return self._now

    @property
    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` (never backwards); returns the new time."""
        if seconds < 0:
            raise ValueError("a monotonic clock does not go back")
        self._now += seconds
        return self._now

    def next_deadline(self, machines: Iterable[Timed]) -> float | None:
        """The earliest deadline among ``machines``, or None if none has a timer."""
        deadlines = [d for d in (m.next_deadline() for m in machines) if d is not None]
        return min(deadlines, default=None)

    def jump(self, machines: Iterable[Timed], limit: float | None = None) -> bool:
        """Jump to the earliest deadline of ``machines`` and fire every timer then due.

        Returns False (and does not move) when no machine has a deadline, or the earliest is
        after ``limit``.
        """
        machines = list(machines)
        deadline = self.next_deadline(machines)
        if deadline is None or (limit is not None and deadline > limit):
            return False
        self._now = max(self._now, deadline)
        for machine in machines:
            due = machine.next_deadline()
            if due is not None and due <= self._now:
                machine.on_timer(self._now)
        return True


__all__ = ["ManualClock", "Timed"]
