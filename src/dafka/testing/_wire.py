"""What part of a message ZeroMQ matches subscriptions against, without the codec.

The in-memory network needs the subscription prefix of a message (command ID + the prefix
field's bytes: PROTOCOL.md section 1) but nothing else of the encoding.
"""

from __future__ import annotations

from typing import NamedTuple

from dafka.node.actions import Deliver
from dafka.protocol import LAYOUTS, DataMessage


def prefix_of(message: DataMessage) -> bytes:
    """Command ID + the prefix field, as a SUB socket sees the start of frame 0 (both from
    the codec's :data:`~dafka.protocol.LAYOUTS`)."""
    layout = LAYOUTS[type(message)]
    field: str = getattr(message, layout.prefix)
    return layout.command_id + field.encode("utf-8", "surrogateescape") + b"\x00"


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
