"""Gazette's v1 UUIDs: a producer's clock, a counter and transaction flags in 16 bytes.

Layout (RFC 4122 version 1, standard positions, big-endian)::

    bytes 0-3   time_low   clock bits 4..35   (the clock's low timestamp bits)
    bytes 4-5   time_mid   clock bits 36..51
    bytes 6-7   version 1 (high nibble) + time_hi, clock bits 52..63
    bytes 8-9   variant 0b10 (2 bits) | 4-bit counter (clock bits 0..3) | 10 flag bits
    bytes 10-15 ProducerID (the v1 "node" field)

A *clock* is ``timestamp60 << 4 | counter4``: 100 ns ticks since 1582-10-15, extended by a
4-bit counter so that one producer may mint 16 UUIDs per 100 ns and still order them.
Clocks of one producer only ever grow, which is what lets readers de-duplicate.

We use :class:`uuid.UUID` as the type and work on its 128-bit ``int`` rather than on
``bytes``: shifting an int is the cheapest way to pull the fields out in CPython, and the
sequencer does it for every message it reads.
"""

from __future__ import annotations

import functools
import os
import struct
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from enum import IntEnum
from typing import Final

from dafka.message._errors import UUIDError

__all__ = [
    "G1582_NS100",
    "NIL_UUID",
    "Clock",
    "Flags",
    "ProducerID",
    "build_uuid",
    "build_uuids",
    "clock_as_time",
    "clock_to_unix_ns",
    "get_clock",
    "get_flags",
    "get_producer_id",
    "new_producer_id",
    "unix_ns_to_clock",
]

G1582_NS100: Final = 122_192_928_000_000_000
"""100 ns intervals between 1582-10-15 (the v1 epoch) and 1970-01-01 (the Unix epoch)."""

NIL_UUID: Final = uuid.UUID(int=0)
"""The all-zero UUID: a message carrying it opts out of exactly-once (clock 0)."""

_MASK64: Final = (1 << 64) - 1
_MAX_FLAGS: Final = 0x3FF


class Flags(IntEnum):
    """Transaction flags: the 10 low bits of the UUID's clock-sequence word.

    Any other value read from a UUID is treated as ``OUTSIDE_TXN`` by the sequencer.
    """

    OUTSIDE_TXN = 0x0
    """Committed on its own: deliver it at once (unless it is a duplicate)."""
    CONTINUE_TXN = 0x1
    """Part of an open transaction: hold it until an ACK with a larger clock."""
    ACK_TXN = 0x2
    """Commits the producer's transaction through this clock; an ACK with a clock no
    larger than the last one rolls the open transaction back."""


class ProducerID(bytes):
    """The 6-byte node field of a v1 UUID, naming one publisher.

    A ``bytes`` subclass so that it hashes, compares and serialises like bytes; the
    constructor only checks the length. Build fresh ones with :func:`new_producer_id`.
    """

    __slots__ = ()

    def __new__(cls, value: bytes | bytearray | memoryview) -> ProducerID:
        raw = bytes(value)
        if len(raw) != 6:
            raise UUIDError(f"a ProducerID is 6 bytes, not {len(raw)}")
        return super().__new__(cls, raw)

    @classmethod
    def from_int(cls, value: int) -> ProducerID:
        """The producer whose 48-bit big-endian value is ``value``."""
        if not 0 <= value < 1 << 48:
            raise UUIDError(f"a ProducerID is a 48-bit value, not {value:#x}")
        return cls(value.to_bytes(6, "big"))

    @classmethod
    def fromhex(cls, string: str) -> ProducerID:
        """Parse twelve hex digits (``bytes.fromhex`` returning a ProducerID)."""
        return cls(bytes.fromhex(string))

    def __repr__(self) -> str:
        return f"ProducerID({self.hex()!r})"

    def __int__(self) -> int:
        return int.from_bytes(self, "big")


