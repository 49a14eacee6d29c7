"""What recovery (and later reads) found wrong and did about it, as plain data."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

TruncationReason = Literal["torn", "corrupt", "gap"]


@dataclass(frozen=True, slots=True)
class Truncation:
    """A partition log was cut at ``position`` of ``segment``: ``offset`` and later are gone.

    * ``"torn"`` - the tail was an interrupted write (a record cut short, or zeros left by a
      power cut): expected after a crash, nothing that was durable is lost;
    * ``"corrupt"`` - a complete record failed its CRC-32C, its offset or its length bound
      at ``position``; the records before it are kept, it and every later record are
      dropped (never served past a gap), and the store refetches them from ``offset``;
    * ``"gap"`` - the next segment does not start where the previous ends, so it and all
      later segments are dropped (``position`` is 0 of the first dropped segment).

    A cut in the middle of a segment is followed by a ``"gap"`` truncation of the later
    segments (at open) or includes them (``bytes_dropped``, when a read finds it).
    A damaged length field that points past the end of the file cannot be told from an
    interrupted write and is reported as ``"torn"``; either way the cut is the same.
    ``bytes_dropped`` counts the bytes removed from the log; ``end_offset`` is the offset
    after the last record dropped when it is known (a cut found by a read knows the head it
    had; recovery does not read what it drops), and ``quarantined`` lists where the dropped
    bytes went (``dafka.storage._quarantine``: moved or copied, never deleted; a torn tail,
    expected after a crash, is only cut).
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

    def describe(self) -> str:
        """One log line: partition, lost range, cause, and where the bytes went."""
        if self.end_offset is None:
            lost = f"offsets {self.offset} and later"
        elif self.end_offset > self.offset:
            count = self.end_offset - self.offset
            lost = f"offsets {self.offset}..{self.end_offset - 1} ({count} records)"
        else:
            lost = "no records"
        moved = self.quarantined
        where = f"; {len(moved)} file(s) quarantined in {moved[0].parent}" if moved else ""
        return (
            f"partition {self.topic!r}/{self.partition!r} cut ({self.reason}: {self.detail}) "
            f"at {self.segment.name} position {self.position}: {lost} dropped, "
            f"{self.bytes_dropped} bytes{where}"
        )


@dataclass(slots=True)
class RecoveryReport:
    """What :meth:`Storage.open` did. ``clean`` when it only had to read.

        ``indexes_rebuilt`` lists index files that were missing or unreadable and were
        regenerated from their segment; ``indexes_repaired`` those whose tail was dropped or
        extended; ``removed`` files deleted because they could not belong to a valid log (an
        index without its segment); ``quarantined`` files that held what recovery could not
    read (segments after a gap, a segment with a bad header, the cut tail of a corrupt
    segment), moved or copied under ``<root>/.quarantine``; ``skipped`` entries in the data
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


__all__ = ["RecoveryReport", "Truncation", "TruncationReason"]
