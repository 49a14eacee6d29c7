"""Errors of the record formats (all :class:`dafka.errors.DafkaError`).

A corrupt batch is the consumer's to count and report; the transaction errors are what a
transactional producer raises (the log's records say when another instance took over).
"""

from __future__ import annotations

from dafka.errors import DafkaError


class CorruptBatchError(DafkaError):
    """A RECORD starts with the batch magic but fails the batch's CRC or structure checks.

    A consumer counts and reports it; it never delivers its bytes as messages.
    """


class DroppedRecordError(CorruptBatchError):
    """A RECORD is a store's *drop notice*: it stands for a RECORD of ``size`` bytes that was
    over the store's ``max_message_bytes`` (``dafka.records.drop_notice``). A consumer skips
    it and counts it with the RECORDs it dropped for its own limit; a reader that only knows
    :class:`CorruptBatchError` skips it as corrupt."""

    def __init__(self, size: int) -> None:
        super().__init__(f"a store dropped this RECORD: {size:,} bytes, over its max_message_bytes")
        self.size = size


class TransactionError(DafkaError):
    """A transaction could not be begun, committed or aborted (the message says why)."""


class ProducerFencedError(TransactionError):
    """Another instance with the same ``transactional_id`` took over: this one must stop.

    Raised by every call of a fenced producer; nothing it had not committed becomes visible.
    """


class CorruptLogError(TransactionError):
    """A transaction-log record that does not decode (never written by dafka), or a log the
    caller could not supply."""


__all__ = [
    "CorruptBatchError",
    "CorruptLogError",
    "DroppedRecordError",
    "ProducerFencedError",
    "TransactionError",
]