def new_producer_id() -> ProducerID:
    """A random ProducerID with the multicast bit set.

    The multicast bit (least significant bit of byte 0) marks the node field as "not a real
    MAC address" per RFC 4122, and guarantees the ID is never all zeros. 47 random bits make
    a collision very unlikely as long as a ProducerID lives about as long as a process.
    """
    raw = bytearray(os.urandom(6))
    raw[0] |= 0x01
    return ProducerID(raw)


def unix_ns_to_clock(unix_ns: int) -> int:
    """The clock value (counter 0) of a wall time in nanoseconds since the Unix epoch."""
    return ((unix_ns // 100) + G1582_NS100) << 4


def clock_to_unix_ns(clock: int) -> int:
    """The wall time of a clock, in nanoseconds since the Unix epoch (the counter ignored).

    The inverse of :func:`unix_ns_to_clock` to 100 ns precision. Clocks before 1970 give
    negative values; clock 0 (a message that opted out) gives 1582-10-15.
    """
    return ((int(clock) >> 4) - G1582_NS100) * 100


_UNIX_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def clock_as_time(clock: int) -> datetime:
    """The wall time of a clock as an aware UTC datetime (Gazette's ``Clock.AsTime``).

    Python datetimes hold microseconds: the 100 ns digit is truncated. Useful for logs and
    for reasoning about prune horizons and transaction ages.
    """
    units = (int(clock) >> 4) - G1582_NS100  # 100 ns units since the Unix epoch
    return _UNIX_EPOCH + timedelta(microseconds=units // 10)


class Clock:
    """A producer's monotonic clock: 60-bit v1 timestamp and 4-bit counter in one integer.

    :meth:`tick` adds one; :meth:`update` jumps forward to a wall time but never moves the
    clock backwards, so ticks stay strictly increasing even if the wall clock steps back.
    Both are safe for concurrent use (a lock: CPython has no atomic add).
    """

    __slots__ = ("_lock", "_value")

    def __init__(self, value: int = 0) -> None:
        if not 0 <= value <= _MASK64:
            raise UUIDError(f"a clock is a uint64, not {value}")
        self._value = value
        self._lock = threading.Lock()

    @classmethod
    def from_unix_ns(cls, unix_ns: int) -> Clock:
        """A clock set to a wall time (nanoseconds since the Unix epoch)."""
        clock = cls()
        clock.update(unix_ns)
        return clock

    @property
    def value(self) -> int:
        """The current clock value."""
        return self._value

    def __int__(self) -> int:
        return self._value

    def __index__(self) -> int:
        return self._value

    def __repr__(self) -> str:
        return f"Clock({self._value:#x})"

    def as_time(self) -> datetime:
        """The clock's wall time (see :func:`clock_as_time`)."""
        return clock_as_time(self._value)

    def tick(self) -> int:
        """Increment the clock by one and return the new value."""
        with self._lock:
            self._value = value = self._value + 1
        return value

    def tick_many(self, count: int) -> int:
        """Increment the clock by ``count`` and return the first of the ``count`` new values
        (``tick()`` ``count`` times under one lock: a run of consecutive clocks)."""
        if count < 1:
            raise UUIDError(f"tick_many takes a count >= 1, not {count}")
        with self._lock:
            first = self._value + 1
            self._value += count
        return first

    def update(self, unix_ns: int | None = None) -> None:
        """Move the clock to a wall time (default: now) if that is ahead of it."""
        if unix_ns is None:
            unix_ns = time.time_ns()
        target = unix_ns_to_clock(unix_ns)
        with self._lock:
            self._value = max(self._value, target)


def build_uuid(producer: bytes, clock: int, flags: int) -> uuid.UUID:
    """The v1 UUID of ``producer`` at ``clock`` with ``flags`` (see the module docstring)."""
    if not 0 <= flags <= _MAX_FLAGS:
        raise UUIDError(f"only the 10 low bits may be used for flags, not {flags:#x}")
    if len(producer) != 6:
        raise UUIDError(f"a ProducerID is 6 bytes, not {len(producer)}")
    clock = int(clock)
    if not 0 <= clock <= _MASK64:
        raise UUIDError(f"a clock is a uint64, not {clock}")
    value = (
        ((clock >> 4) & 0xFFFFFFFF) << 96  # time_low
        | ((clock >> 36) & 0xFFFF) << 80  # time_mid
        | (((clock >> 52) & 0x0FFF) | 0x1000) << 64  # time_hi + version 1
        | (0x8000 | (clock & 0xF) << 10 | flags) << 48  # variant, counter, flags
        | int.from_bytes(producer, "big")
    )
    return uuid.UUID(int=value)


_PACK_TIME_LOW = struct.Struct(">I").pack


@functools.lru_cache(maxsize=64)
def _tails(high: int, flags: int, node: bytes) -> tuple[bytes, ...]:
    """The 12 bytes after ``time_low`` of a UUID for each of the 16 counter values, for the
    clocks whose bits above ``time_low`` are ``high`` (``clock >> 36``). Cached: a
    transactional producer stamps runs of a few dozen messages (transactions of 100 over 4
    partitions), and building the 16 tails cost more than stamping such a run."""
    mid = ((high & 0xFFFF) << 16 | ((high >> 16) & 0x0FFF) | 0x1000).to_bytes(4, "big")
    return tuple(mid + (0x8000 | k << 10 | flags).to_bytes(2, "big") + node for k in range(16))


def build_uuids(producer: bytes, first: int, count: int, flags: int) -> list[bytes]:
    """The 16 bytes of ``build_uuid(producer, c, flags)`` for the ``count`` consecutive
    clocks ``c`` from ``first`` (a run from :meth:`Clock.tick_many`).

    Why: a transaction stamps every message, and ``build_uuid`` costs a ``uuid.UUID`` and a
    128-bit int per message. Consecutive clocks differ in ``time_low`` and the counter only
    (until ``time_low`` wraps, every 2**36 clocks), so the other 12 bytes are one of 16
    tails (one per counter value) and each UUID is a 4-byte pack plus a concatenation."""
    if not 0 <= flags <= _MAX_FLAGS:
        raise UUIDError(f"only the 10 low bits may be used for flags, not {flags:#x}")
    if len(producer) != 6:
        raise UUIDError(f"a ProducerID is 6 bytes, not {len(producer)}")
    end = first + count
    if count < 0 or first < 0 or end - 1 > _MASK64:
        raise UUIDError(f"clocks {first}..{end - 1} are not uint64 values")
    pack = _PACK_TIME_LOW
    node = bytes(producer)
    out: list[bytes] = []
    clock = first
    while clock < end:
        stop = min(end, ((clock >> 36) + 1) << 36)  # time_low wraps there: new tails
        tails = _tails(clock >> 36, int(flags), node)
        out += [pack(c >> 4 & 0xFFFFFFFF) + tails[c & 15] for c in range(clock, stop)]
        clock = stop
    return out


def get_clock(u: uuid.UUID) -> int:
    """The clock (timestamp and counter) of a UUID; the version nibble is masked off."""
    i = u.int
    return (
        ((i >> 92) & 0xFFFFFFFF0)
        | ((i >> 44) & 0xFFFF000000000)
        | ((i >> 12) & 0xFFF0000000000000)
        | ((i >> 58) & 0xF)
    )


def get_flags(u: uuid.UUID) -> int:
    """The 10 flag bits of a UUID (compare with :class:`Flags`; other values may occur)."""
    return (u.int >> 48) & _MAX_FLAGS


def get_producer_id(u: uuid.UUID) -> ProducerID:
    """The ProducerID (node field, bytes 10-15) of a UUID."""
    return ProducerID((u.int & 0xFFFFFFFFFFFF).to_bytes(6, "big"))
