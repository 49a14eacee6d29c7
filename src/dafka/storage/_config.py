"""How a Storage behaves: segment size, index density, fsync policy, retention, start offset."""

from __future__ import annotations

import resource
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from dafka.errors import ConfigError
from dafka.storage._format import MAX_RECORD_BYTES, MAX_SEGMENT_BYTES, SEGMENT_HEADER_SIZE

DEFAULT_MAX_OPEN_PARTITIONS = 1024
"""The most partitions a store keeps descriptors open for, whatever its descriptor limit."""


@dataclass(frozen=True, slots=True)
class FsyncPolicy:
    """When appended records are fsynced, and so become *durable* (and may be ACKed).

    The triggers combine (any one syncs); with none set the policy is "os": the engine never
    fsyncs on its own and counts a record durable as soon as ``write`` returned, i.e. it
    survives the store process crashing but not the machine losing power.

    * ``every_batch`` - fsync at the end of every :meth:`Storage.append` call;
    * ``every_records`` - fsync a partition once it holds this many unsynced records;
    * ``interval_ms`` - fsync everything unsynced at most this long after it was written;
      the caller drives time with :meth:`Storage.sync_due` (see :meth:`Storage.next_sync_deadline`).

    ``every_records`` alone can leave a partition's last records unsynced while traffic is
    quiet; pair it with ``interval_ms`` to bound how long an ACK can wait.
    """

    every_batch: bool = False
    every_records: int | None = None
    interval_ms: float | None = None

    def __post_init__(self) -> None:
        if self.every_records is not None and self.every_records < 1:
            raise ConfigError(f"every_records must be >= 1, got {self.every_records}")
        if self.interval_ms is not None and not self.interval_ms >= 0:
            raise ConfigError(f"interval_ms must be >= 0, got {self.interval_ms}")

    @classmethod
    def batch(cls) -> FsyncPolicy:
        return cls(every_batch=True)

    @classmethod
    def records(cls, count: int) -> FsyncPolicy:
        return cls(every_records=count)

    @classmethod
    def interval(cls, milliseconds: float) -> FsyncPolicy:
        return cls(interval_ms=milliseconds)

    @classmethod
    def os(cls) -> FsyncPolicy:
        return cls()

    @classmethod
    def parse(cls, text: str) -> FsyncPolicy:
        """``"batch"``, ``"records:100"``, ``"ms:5"``, ``"os"`` (or ``"never"``), or several
        joined with ``+`` (``"records:1000+ms:10"``): the form used on command lines."""
        every_batch = False
        every_records: int | None = None
        interval_ms: float | None = None
        for part in text.strip().lower().split("+"):
            kind, _, value = part.partition(":")
            try:
                if kind == "batch" and not value:
                    every_batch = True
                elif kind == "records":
                    every_records = int(value)
                elif kind == "ms":
                    interval_ms = float(value)
                elif kind not in ("os", "never") or value:
                    raise ValueError(part)
            except ValueError:
                raise ConfigError(
                    f"bad fsync policy {text!r} (batch, records:N, ms:T, os)"
                ) from None
        return cls(every_batch, every_records, interval_ms)

    @property
    def is_os(self) -> bool:
        return not self.every_batch and self.every_records is None and self.interval_ms is None

    def __str__(self) -> str:
        parts = ["batch"] if self.every_batch else []
        if self.every_records is not None:
            parts.append(f"records:{self.every_records}")
        if self.interval_ms is not None:
            parts.append(f"ms:{self.interval_ms:g}")
        return "+".join(parts) or "os"


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How much of each partition of a topic to keep; None means no limit.

    ``max_bytes`` bounds each partition log (segment files), ``max_age_s`` drops segments
    whose last write is older than that. Only whole, closed segments are deleted, oldest
    first, so a partition always keeps its active segment and stays a contiguous range.
    """

    max_bytes: int | None = None
    max_age_s: float | None = None

    def __post_init__(self) -> None:
        if self.max_bytes is not None and self.max_bytes < 0:
            raise ConfigError(f"max_bytes must be >= 0, got {self.max_bytes}")
        if self.max_age_s is not None and not self.max_age_s >= 0:
            raise ConfigError(f"max_age_s must be >= 0, got {self.max_age_s}")


@dataclass(frozen=True, slots=True)
class StorageConfig:
    """Settings of a :class:`~dafka.storage.Storage`; every field has a sensible default.

    * ``segment_bytes`` - roll to a new segment before one would exceed this (a single
      record larger than it gets a segment of its own);
    * ``index_interval_bytes`` - one sparse index entry per this many log bytes: a read
      scans at most about this much before reaching its first record;
    * ``index_flush_entries`` - index entries kept in memory before they are written out
      (also written at roll, fsync and close); bounds the scan after a crash;
    * ``max_record_bytes`` - larger payloads are refused (and larger lengths are corruption);
    * ``first_offset`` - where a new partition must start (Dafka stores fetch from 0); None
      lets the first append of a new (or emptied) partition start anywhere, for a store that
      joins mid-stream;
    * ``max_open_partitions`` - partitions whose active segment keeps its two descriptors
      (log and index) open (None: a quarter of the process's descriptor limit, at most
      1024, leaving the rest to sockets and reads); writing to one more closes those of
      the least recently written (fsynced first) and reopens on its next write. Bounds the
      descriptors a store holds whatever the number of partitions (100,000 partitions from
      one peer used to take 200,000 and crash the store, which then could not reopen its
      own directory);
    * ``verify_on_open`` - CRC-check every record at open instead of only the tails (slow
      on large stores, finds mid-log corruption before any read does);
    * ``clock`` - the store's clock (the one whose ``now`` it passes to ``sync_due``); with
      it the interval deadline is armed at the write itself. Without it (None), the
      deadline is armed by the first ``sync_due(now)`` after the write, so a clock mismatch
      can never leave records waiting forever; a loop calling ``sync_due`` every few
      milliseconds then adds at most that to the interval.
    """

    segment_bytes: int = 64 * 1024 * 1024
    index_interval_bytes: int = 4096
    index_flush_entries: int = 64
    max_record_bytes: int = 64 * 1024 * 1024
    fsync: FsyncPolicy = field(default_factory=FsyncPolicy.batch)
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)
    topic_retention: Mapping[str, RetentionPolicy] = field(default_factory=dict)
    retention_check_s: float = 60.0
    """How often a running store applies retention (``StoreNode``; seconds)."""
    scrub_bytes_per_s: float = 1024 * 1024
    """The rate at which a running store checks its logs in the background (``StoreNode``:
    ``Storage.scrub``), bytes of records per second; 0 turns the scrub off. 1 MiB/s (the
    HDFS block scanner's default) costs a few ms of a core per second."""
    first_offset: int | None = 0
    max_open_partitions: int | None = None
    verify_on_open: bool = False
    clock: Callable[[], float] | None = None

    def open_partitions_limit(self) -> int:
        """``max_open_partitions``, or its default from the descriptor limit (RLIMIT_NOFILE)."""
        if self.max_open_partitions is not None:
            return self.max_open_partitions
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return DEFAULT_MAX_OPEN_PARTITIONS
        return max(1, min(DEFAULT_MAX_OPEN_PARTITIONS, soft // 4))

    def __post_init__(self) -> None:
        if not SEGMENT_HEADER_SIZE < self.segment_bytes <= MAX_SEGMENT_BYTES:
            raise ConfigError(f"segment_bytes must be in (24, 2**31], got {self.segment_bytes}")
        if not self.retention_check_s > 0:
            raise ConfigError(f"retention_check_s must be > 0, got {self.retention_check_s}")
        if not 0 <= self.scrub_bytes_per_s <= 1 << 40:
            raise ConfigError(
                f"scrub_bytes_per_s must be in [0, 2**40], got {self.scrub_bytes_per_s}"
            )
        if self.max_open_partitions is not None and self.max_open_partitions < 1:
            raise ConfigError(f"max_open_partitions must be >= 1, got {self.max_open_partitions}")
        if self.index_interval_bytes < 1:
            raise ConfigError(f"index_interval_bytes must be >= 1, got {self.index_interval_bytes}")
        if self.index_flush_entries < 1:
            raise ConfigError(f"index_flush_entries must be >= 1, got {self.index_flush_entries}")
        if not 0 <= self.max_record_bytes <= MAX_RECORD_BYTES:
            raise ConfigError(
                f"max_record_bytes must be in [0, 2**30], got {self.max_record_bytes}"
            )
        if self.first_offset is not None and not 0 <= self.first_offset < 2**64:
            raise ConfigError(f"first_offset must be a u64 or None, got {self.first_offset}")

    def retention_for(self, topic: str) -> RetentionPolicy:
        return self.topic_retention.get(topic, self.retention)


__all__ = ["FsyncPolicy", "RetentionPolicy", "StorageConfig"]
