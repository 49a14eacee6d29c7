"""Messages -> ZeroMQ frames.

Two paths per command. The *checked* path validates every field and raises
:class:`EncodeError` with the field's name; it is table-driven from :mod:`._layouts`. The hot
commands (RECORD, DIRECT-RECORD, ACK, HEAD, DIRECT-HEAD, FETCH) also have a *fast* path: a
node sends the same (topic, producer...) strings over and over, so the checked path leaves the
finished frame-0 header (everything but the trailing integers) in a small cache keyed by those
strings, and the fast path is one dict lookup plus one ``struct.pack``. Anything unusual on the
fast path (cache miss, wrong type, integer out of range) falls back to the checked path, so
the checks are never skipped, only paid once per distinct header.

Frame 1 (the content) is the message's own ``bytes`` object, never copied: the transport sends
``frames[0]`` with ``SNDMORE`` and then ``frames[1]`` (cheaper than ``send_multipart``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TypeVar

from dafka.protocol import _layouts as lay
from dafka.protocol._discovery import encode_beacon, encode_peer_endpoint, encode_welcome
from dafka.protocol._errors import EncodeError
from dafka.protocol._member import encode_member
from dafka.protocol._names import name
from dafka.protocol.messages import (
    Ack,
    Beacon,
    ConsumerHello,
    DirectHead,
    DirectRecord,
    Fetch,
    GetHeads,
    Head,
    HeadsEnd,
    LogStart,
    MemberBeat,
    Message,
    PeerEndpoint,
    Record,
    StoreHello,
    Welcome,
)

HEADER_CACHE_LIMIT = 16384
"""Distinct headers remembered per command; the cache is emptied when it is full."""

_pack_sequence = lay.SEQUENCE.pack
_pack_sequence_count = lay.SEQUENCE_COUNT.pack
_pack_sequence_epoch = lay.SEQUENCE_EPOCH.pack
_K = TypeVar("_K")
_CONTENT = "content"
_FAST_FAILURES = (KeyError, TypeError, struct.error)


# -- the checked path ---------------------------------------------------------------------


def _integer(value: object, what: str) -> int:
    bits = lay.INTEGER_BITS[what]
    if not isinstance(value, int):
        raise EncodeError(f"{what} must be an int, got {type(value).__name__}")
    if not 0 <= value < 1 << bits:
        raise EncodeError(f"{what} {value} is outside uint{bits} (0..{(1 << bits) - 1})")
    return value


def _content(value: object) -> bytes:
    if not isinstance(value, bytes):
        raise EncodeError(f"content must be bytes, got {type(value).__name__}")
    return value


def _header(layout: lay.Layout, message: object) -> bytes:
    """``ID | prefix | 0x00 | 0x01 | string fields``, every field checked."""
    parts = [
        layout.command_id,
        name(getattr(message, layout.prefix), layout.prefix),
        lay.PREFIX_END,
    ]
    for attr in layout.strings:
        raw = name(getattr(message, attr), attr)
        parts += (bytes((len(raw),)), raw)
    return b"".join(parts)


def _checked(layout: lay.Layout, message: object) -> tuple[bytes, list[bytes]]:
    """The header (for the cache) and the frames, or :class:`EncodeError`."""
    header = _header(layout, message)
    integers = [_integer(getattr(message, attr), attr) for attr in layout.integers]
    frames = [header + layout.tail.pack(*integers)]
    if layout.content:
        frames.append(_content(getattr(message, _CONTENT)))
    return header, frames


def _remember(cache: dict[_K, bytes], key: _K, header: bytes) -> None:
    if len(cache) >= HEADER_CACHE_LIMIT:
        cache.clear()
    cache[key] = header


# -- the hot commands -----------------------------------------------------------------------

_record_headers: dict[tuple[str, str], bytes] = {}
_direct_record_headers: dict[tuple[str, str, str], bytes] = {}
_ack_headers: dict[tuple[str, str], bytes] = {}
_head_headers: dict[tuple[str, str], bytes] = {}
_direct_head_headers: dict[tuple[str, str, str], bytes] = {}
_fetch_headers: dict[tuple[str, str, str], bytes] = {}


def _run_tail(m: Record | DirectRecord | Ack | Head | DirectHead, ordered: bool = True) -> bytes:
    """The integers after a record's or head's strings: the sequence, and the run trailer
    when it names its run (``epoch`` > 0; for a record, ``ordered``, ``run_start`` <=
    ``sequence``); checked."""
    sequence = _integer(m.sequence, "sequence")
    epoch = _integer(m.epoch, "epoch")
    run_start = _integer(m.run_start, "run_start")
    if epoch == 0:
        if run_start != 0:
            raise EncodeError(f"run_start {run_start} without an epoch (epoch 0: not said)")
        return _pack_sequence(sequence)
    if ordered and run_start > sequence:
        raise EncodeError(f"run_start {run_start} is after the record's sequence {sequence}")
    return _pack_sequence_epoch(sequence, epoch, run_start)


def _checked_record(layout: lay.Layout, m: Record | DirectRecord) -> tuple[bytes, list[bytes]]:
    header = _header(layout, m)
    tail = _run_tail(m)
    return header, [header + tail, _content(m.content)]


def _encode_record(m: Record) -> list[bytes]:
    try:
        content = m.content
        if content.__class__ is bytes:
            if not m.epoch:
                if not m.run_start:
                    header = _record_headers[m.topic, m.producer]
                    return [header + _pack_sequence(m.sequence), content]
            elif m.run_start <= m.sequence:
                header = _record_headers[m.topic, m.producer]
                return [header + _pack_sequence_epoch(m.sequence, m.epoch, m.run_start), content]
    except _FAST_FAILURES:
        pass
    header, frames = _checked_record(lay.RECORD, m)
    _remember(_record_headers, (m.topic, m.producer), header)
    return frames


def _encode_direct_record(m: DirectRecord) -> list[bytes]:
    try:
        content = m.content
        if content.__class__ is bytes:
            header = _direct_record_headers[m.recipient, m.producer, m.topic]
            if m.epoch:
                if m.run_start <= m.sequence:
                    tail = _pack_sequence_epoch(m.sequence, m.epoch, m.run_start)
                    return [header + tail, content]
            elif not m.run_start:
                return [header + _pack_sequence(m.sequence), content]
    except _FAST_FAILURES:
        pass
    header, frames = _checked_record(lay.DIRECT_RECORD, m)
    _remember(_direct_record_headers, (m.recipient, m.producer, m.topic), header)
    return frames


def _encode_ack(m: Ack) -> list[bytes]:
    try:
        if not m.epoch and not m.run_start:
            return [_ack_headers[m.producer, m.topic] + _pack_sequence(m.sequence)]
    except _FAST_FAILURES:
        pass
    header = _header(lay.ACK, m)
    frames = [header + _run_tail(m, ordered=False)]
    _remember(_ack_headers, (m.producer, m.topic), header)
    return frames


def _encode_head(m: Head) -> list[bytes]:
    try:
        if not m.epoch and not m.run_start:
            return [_head_headers[m.topic, m.producer] + _pack_sequence(m.sequence)]
    except _FAST_FAILURES:
        pass
    header = _header(lay.HEAD, m)
    frames = [header + _run_tail(m, ordered=False)]
    _remember(_head_headers, (m.topic, m.producer), header)
    return frames


def _encode_direct_head(m: DirectHead) -> list[bytes]:
    try:
        if not m.epoch and not m.run_start:
            header = _direct_head_headers[m.recipient, m.producer, m.topic]
            return [header + _pack_sequence(m.sequence)]
    except _FAST_FAILURES:
        pass
    header = _header(lay.DIRECT_HEAD, m)
    frames = [header + _run_tail(m, ordered=False)]
    _remember(_direct_head_headers, (m.recipient, m.producer, m.topic), header)
    return frames


def _encode_fetch(m: Fetch) -> list[bytes]:
    try:
        header = _fetch_headers[m.producer, m.requester, m.topic]
        return [header + _pack_sequence_count(m.sequence, m.count)]
    except _FAST_FAILURES:
        pass
    header, frames = _checked(lay.FETCH, m)
    _remember(_fetch_headers, (m.producer, m.requester, m.topic), header)
    return frames


# -- the rare commands ----------------------------------------------------------------------


def _encode_get_heads(m: GetHeads) -> list[bytes]:
    epoch = _integer(m.epoch, "epoch")
    partitions = _integer(m.partitions, "partitions")
    frames = _checked(lay.GET_HEADS, m)[1]
    if not epoch and not partitions:
        return frames
    if not epoch or not partitions:
        raise EncodeError(
            f"a fencing GET-HEADS needs an epoch and a partition count, got {epoch} and "
            f"{partitions}"
        )
    if not m.requester.endswith(".0"):
        raise EncodeError(
            f"a fencing GET-HEADS comes from partition 0 of a named producer (name.0), "
            f"not {m.requester!r}"
        )
    return [frames[0] + lay.FENCE_TRAILER.pack(epoch, partitions)]


def _encode_store_hello(m: StoreHello) -> list[bytes]:
    return _checked(lay.STORE_HELLO, m)[1]


def _encode_heads_end(m: HeadsEnd) -> list[bytes]:
    return _checked(lay.HEADS_END, m)[1]


def _encode_log_start(m: LogStart) -> list[bytes]:
    return _checked(lay.LOG_START, m)[1]


def _encode_consumer_hello(m: ConsumerHello) -> list[bytes]:
    topics = m.topics
    if not isinstance(topics, tuple | list):
        raise EncodeError(f"topics must be a tuple of str, got {type(topics).__name__}")
    if len(topics) >= 1 << 32:
        raise EncodeError(f"{len(topics)} topics do not fit a uint32 count")
    parts = [_header(lay.CONSUMER_HELLO, m), lay.UINT32.pack(len(topics))]
    for topic in topics:
        raw = name(topic, "topic in topics")
        parts += (lay.UINT32.pack(len(raw)), raw)
    return [b"".join(parts)]


_ENCODERS: dict[type, Callable[[Message], list[bytes]]] = {
    Record: _encode_record,  # type: ignore[dict-item]
    DirectRecord: _encode_direct_record,  # type: ignore[dict-item]
    Fetch: _encode_fetch,  # type: ignore[dict-item]
    Ack: _encode_ack,  # type: ignore[dict-item]
    Head: _encode_head,  # type: ignore[dict-item]
    DirectHead: _encode_direct_head,  # type: ignore[dict-item]
    GetHeads: _encode_get_heads,  # type: ignore[dict-item]
    ConsumerHello: _encode_consumer_hello,  # type: ignore[dict-item]
    StoreHello: _encode_store_hello,  # type: ignore[dict-item]
    MemberBeat: encode_member,  # type: ignore[dict-item]
    HeadsEnd: _encode_heads_end,  # type: ignore[dict-item]
    LogStart: _encode_log_start,  # type: ignore[dict-item]
    Beacon: encode_beacon,  # type: ignore[dict-item]
    PeerEndpoint: encode_peer_endpoint,  # type: ignore[dict-item]
    Welcome: encode_welcome,  # type: ignore[dict-item]
}


def encode(message: Message) -> list[bytes]:
    """The ZeroMQ frames of ``message``, byte-exact with the C reference.

    Data messages give frame 0 (``ID | topic | 0x00 | 0x01 | fields``) and, for RECORD and
    DIRECT-RECORD only, frame 1 = the content object itself. Discovery messages give the
    beacon-socket frames. Raises :class:`EncodeError` if a field cannot go on the wire.
    """
    try:
        encoder = _ENCODERS[message.__class__]
    except KeyError:
        raise EncodeError(f"not a Dafka message: {type(message).__name__}") from None
    return encoder(message)


__all__ = ["HEADER_CACHE_LIMIT", "encode"]
