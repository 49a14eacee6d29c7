"""Mapping a message to a partition of a topic whose partitions may change over time.

A *key function* extracts a stable key (``str`` or ``bytes``) from a message; a
*partitions function* returns the topic's current partitions (it may return a different
sequence on every call). The mappings hash the key with 32-bit FNV-1a, as Gazette does, so
that a Go and a Python publisher place the same key on the same partition:

* :func:`modulo_mapping` - ``partitions[fnv(key) % n]``: cheap; most keys move when ``n``
  changes.
* :func:`rendezvous_mapping` - the partition with the strictly greatest
  ``fnv(key) ^ fnv(name)`` (first wins on ties): adding a partition only moves keys onto it.
* :func:`random_mapping` - a uniform pick, for messages with no key.

An empty partition list raises :class:`EmptyPartitionsError`; the caller may retry later.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from dafka.message._errors import EmptyPartitionsError

__all__ = [
    "KeyFunc",
    "PartitionsFunc",
    "fnv1a32",
    "modulo_mapping",
    "random_mapping",
    "rendezvous_mapping",
]

T = TypeVar("T")

KeyFunc = Callable[[T], "str | bytes"]
"""Extracts the mapping key of a message (``str`` keys are hashed as UTF-8)."""

PartitionsFunc = Callable[[], Sequence[str]]
"""Returns the topic's current partitions; may change from one call to the next."""

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def fnv1a32(data: str | bytes) -> int:
    """32-bit FNV-1a of ``data`` (``str`` as UTF-8)."""
    if isinstance(data, str):
        data = data.encode()
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return h


def _partitions_or_raise(partitions: PartitionsFunc) -> Sequence[str]:
    parts = partitions()
    if not parts:
        raise EmptyPartitionsError("the partitions function returned no partitions")
    return parts


def modulo_mapping(
    key: Callable[[T], str | bytes], partitions: PartitionsFunc
) -> Callable[[T], str]:
    """Map on ``fnv1a32(key) % len(partitions)``."""

    def mapping(message: T) -> str:
        parts = _partitions_or_raise(partitions)
        return parts[fnv1a32(key(message)) % len(parts)]

    return mapping


def rendezvous_mapping(
    key: Callable[[T], str | bytes], partitions: PartitionsFunc
) -> Callable[[T], str]:
    """Map on highest random weight: the greatest ``fnv1a32(key) ^ fnv1a32(partition)``.

    Name hashes are cached for as long as the partitions function returns the same
    sequence object (or an equal one), as Gazette caches them per list response: return
    a new sequence when the partitions change rather than mutating the old one.
    """
    cache_lock = threading.Lock()
    # (the sequence last returned, a snapshot of it, the hashes of its names)
    cache: list[tuple[Sequence[str], tuple[str, ...], list[int]]] = []

    def hashes_of(parts: Sequence[str]) -> list[int]:
        with cache_lock:
            if cache and cache[0][0] is parts:
                return cache[0][2]
            snapshot = tuple(parts)
            if cache and cache[0][1] == snapshot:
                hashes = cache[0][2]
            else:
                hashes = [fnv1a32(name) for name in snapshot]
            cache[:] = [(parts, snapshot, hashes)]
            return hashes

    def mapping(message: T) -> str:
        parts = _partitions_or_raise(partitions)
        hashes = hashes_of(parts)
        digest = fnv1a32(key(message))
        best, index = 0, 0
        for i, h in enumerate(hashes):
            weight = digest ^ h
            if weight > best:
                best, index = weight, i
        return parts[index]

    return mapping


def random_mapping(
    partitions: PartitionsFunc, rng: random.Random | None = None
) -> Callable[[object], str]:
    """Map every message to a uniformly random partition."""
    choose = (rng or random.Random()).randrange

    def mapping(message: object) -> str:
        parts = _partitions_or_raise(partitions)
        return parts[choose(len(parts))]

    return mapping
