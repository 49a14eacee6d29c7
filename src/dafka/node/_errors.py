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

    def __init__(
        self, unacked_records: int, unacked_bytes: int, message: str | None = None
    ) -> None:
        super().__init__(
            message
            or f"producer holds {unacked_records} unACKed records ({unacked_bytes} bytes), its"
            " limit; wait for stores to ACK (is a store running?) or raise"
            " max_unacked_records/bytes"
        )
        self.unacked_records = unacked_records
        self.unacked_bytes = unacked_bytes


class NodeArgumentError(DafkaError, ValueError):
    """A machine was given an argument the protocol cannot carry (a name, a sequence)."""


def check_name(kind: str, name: str) -> bytes:
    """A topic or node id as wire bytes: 1 to 255 bytes (the protocol's ``string``); a name
    that is not a ``str`` is a :class:`TypeError` naming what it is (not an AttributeError
    from deep inside)."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} must be a str, got {type(name).__name__}: {name!r}")
    raw = name.encode("utf-8", "surrogateescape")
    if not 0 < len(raw) <= 255:
        raise NodeArgumentError(f"{kind} must be 1 to 255 bytes of UTF-8, got {len(raw)}")
    return raw


def check_sequence(kind: str, sequence: int) -> int:
    """A sequence the protocol's 8-byte unsigned field can carry."""
    if not 0 <= sequence < 2**64:
        raise NodeArgumentError(f"{kind} must be a sequence in [0, 2**64), got {sequence}")
    return sequence


__all__ = ["BackpressureError", "NodeArgumentError", "check_name", "check_sequence"]
