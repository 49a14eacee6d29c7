"""Errors of the clients (all :class:`dafka.errors.DafkaError`)."""

from __future__ import annotations

from dafka.errors import DafkaError


class CorruptBatchError(DafkaError):
    """A RECORD starts with the batch magic but fails the batch's CRC or structure checks.

    A consumer counts and reports it; it never delivers its bytes as messages.
    """


class DeliveryError(DafkaError):
    """A message was not stored: the cluster was gone past ``delivery_timeout``, or the
    producer was closed before the stores acknowledged it."""


__all__ = ["CorruptBatchError", "DeliveryError"]
