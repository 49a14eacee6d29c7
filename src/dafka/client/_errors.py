"""Errors of the clients (all :class:`dafka.errors.DafkaError`)."""

from __future__ import annotations

from dafka.errors import DafkaError


class DeliveryError(DafkaError):
    """A message was not stored: the cluster was gone past ``delivery_timeout``, or the
    producer was closed before the stores acknowledged it."""


__all__ = ["DeliveryError"]
