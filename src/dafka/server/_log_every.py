"""At most one log line every so many seconds about a count that grows.

A store counts what it refuses or drops - records of an older producer run, fencing
GET-HEADS too far past its clock, RECORDs over its size limit - and says so at WARNING. A
peer that sends such input without end must not flood the log: one line at most every
``interval`` seconds, saying how many since the last line. The rule was written out by hand
at each of those places; this is the one copy.
"""

from __future__ import annotations


class LogEvery:
    """``take(count, now)``: how much a growing count grew since the last line, when a line
    is due.

    The first growth is due at once; after a line the next is due ``interval`` seconds
    later, and it covers everything counted meanwhile (nothing is left out of the totals,
    only out of the lines)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._logged = 0
        """The count the last line covered."""
        self._due = 0.0
        """When the next line may come (the caller's clock)."""

    def take(self, count: int, now: float) -> int:
        """How much ``count`` grew since the last line, if a line is due at ``now``; 0 when
        none is (nothing new, or the last line came less than ``interval`` ago). A nonzero
        answer is that line's: the caller logs it."""
        if count == self._logged or now < self._due:
            return 0
        self._due = now + self.interval
        grown, self._logged = count - self._logged, count
        return grown


__all__ = ["LogEvery"]
