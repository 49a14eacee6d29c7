"""ZeroMQ frames -> messages. Bad input raises :class:`DecodeError`, and nothing else.

Dispatch is a 256-entry tuple indexed by the first byte of frame 0 (the command ID). Each
decoder first checks the frame count, then frame 0.

As in the encoder, frame 0 of a hot command is its *header* (``ID | topic | 0x00 | 0x01 |
strings``, identical for every message of a partition) followed by fixed-size integers. A
header that passed full validation once is remembered with its decoded strings, keyed by its
bytes; the fast path slices the header off, looks it up and unpacks the integers. A miss runs
the checked parser, which explains precisely what is wrong (truncation, version, trailing
bytes, a subject that differs from the topic prefix...). A hit is only possible for bytes that
passed the checked parser before, so the fast path never accepts anything the checked one
would refuse.

Decoding accepts exactly what :func:`~dafka.protocol.encode` produces: ``encode(decode(f))
== f`` whenever ``decode(f)`` succeeds. The fuzz tests check that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dafka.protocol import _layouts as lay
from dafka.protocol._construct import constructor
from dafka.protocol._discovery import WELCOME, decode_discovery
from dafka.protocol._errors import DecodeError
from dafka.protocol._frames import all_bytes, as_frames
from dafka.protocol._ids import COMMAND_NAMES, VERSION
from dafka.protocol._member import decode_member
from dafka.protocol._names import name_problem, text
from dafka.protocol.messages import (
    Ack,
    ConsumerHello,
    DataMessage,
    DirectHead,
    DirectRecord,
    Fetch,
    GetHeads,
    Head,
    HeadsEnd,
    LogStart,
    Message,
    Record,
    StoreHello,
)

HEADER_CACHE_LIMIT = 16384
"""Distinct validated headers remembered (all commands together); emptied when full."""

_headers: dict[bytes, tuple[str, ...]] = {}
_unpack_sequence = lay.SEQUENCE.unpack_from
_unpack_sequence_count = lay.SEQUENCE_COUNT.unpack_from
_unpack_uint32 = lay.UINT32.unpack_from
_unpack_sequence_epoch = lay.SEQUENCE_EPOCH.unpack_from

Frames = Sequence[bytes]

_new_record = constructor(Record)
_new_direct_record = constructor(DirectRecord)
_new_ack = constructor(Ack)
_new_head = constructor(Head)
_new_direct_head = constructor(DirectHead)
_new_fetch = constructor(Fetch)


# -- the checked parser -----------------------------------------------------------------------


def _parse_header(frame: bytes, layout: lay.Layout) -> tuple[tuple[str, ...], int]:
    """Validate ``ID | prefix | 0x00 | 0x01 | strings``.

    Returns the distinct string attributes in order of first appearance (for RECORD:
    ``(topic, producer)``) and the offset where the integers start.
    """
    command = layout.name
    end = frame.find(b"\0", 1)
    if end < 0:
        raise DecodeError("truncated: the inline topic has no NUL terminator", command)
    raw = frame[1:end]
    problem = name_problem(raw)
    if problem is not None:
        raise DecodeError(f"inline topic ({layout.prefix}) {problem}", command)
    values = {layout.prefix: raw}
    size = len(frame)
    pos = end + 1
    if pos >= size:
        raise DecodeError("truncated: the version byte is missing", command)
    if frame[pos] != VERSION:
        raise DecodeError(f"unsupported version {frame[pos]} (only {VERSION} exists)", command)
    pos += 1
    for attr in layout.strings:
        if pos >= size:
            raise DecodeError(f"truncated: {attr} is missing", command)
        length = frame[pos]
        pos += 1
        raw = frame[pos : pos + length]
        if len(raw) != length:
            raise DecodeError(
                f"truncated: {attr} is {length} bytes long but {len(raw)} are left", command
            )
        problem = name_problem(raw)
        if problem is not None:
            raise DecodeError(f"{attr} {problem}", command)
        seen = values.setdefault(attr, raw)
        if seen != raw:
            raise DecodeError(
                f"subject {text(raw)!r} differs from the topic prefix {text(seen)!r}", command
            )
        pos += length
    return tuple(text(value) for value in values.values()), pos


def _check_end(frame: bytes, pos: int, expected: int, layout: lay.Layout) -> None:
    left = len(frame) - pos
    if left < expected:
        wanted = " and ".join(layout.integers)
        raise DecodeError(
            f"truncated: {wanted} take {expected} bytes but {left} are left", layout.name
        )
    if left > expected:
        raise DecodeError(f"{left - expected} bytes of trailing garbage", layout.name)


def _checked(frame: bytes, layout: lay.Layout) -> tuple[tuple[str, ...], int]:
    """Checked parse of a whole frame 0 with a fixed-size tail: strings and header length."""
    values, pos = _parse_header(frame, layout)
    _check_end(frame, pos, layout.tail.size, layout)
    return values, pos


def _miss(frame: bytes, layout: lay.Layout) -> tuple[str, ...]:
    """Checked parse of a header not seen before; remembers it, since it is valid."""
    values, pos = _checked(frame, layout)
    if len(_headers) >= HEADER_CACHE_LIMIT:
        _headers.clear()
    _headers[frame[:pos]] = values
    return values


def _frame_count(frames: Frames, layout: lay.Layout) -> DecodeError:
    expected = 2 if layout.content else 1
    got = len(frames)
    if layout.content and got == 1:
        return DecodeError("1 frame, expected 2: the content frame is missing", layout.name)
    return DecodeError(f"{got} frames, expected {expected}", layout.name)


class _NotBytesError(TypeError):
    """A frame is not ``bytes``: the fallback copies the frames and tries once more."""


# -- the decoders -----------------------------------------------------------------------------


def _record_tail(
    frame: bytes, layout: lay.Layout, ordered: bool = True
) -> tuple[tuple[str, ...], int, int, int]:
    """A RECORD's, DIRECT-RECORD's, ACK's, HEAD's or DIRECT-HEAD's frame 0: strings, sequence,
    epoch, run start.

    Frame 0 ends with the sequence, or with the sequence and the run trailer (epoch > 0;
    for a record, ``ordered``, run start <= sequence: ``_layouts.SEQUENCE_EPOCH``). A
    header is never a prefix of another valid header, so the two cache lookups cannot
    confuse the two forms."""
    v = _headers.get(frame[:-8])
    if v is not None:
        return v, _unpack_sequence(frame, len(frame) - 8)[0], 0, 0
    v = _headers.get(frame[:-24])
    if v is None:
        values, pos = _parse_header(frame, layout)
        if len(frame) - pos != lay.SEQUENCE_EPOCH.size:
            _check_end(frame, pos, lay.SEQUENCE.size, layout)
        if len(_headers) >= HEADER_CACHE_LIMIT:
            _headers.clear()
        _headers[frame[:pos]] = v = values
        if len(frame) - pos == lay.SEQUENCE.size:
            return v, _unpack_sequence(frame, pos)[0], 0, 0
    sequence, epoch, run_start = _unpack_sequence_epoch(frame, len(frame) - 24)
    if not epoch:
        raise DecodeError("a run trailer with epoch 0 (epoch 0 is sent without it)", layout.name)
    if ordered and run_start > sequence:
        raise DecodeError(f"run start {run_start} is after the sequence {sequence}", layout.name)
    return v, sequence, epoch, run_start


def _record(frames: Frames) -> Record:
    if len(frames) != 2:
        raise _frame_count(frames, lay.RECORD)
    frame = frames[0]
    v = _headers.get(frame[:-8])
    content = frames[1]
    if v is not None and content.__class__ is bytes:  # the hot path: no run trailer
        return _new_record(v[0], v[1], _unpack_sequence(frame, len(frame) - 8)[0], content, 0, 0)
    v, sequence, epoch, run_start = _record_tail(frame, lay.RECORD)
    if content.__class__ is not bytes:
        raise _NotBytesError
    return _new_record(v[0], v[1], sequence, content, epoch, run_start)


def _direct_record(frames: Frames) -> DirectRecord:
    if len(frames) != 2:
        raise _frame_count(frames, lay.DIRECT_RECORD)
    frame = frames[0]
    v = _headers.get(frame[:-8])
    content = frames[1]
    if v is not None and content.__class__ is bytes:  # the hot path: no run trailer
        sequence = _unpack_sequence(frame, len(frame) - 8)[0]
        return _new_direct_record(v[0], v[2], v[1], sequence, content, 0, 0)
    v, sequence, epoch, run_start = _record_tail(frame, lay.DIRECT_RECORD)
    if content.__class__ is not bytes:
        raise _NotBytesError
    return _new_direct_record(v[0], v[2], v[1], sequence, content, epoch, run_start)


def _ack(frames: Frames) -> Ack:
    if len(frames) != 1:
        raise _frame_count(frames, lay.ACK)
    frame = frames[0]
    v = _headers.get(frame[:-8])
    if v is not None:
        return _new_ack(v[0], v[1], _unpack_sequence(frame, len(frame) - 8)[0], 0, 0)
    v, sequence, epoch, run_start = _record_tail(frame, lay.ACK, ordered=False)
    return _new_ack(v[0], v[1], sequence, epoch, run_start)


def _head(frames: Frames) -> Head:
    if len(frames) != 1:
        raise _frame_count(frames, lay.HEAD)
    frame = frames[0]
    v = _headers.get(frame[:-8])
    if v is not None:
        return _new_head(v[0], v[1], _unpack_sequence(frame, len(frame) - 8)[0], 0, 0)
    v, sequence, epoch, run_start = _record_tail(frame, lay.HEAD, ordered=False)
    return _new_head(v[0], v[1], sequence, epoch, run_start)


def _direct_head(frames: Frames) -> DirectHead:
    if len(frames) != 1:
        raise _frame_count(frames, lay.DIRECT_HEAD)
    frame = frames[0]
    v = _headers.get(frame[:-8])
    if v is not None:
        sequence = _unpack_sequence(frame, len(frame) - 8)[0]
        return _new_direct_head(v[0], v[2], v[1], sequence, 0, 0)
    v, sequence, epoch, run_start = _record_tail(frame, lay.DIRECT_HEAD, ordered=False)
    return _new_direct_head(v[0], v[2], v[1], sequence, epoch, run_start)


def _fetch(frames: Frames) -> Fetch:
    if len(frames) != 1:
        raise _frame_count(frames, lay.FETCH)
    frame = frames[0]
    v = _headers.get(frame[:-12]) or _miss(frame, lay.FETCH)
    sequence, count = _unpack_sequence_count(frame, len(frame) - 12)
    return _new_fetch(v[0], v[1], v[2], sequence, count)


def _get_heads(frames: Frames) -> GetHeads:
    if len(frames) != 1:
        raise _frame_count(frames, lay.GET_HEADS)
    frame = frames[0]
    values, pos = _parse_header(frame, lay.GET_HEADS)
    topic, requester = values
    if len(frame) - pos != lay.FENCE_TRAILER.size:
        _check_end(frame, pos, 0, lay.GET_HEADS)
        return GetHeads(topic, requester)
    epoch, partitions = lay.FENCE_TRAILER.unpack_from(frame, pos)
    if not epoch or not partitions:
        raise DecodeError("a fencing trailer with epoch or partitions 0", lay.GET_HEADS.name)
    if not requester.endswith(".0"):
        raise DecodeError(
            f"a fencing GET-HEADS from {requester!r}, not a partition 0", lay.GET_HEADS.name
        )
    return GetHeads(topic, requester, epoch, partitions)


def _store_hello(frames: Frames) -> StoreHello:
    if len(frames) != 1:
        raise _frame_count(frames, lay.STORE_HELLO)
    (consumer, store), _ = _checked(frames[0], lay.STORE_HELLO)
    return StoreHello(consumer, store)


def _heads_end(frames: Frames) -> HeadsEnd:
    layout = lay.HEADS_END
    if len(frames) != 1:
        raise _frame_count(frames, layout)
    frame = frames[0]
    (recipient, topic, store, writer), pos = _checked(frame, layout)
    count, stores = layout.tail.unpack_from(frame, pos)
    return HeadsEnd(recipient, topic, store, writer, count, stores)


def _log_start(frames: Frames) -> LogStart:
    layout = lay.LOG_START
    if len(frames) != 1:
        raise _frame_count(frames, layout)
    frame = frames[0]
    (recipient, topic, producer, store), pos = _checked(frame, layout)
    (sequence,) = layout.tail.unpack_from(frame, pos)
    return LogStart(recipient, topic, producer, store, sequence)


def _consumer_hello(frames: Frames) -> ConsumerHello:
    layout = lay.CONSUMER_HELLO
    if len(frames) != 1:
        raise _frame_count(frames, layout)
    frame = frames[0]
    (store, consumer), pos = _parse_header(frame, layout)
    size = len(frame)
    if size - pos < 4:
        raise DecodeError("truncated: the topic count is missing", layout.name)
    (count,) = _unpack_uint32(frame, pos)
    pos += 4
    if count * 5 > size - pos:
        raise DecodeError(
            f"truncated: {count} topics cannot fit in the {size - pos} bytes left", layout.name
        )
    topics: list[str] = []
    for index in range(count):
        if size - pos < 4:
            raise DecodeError(f"truncated: topic {index} is missing", layout.name)
        (length,) = _unpack_uint32(frame, pos)
        pos += 4
        raw = frame[pos : pos + length]
        if len(raw) != length:
            raise DecodeError(
                f"truncated: topic {index} is {length} bytes long but {len(raw)} are left",
                layout.name,
            )
        problem = name_problem(raw)
        if problem is not None:
            raise DecodeError(f"topic {index} {problem}", layout.name)
        topics.append(text(raw))
        pos += length
    if pos != size:
        raise DecodeError(f"{size - pos} bytes of trailing garbage", layout.name)
    return ConsumerHello(store, consumer, tuple(topics))


def _unknown(frames: Frames) -> DataMessage:
    command_id = frames[0][0]
    shown = repr(chr(command_id)) if 0x20 < command_id < 0x7F else f"0x{command_id:02x}"
    raise DecodeError(f"unknown command ID {shown}")


def _welcome_or_consumer_hello(frames: Frames) -> Message:
    # Only ever ambiguous in decode(): the tower's welcome is the single frame b"W", which
    # is too short to be a CONSUMER-HELLO.
    if len(frames) == 1 and frames[0] == b"W":
        return WELCOME
    return _consumer_hello(frames)


_Decoder = Callable[[Frames], Message]
_DATA_DECODERS: dict[int, _Decoder] = {
    lay.RECORD.command_id[0]: _record,
    lay.DIRECT_RECORD.command_id[0]: _direct_record,
    lay.FETCH.command_id[0]: _fetch,
    lay.ACK.command_id[0]: _ack,
    lay.HEAD.command_id[0]: _head,
    lay.DIRECT_HEAD.command_id[0]: _direct_head,
    lay.GET_HEADS.command_id[0]: _get_heads,
    lay.CONSUMER_HELLO.command_id[0]: _consumer_hello,
    lay.STORE_HELLO.command_id[0]: _store_hello,
    lay.MEMBER.command_id[0]: decode_member,
    lay.HEADS_END.command_id[0]: _heads_end,
    lay.LOG_START.command_id[0]: _log_start,
}
assert set(_DATA_DECODERS) == set(COMMAND_NAMES)
_DATA: tuple[_Decoder, ...] = tuple(_DATA_DECODERS.get(i, _unknown) for i in range(256))
_ANY: tuple[_Decoder, ...] = tuple(
    decode_discovery if i == ord("B") else _welcome_or_consumer_hello if i == ord("W") else _DATA[i]
    for i in range(256)
)


def _explain(frames: Frames, exc: Exception) -> DecodeError:
    """The error for input on which a decoder failed with something else than DecodeError."""
    if not frames:
        return DecodeError("no frames")
    if not frames[0]:
        return DecodeError("frame 0 is empty")
    # Not reached for bytes frames as far as the fuzz tests know; kept as a safety net so
    # that a peer can never crash a node with a message nobody thought of.
    error = DecodeError(f"malformed frames ({type(exc).__name__}: {exc})")
    error.__cause__ = exc
    return error


def decode_data(frames: Frames) -> DataMessage:
    """Decode a message received on a data socket.

    ``frames`` is what ``recv_multipart()`` returns: frame 0 and, for RECORD and
    DIRECT-RECORD, the content. Raises :class:`DecodeError` and nothing else.
    """
    try:
        return _DATA[frames[0][0]](frames)  # type: ignore[return-value]
    except DecodeError:
        raise
    except Exception as exc:
        if all_bytes(frames):
            error = _explain(frames, exc)
            raise error from error.__cause__
    return decode_data(as_frames(frames))


def decode(frames: Frames) -> Message:
    """Decode any Dafka message: data commands, beacons and the tower's welcome.

    Use :func:`decode_data` on data sockets and :func:`decode_discovery` on beacon sockets
    when the socket is known: they refuse what cannot arrive there.
    """
    try:
        return _ANY[frames[0][0]](frames)
    except DecodeError:
        raise
    except Exception as exc:
        if all_bytes(frames):
            error = _explain(frames, exc)
            raise error from error.__cause__
    return decode(as_frames(frames))


__all__ = ["HEADER_CACHE_LIMIT", "decode", "decode_data"]
