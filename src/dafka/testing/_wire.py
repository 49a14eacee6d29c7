"""What part of a message ZeroMQ matches subscriptions against, without the codec.

The in-memory network needs the subscription prefix of a message (command ID + the prefix
field's bytes: PROTOCOL.md section 1) but nothing else of the encoding.
"""

from __future__ import annotations

from typing import NamedTuple

from dafka.node.actions import Deliver
from dafka.protocol import (
    Ack,
    ConsumerHello,
    DataMessage,
    DirectHead,
    DirectRecord,
    Fetch,
    GetHeads,
    Head,
    Record,
    StoreHello,
)


def prefix_of(message: DataMessage) -> bytes:
    """Command ID + the prefix field, as a SUB socket sees the start of frame 0."""
    if isinstance(message, Record):
        head, field = b"M", message.topic
    elif isinstance(message, DirectRecord):
        head, field = b"D", message.recipient
    elif isinstance(message, Fetch):
        head, field = b"F", message.producer
    elif isinstance(message, Ack):
        head, field = b"K", message.producer
    elif isinstance(message, Head):
        head, field = b"H", message.topic
    elif isinstance(message, DirectHead):
        head, field = b"E", message.recipient
    elif isinstance(message, GetHeads):
        head, field = b"G", message.topic
    elif isinstance(message, ConsumerHello):
        head, field = b"W", message.store
    else:
        assert isinstance(message, StoreHello)
        head, field = b"L", message.consumer
    return head + field.encode("utf-8", "surrogateescape") + b"\x00"


class Delivered(NamedTuple):
    """One record a consumer handed to the application (a :class:`Deliver` run, flattened)."""

    topic: str
    producer: str
    sequence: int
    content: bytes


def flatten(deliver: Deliver) -> list[Delivered]:
    """The records of one :class:`Deliver` run, one by one."""
    first = deliver.first_sequence
    return [
        Delivered(deliver.topic, deliver.producer, first + i, content)
        for i, content in enumerate(deliver.contents)
    ]


__all__ = ["Delivered", "flatten", "prefix_of"]
