"""What a consumer hands to the application."""

from __future__ import annotations

from typing import NamedTuple


class ConsumedRecord(NamedTuple):
    """One record: its topic, its partition (the producer's id), its sequence, its content.

    A NamedTuple rather than a dataclass: consumers build hundreds of thousands per second.
    """

    topic: str
    partition: str
    sequence: int
    content: bytes


__all__ = ["ConsumedRecord"]
