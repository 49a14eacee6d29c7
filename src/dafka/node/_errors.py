"""Errors the node machines raise on purpose (all :class:`dafka.errors.DafkaError`)."""

from __future__ import annotations

from dafka.errors import DafkaError


class BackpressureError(DafkaError):
    """The producer holds as many unACKed records (or bytes) as it may.

    A pure machine cannot wait, so it refuses the record; the record was *not* published and
    no sequence was used. With the ``block`` policy the driver waits until
    ``ProducerMachine.can_publish()`` is true again (ACKs from stores release records) and
    retries; with ``error`` the caller sees this error and decides.
    """

    def __init__(self, unacked_records: int, unacked_bytes: int) -> None:
        super().__init__(
            f"producer holds {unacked_records} unACKed records ({unacked_bytes} bytes), its limit;"
            " wait for stores to ACK (is a store running?) or raise max_unacked_records/bytes"
        )
        self.unacked_records = unacked_records
        self.unacked_bytes = unacked_bytes


__all__ = ["BackpressureError"]
