"""What the clients hand to the application: :class:`Record` and :class:`RecordMetadata`.

NamedTuples rather than dataclasses: consumers build hundreds of thousands per second.
"""

from __future__ import annotations

from typing import NamedTuple


class Record(NamedTuple):
    """One message as a consumer delivers it.

    ``offset`` is the Dafka sequence of the RECORD that carried it and ``index`` its position
    inside a batched RECORD (0 for a plain one); positions and checkpoints count RECORDs.
    A plain RECORD (a C producer's, or ``batching=False``) is one message whose value is the
    whole content, with no key, no headers, no timestamp: see :func:`plain_record`.
    """

    topic: str
    partition: str
    offset: int
    index: int  # type: ignore[assignment]  # shadows tuple.index, as the contract names it
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int | None
    uuid: bytes | None = None


class RecordMetadata(NamedTuple):
    """Where a produced message was stored (what ``Producer.send``'s future resolves to)."""

    topic: str
    partition: str
    offset: int
    index: int  # type: ignore[assignment]  # shadows tuple.index, as the contract names it


def plain_record(topic: str, partition: str, sequence: int, content: bytes) -> Record:
    """The :class:`Record` of a RECORD that is not a batch."""
    return Record(topic, partition, sequence, 0, None, content, (), None, None)


__all__ = ["Record", "RecordMetadata", "plain_record"]
