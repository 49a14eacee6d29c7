"""Errors of the message layer, one subclass per thing a caller can do about it.

All derive from :class:`dafka.errors.DafkaError` so that one ``except`` clause catches
everything dafka raises on purpose.
"""

from __future__ import annotations

from enum import StrEnum

from dafka.errors import DafkaError


class MessageError(DafkaError):
    """Base class of the errors of :mod:`dafka.message`."""


class UUIDError(MessageError, ValueError):
    """A UUID, producer ID or flags value is malformed or out of range."""


class MappingError(MessageError):
    """A message could not be mapped to a partition."""


class EmptyPartitionsError(MappingError):
    """The partitions function returned no partitions (Gazette's ErrEmptyListResponse).

    The caller may retry later: partitions of a topic come and go.
    """


class FramingError(MessageError):
    """A frame could not be encoded or decoded.

    Raised by a read iterator for one frame only: the next read continues with the next
    frame. ``begin`` and ``end`` are the byte offsets of the offending bytes when known.
    """

    def __init__(self, message: str, *, begin: int = -1, end: int = -1) -> None:
        super().__init__(message)
        self.begin = begin
        self.end = end


class DesyncError(FramingError):
    """Bytes that are not a frame were skipped to re-synchronise on the next magic word."""

    def __init__(self, skipped: bytes, *, begin: int = -1, end: int = -1) -> None:
        super().__init__(
            f"detected de-synchronization: skipped {len(skipped)} bytes", begin=begin, end=end
        )
        self.skipped = skipped


class UnknownContentTypeError(FramingError, LookupError):
    """No framing is registered for a content type."""


class SequencerError(MessageError):
    """The sequencer was used out of order, or a replay did not match its range."""


class MustStartReplay(SequencerError):  # noqa: N818 - Gazette's name (ErrMustStartReplay)
    """The committed span is no longer in the ring: replay ``[begin, end)`` of ``partition``.

    The sequencer does no I/O: the caller reads the range from the log (read-uncommitted)
    and hands the envelopes to :meth:`Sequencer.start_replay`, then steps again.
    """

    def __init__(self, partition: str, begin: int, end: int) -> None:
        super().__init__(f"must start replay of {partition!r} [{begin}, {end})")
        self.partition = partition
        self.begin = begin
        self.end = end


class ReplayFailure(StrEnum):
    """Which way a replay went wrong (:attr:`ReplayError.kind`)."""

    READER_FAILED = "reader_failed"
    """The replay iterator raised (the cause is chained as ``__cause__``)."""
    WRONG_PARTITION = "wrong_partition"
    """It yielded an envelope of another partition."""
    WRONG_BEGIN = "wrong_begin"
    """It yielded an envelope that begins before the requested range."""
    WRONG_END = "wrong_end"
    """It yielded an envelope that ends after the requested range."""


class ReplayError(SequencerError):
    """A replay iterator failed, or returned an envelope outside the requested range.

    The failure is data, not only text: ``kind`` (a :class:`ReplayFailure`), the
    ``partition`` being replayed, and for a wrong envelope the ``expected`` bound and the
    ``actual`` value (a partition name or an offset). The sequencer drops the failed
    replay and keeps the commit pending: the next ``step()`` raises
    :class:`MustStartReplay` for what is still missing, so a replay can be restarted and
    nothing is skipped silently.
    """

    def __init__(
        self,
        kind: ReplayFailure,
        message: str,
        *,
        partition: str,
        expected: str | int | None = None,
        actual: str | int | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.partition = partition
        self.expected = expected
        self.actual = actual
