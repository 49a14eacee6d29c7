"""dafka.storage: the store's Flume-style segmented, checksummed log (files only).

One log per (topic, partition) - a partition is a producer's id - under one data directory,
split into segments named by their 20-digit base offset, each with a sparse offset index.
Records carry their offset (the Dafka sequence), length and CRC-32C; the bytes are described
in :mod:`dafka.storage._format`, the directory names in :mod:`dafka.storage._naming`.

How the store node uses it::

    storage = Storage.open(path, StorageConfig(fsync=FsyncPolicy.interval(5)))  # clock: optional
    storage.recovery_report               # what recovery cut, rebuilt or removed
    storage.heads(topic)                  # {partition: last offset}, no log scan
    last = storage.append(topic, partition, first_offset, payloads)   # one write
    storage.durable_offset(topic, partition)          # ACK up to here
    storage.sync_due(now)                 # on the loop's timer: {(topic, partition): durable}
    storage.next_sync_deadline()          # when to call sync_due next (None: nothing pending)
    storage.take_durable_advances()       # advances made by batch/records fsyncs
    storage.read(topic, partition, from_offset, count)  # [(offset, payload), ...]
    storage.head(topic, partition); storage.topics(); storage.next_offset(topic, partition)
    storage.apply_retention(time.time())  # whole old segments, never the active one
    storage.take_truncations()            # damage found by reads (the store refetches it)
    storage.holes(topic, partition)       # [(first, end), ...] below the head, not held
    storage.scrub(budget_bytes)           # the background scrub's step; scrub_progress
    storage.fill(topic, partition, first, payloads)   # into the hole starting at first
    storage.flush(); storage.close()      # fsync all (advances left for sync_due); or `with`

Decisions (details in docs/storage.md):

* Each segment holds one contiguous range of intact records; between segments a log may
  have *holes* (offsets lost to damage, or recorded as gone), listed by ``holes()`` and
  filled by ``fill()``. Appends must start at ``next_offset``: a later start raises
  :class:`GapAppendError` (unless ``after_gap``), an earlier one (duplicates)
  :class:`OverlapAppendError`; both are :class:`NonContiguousAppendError` with
  ``expected`` and write nothing, so the store trims overlaps or fetches what is missing.
* A new partition must start at ``StorageConfig.first_offset`` (0, where Dafka stores fetch
  from); ``first_offset=None`` lets it start anywhere, for a store joining mid-stream.
* A corrupt record costs exactly itself: the intact records after it are kept (records
  carry their own offsets and CRCs, so the next intact one is found), the damaged bytes are
  copied to ``<root>/.quarantine/`` and the offsets become a hole the store refetches. A
  torn tail is only cut. Every loss is logged at WARNING; nothing is deleted.
* A failed append (a full disk) leaves the log as it was; ``next_offset`` says what it
  holds, and the same append works once there is room.
* Durable means fsynced, except under the "os" policy, where it means written (survives a
  crash of the process, not of the machine).
* Reads serve every record written, durable or not.
"""

from dafka.storage._config import FsyncPolicy, RetentionPolicy, StorageConfig
from dafka.storage._errors import (
    GapAppendError,
    InvalidArgumentError,
    InvalidNameError,
    NonContiguousAppendError,
    OverlapAppendError,
    StorageClosedError,
    StorageError,
    StorageIOError,
    StorageLockedError,
)
from dafka.storage._format import Payload
from dafka.storage._naming import directory_name, name_from_directory
from dafka.storage._partition_log import PartitionLog
from dafka.storage._report import RecoveryReport, ScrubProgress, Truncation
from dafka.storage._segment import Segment
from dafka.storage._storage import Storage

__all__ = [
    "FsyncPolicy",
    "GapAppendError",
    "InvalidArgumentError",
    "InvalidNameError",
    "NonContiguousAppendError",
    "OverlapAppendError",
    "PartitionLog",
    "Payload",
    "RecoveryReport",
    "RetentionPolicy",
    "ScrubProgress",
    "Segment",
    "Storage",
    "StorageClosedError",
    "StorageConfig",
    "StorageError",
    "StorageIOError",
    "StorageLockedError",
    "Truncation",
    "directory_name",
    "name_from_directory",
]
