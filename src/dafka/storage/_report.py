"""What recovery (and later reads) found wrong and did about it, as plain data."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

TruncationReason = Literal["torn", "corrupt", "gap"]


@dataclass(frozen=True, slots=True)
class Truncation:
    """Damage in a partition log, at ``position`` of ``segment``, from ``offset`` on.

    * ``"torn"`` - an interrupted write (a record cut short, or zeros left by a power cut):
      expected after a crash, nothing that was durable is lost; the tail is cut;
    * ``"corrupt"`` - a complete record failed its CRC-32C, its offset or its length bound
      at ``position``. The damaged bytes are copied to the quarantine and cut out; the
      intact records after them are **kept** (``_segment.salvage``: they carry their own
      offsets and CRCs), so exactly the damaged records are lost: ``[offset, end_offset)``,
      a *hole* that the store fills from its peers when one still holds them. A bad segment
      header is reported this way too, losing no record (``end_offset == offset``);
    * ``"gap"`` - no segment holds ``[offset, end_offset)`` (a segment file went missing):
      a hole, the later segments are kept; or a segment file that cannot belong to the log
      (empty after a gap, or inside the previous segment) was set aside (``position`` 0).

    ``resumed`` is the offset where intact records follow the loss (None: nothing follows,
    the log now ends at ``offset``: its head went back). ``end_offset`` is the offset after
    the last record lost when it is known (reads and verifies know the range they had;
    recovery knows it when intact records follow). ``bytes_dropped`` counts the bytes
    removed from the log; ``quarantined`` lists where they went (moved or copied, never
    deleted; a torn tail, expected after a crash, is only cut).
    """

    topic: str
    partition: str
    segment: Path
    position: int
    offset: int
    reason: TruncationReason
    detail: str
    bytes_dropped: int
    end_offset: int | None = None
    quarantined: tuple[Path, ...] = ()
    resumed: int | None = None

    @property
    def lost(self) -> int | None:
        """How many records were lost (None: unknown, the end was not known)."""
        return None if self.end_offset is None else max(0, self.end_offset - self.offset)

    def describe(self) -> str:
        """One log line: partition, lost range, cause, what was kept, where the bytes went."""
        if self.end_offset is None:
            lost = f"offsets {self.offset} and later"
        elif self.end_offset > self.offset:
            count = self.end_offset - self.offset
            lost = f"offsets {self.offset}..{self.end_offset - 1} ({count} records)"
        else:
            lost = "no records"
        kept = "" if self.resumed is None else f", intact records from {self.resumed} on kept"
        moved = self.quarantined
        where = f"; {len(moved)} file(s) quarantined in {moved[0].parent}" if moved else ""
        return (
            f"partition {self.topic!r}/{self.partition!r} damaged ({self.reason}: "
            f"{self.detail}) at {self.segment.name} position {self.position}: {lost} "
            f"dropped{kept}, {self.bytes_dropped} bytes{where}"
        )


@dataclass(slots=True)
class RecoveryReport:
    """What :meth:`Storage.open` did. ``clean`` when it only had to read.

    ``indexes_rebuilt`` lists index files that were missing or unreadable and were
    regenerated from their segment; ``indexes_repaired`` those whose tail was dropped or
    extended; ``removed`` files deleted because they could not belong to a valid log (an
    index without its segment, or an interrupted salvage's temporary file);
    ``quarantined`` files that held what recovery could not read (damaged bytes cut out
    of a segment, a bad segment header, a segment file that cannot be part of the log),
    copied or moved under ``<root>/.quarantine``; ``skipped`` entries in the data
    directory that are not ours and were left alone.
    """

    partitions: int = 0
    segments: int = 0
    records: int = 0
    bytes_scanned: int = 0
    truncations: list[Truncation] = field(default_factory=list)
    indexes_rebuilt: list[Path] = field(default_factory=list)
    indexes_repaired: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    quarantined: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return not (
            self.truncations
            or self.indexes_rebuilt
            or self.indexes_repaired
            or self.removed
            or self.quarantined
        )


@dataclass(slots=True)
class ScrubProgress:
    """What the background scrub (:meth:`Storage.scrub`) has done since open.

    ``bytes_checked`` / ``records_checked``: every record read and CRC-checked; ``passes``:
    complete passes over every partition; ``pass_bytes`` of ``pass_total`` (the logs' size
    when the pass began): how far the current pass is; ``damage`` / ``records_lost``: what
    it found (each salvaged and reported like a read's, see :class:`Truncation`);
    ``bytes_unchanged``: of ``bytes_checked``, those read again whole and found the same
    bytes as a stretch it had checked record by record (by a 64-bit digest: intact again)."""

    bytes_checked: int = 0
    bytes_unchanged: int = 0
    passes: int = 0
    pass_bytes: int = 0
    pass_total: int = 0
    damage: int = 0
    records_lost: int = 0


__all__ = ["RecoveryReport", "ScrubProgress", "Truncation", "TruncationReason"]
