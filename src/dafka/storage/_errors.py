"""What the storage engine raises on purpose.

Every error is a :class:`~dafka.errors.DafkaError` so that the store's driver can catch all of
ours in one clause. Errors about the caller's arguments are also :class:`ValueError`;
:class:`StorageIOError` wraps a failing disk call and keeps the :class:`OSError` as ``__cause__``.
"""

from __future__ import annotations

from dafka.errors import DafkaError


class StorageError(DafkaError):
    """Base class of every error of :mod:`dafka.storage`."""


class InvalidNameError(StorageError, ValueError):
    """A topic or partition name cannot be stored (not a wire string, or too long)."""


class InvalidArgumentError(StorageError, ValueError):
    """An offset, count or payload is out of range (negative, beyond 2**64, too large)."""


class NonContiguousAppendError(StorageError, ValueError):
    """An append does not start exactly at the partition's next offset.

    Nothing of the batch was written. ``expected`` is the offset the log would accept, so the
    caller can trim an overlap or fetch what is missing. The two subclasses say which case it
    is; catching this class catches both.
    """

    def __init__(self, topic: str, partition: str, expected: int, got: int) -> None:
        self.topic = topic
        self.partition = partition
        self.expected = expected
        self.got = got
        super().__init__(
            f"{type(self).__name__}: {topic!r}/{partition!r} expects offset {expected}, "
            f"append starts at {got}"
        )

    def __reduce__(self) -> tuple[type[NonContiguousAppendError], tuple[str, str, int, int]]:
        return (type(self), (self.topic, self.partition, self.expected, self.got))


class GapAppendError(NonContiguousAppendError):
    """The append starts after the next offset: records in between are missing (fetch them)."""


class OverlapAppendError(NonContiguousAppendError):
    """The append starts at or before the head: those records are already held (duplicates)."""


class StorageLockedError(StorageError):
    """Another process (or another open Storage) holds the data directory."""


class StorageClosedError(StorageError):
    """The storage was closed; open it again to use it."""


class StorageIOError(StorageError):
    """The disk refused a write, fsync or read; the log was rolled back to its last good state.

    ``errno`` is the failing call's (``errno.ENOSPC`` for a full disk), None if unknown.
    """

    @property
    def errno(self) -> int | None:
        cause = self.__cause__
        return cause.errno if isinstance(cause, OSError) else None


__all__ = [
    "GapAppendError",
    "InvalidArgumentError",
    "InvalidNameError",
    "NonContiguousAppendError",
    "OverlapAppendError",
    "StorageClosedError",
    "StorageError",
    "StorageIOError",
    "StorageLockedError",
]
