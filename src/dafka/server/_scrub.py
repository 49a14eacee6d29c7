"""The store's background scrub: its logs checked at a bounded rate, damage repaired from peers.

A damaged record that no one reads stays latent: its store would serve it as lost only when a
consumer or a peer finally asks for it - maybe after the other copies are gone too. So a
running store reads its own logs in the background (``Storage.scrub``: every record's
CRC-32C, offset and length), at ``StorageConfig.scrub_bytes_per_s`` (1 MiB/s by default;
0: off), in small steps in its runner thread after each turn (at most ``MAX_STEP`` bytes, a
few milliseconds, so that a turn stays short). Damage it finds is salvaged like a read's (the
intact records after it are kept, docs/storage.md) and reported through the same path:
``Storage.take_truncations`` -> the persistence -> the store machine's ``on_holes``, which
fetches the hole from the other stores and fills it. Progress and findings are in the
store's ``/metrics`` (``dafka_store_scrub_*``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from dafka.storage import Storage

MAX_STEP: Final = 1 << 20
"""Bytes checked in one turn at most (~6 ms of records of 100 B)."""


@dataclass(frozen=True, slots=True)
class ScrubStatistics:
    """A snapshot of the scrub, for ``/metrics``."""

    bytes_per_s: float
    bytes_checked: int
    bytes_unchanged: int
    """Of ``bytes_checked``, stretches read whole and found unchanged since a check."""
    passes: int
    pass_progress: float
    """How far the current pass is, 0 to 1."""
    damage: int
    records_lost: int


class Scrubber:
    """Paces ``Storage.scrub`` to ``bytes_per_s`` with the runner's clock (its thread only)."""

    def __init__(self, storage: Storage, bytes_per_s: float) -> None:
        self._storage = storage
        self._rate = bytes_per_s
        self._budget = 0.0
        self._last: float | None = None

    def turn(self, now: float) -> None:
        """Check what the rate allows since the last turn (up to ``MAX_STEP`` bytes)."""
        if self._rate <= 0:
            return
        last, self._last = self._last, now
        if last is None:
            return
        self._budget = min(self._budget + self._rate * max(0.0, now - last), float(MAX_STEP))
        step = min(MAX_STEP, self._rate / 10)  # at least a tenth of a second's worth
        if self._budget < step:
            return
        checked = self._storage.scrub(int(self._budget))
        self._budget = 0.0 if checked == 0 else self._budget - checked

    def statistics(self) -> ScrubStatistics:
        progress = self._storage.scrub_progress
        total = progress.pass_total
        return ScrubStatistics(
            bytes_per_s=self._rate,
            bytes_checked=progress.bytes_checked,
            bytes_unchanged=progress.bytes_unchanged,
            passes=progress.passes,
            pass_progress=min(1.0, progress.pass_bytes / total) if total else 0.0,
            damage=progress.damage,
            records_lost=progress.records_lost,
        )


__all__ = ["MAX_STEP", "ScrubStatistics", "Scrubber"]
