"""``application/x-protobuf-fixed``: ``66 33 93 36``, uint32 little-endian length, payload.

The magic word lets a reader detect de-synchronisation: on a wrong word it skips to the
next magic word, reports the skipped bytes as a :class:`DesyncError`, and the next read
continues with the frame found there (Gazette's ``UnpackFixedFrame``). Gazette puts a
protobuf in the payload; our ready-made :class:`BinaryMessage` puts the 16 UUID bytes
then opaque bytes, and any type with ``to_bytes``/``from_bytes`` works.

``max_frame`` bounds the declared length: a header announcing more is treated as a
de-synchronisation rather than waiting for gigabytes that will never come.
"""

from __future__ import annotations

import struct
from typing import Final, Generic, Protocol, TypeVar

from dafka.message._errors import DesyncError, FramingError
from dafka.message._framing import StreamDecoder
from dafka.message._types import BinaryMessage

__all__ = [
    "FIXED_CONTENT_TYPE",
    "FIXED_FRAME_HEADER_LENGTH",
    "FIXED_FRAME_WORD",
    "BytesFrameable",
    "FixedFraming",
    "encode_fixed_frame",
]

FIXED_CONTENT_TYPE: Final = "application/x-protobuf-fixed"
FIXED_FRAME_WORD: Final = b"\x66\x33\x93\x36"
FIXED_FRAME_HEADER_LENGTH: Final = 8
_LENGTH = struct.Struct("<I")


class BytesFrameable(Protocol):
    """A message the fixed framing can encode: its payload bytes."""

    def to_bytes(self) -> bytes:
        """The frame payload."""
        ...


B_co = TypeVar("B_co", covariant=True)
B = TypeVar("B", bound=BytesFrameable)


class BytesFactory(Protocol[B_co]):  # pragma: no cover - typing only
    def from_bytes(self, data: bytes) -> B_co: ...


def encode_fixed_frame(payload: bytes) -> bytes:
    """Header and ``payload``."""
    if len(payload) > 0xFFFFFFFF:
        raise FramingError(f"payload of {len(payload)} bytes does not fit a uint32 length")
    return FIXED_FRAME_WORD + _LENGTH.pack(len(payload)) + payload


class FixedFraming(Generic[B]):
    """Fixed frames of ``message_type`` (anything with ``to_bytes`` and a ``from_bytes``)."""

    content_type = FIXED_CONTENT_TYPE

    def __init__(
        self,
        message_type: BytesFactory[B] = BinaryMessage,  # type: ignore[assignment]
        max_frame: int = 64 << 20,
    ) -> None:
        self.message_type = message_type
        self.max_frame = max_frame

    def encode(self, message: B) -> bytes:
        """The frame of ``message``."""
        return encode_fixed_frame(message.to_bytes())

    def new_decoder(self) -> _FixedDecoder[B]:
        """A decoder of one stream of frames."""
        return _FixedDecoder(self.message_type, self.max_frame)


class _FixedDecoder(StreamDecoder[B]):
    def __init__(self, message_type: BytesFactory[B], max_frame: int) -> None:
        super().__init__()
        self._from_bytes = message_type.from_bytes
        self._max_frame = max_frame

    def _next_frame(self) -> tuple[int, int, B] | None:
        buf, pos = self._buf, self._pos
        available = len(buf) - pos
        if available < FIXED_FRAME_HEADER_LENGTH:
            if available and self._closed:
                if buf[pos:] == b"\n":  # Gazette tolerates one trailing newline.
                    self._pos = len(buf)
                    return None
                raise self._unexpected_eof()
            return None
        if buf.startswith(FIXED_FRAME_WORD, pos):
            (size,) = _LENGTH.unpack_from(buf, pos + 4)
            if size <= self._max_frame:
                stop = pos + FIXED_FRAME_HEADER_LENGTH + size
                if stop > len(buf):
                    if self._closed:
                        raise self._unexpected_eof()
                    return None
                self._pos = stop
                begin, end = self._base + pos, self._base + stop
                try:
                    message = self._from_bytes(buf[pos + FIXED_FRAME_HEADER_LENGTH : stop])
                except FramingError as exc:
                    raise FramingError(
                        f"bad message at [{begin}, {end}): {exc}", begin=begin, end=end
                    ) from None
                return begin, end, message
        # Not at a frame boundary: skip to the next magic word and report what we skipped.
        found = buf.find(FIXED_FRAME_WORD, pos + 1)
        if found < 0:
            # Keep a tail that may be the start of a magic word still arriving.
            found = len(buf) if self._closed else max(pos + 1, len(buf) - 3)
        self._pos = found
        raise DesyncError(buf[pos:found], begin=self._base + pos, end=self._base + found)
