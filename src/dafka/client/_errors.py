"""Errors of the clients (all :class:`dafka.errors.DafkaError`)."""

from __future__ import annotations

from dafka.errors import DafkaError


class DeliveryError(DafkaError):
    """A message was not stored: the cluster was gone past ``delivery_timeout``, or the
    producer was closed before the stores acknowledged it."""


class RunFencedError(DeliveryError):
    """A newer run of this producer's name writes one of its partitions (a zombie, or a
    second Spark task attempt): stores take the newer run's records and refuse this run's,
    so its records in flight there fail and it sends nothing more (Kafka's
    ``ProducerFencedException``; a transactional producer's is ``ProducerFencedError``);
    close it. The message names the partition and both runs."""


class NoStoreError(DafkaError):
    """No store answered within the wait, so there is nothing to look up in (is a store
    running, are the towers right?): ``offsets_for_times``, ``seek_to_timestamp`` and the
    admin calls."""


class FencedMemberError(DafkaError):
    """A group consumer's ``group_instance_id`` was taken by a consumer started after it: it
    reads nothing more of the group (Kafka's ``FencedInstanceIdException``); close it."""


__all__ = ["DeliveryError", "FencedMemberError", "NoStoreError", "RunFencedError"]
