"""Framings: how messages are laid out in a partition's byte stream, by content type.

A :class:`Framing` encodes one message to bytes and makes incremental decoders. A decoder
is fed the stream in chunks ``(offset, data)`` - any sizes, frames may straddle chunks -
and returns ``(begin, end, message)`` per frame, where ``[begin, end)`` are the frame's
byte offsets in the stream. A bad frame raises :class:`FramingError` for that frame only;
the next call continues with the next frame. A chunk whose offset does not continue the
previous one drops the incomplete frame it interrupted (reported as an error).

Registered on import, as in Gazette:

=================================  =============================================
``application/x-ndjson``           :class:`JsonFraming` (one JSON object per line)
``text/csv``                       :class:`CsvFraming` (first field the UUID)
``application/x-protobuf-fixed``   :class:`FixedFraming` (magic, LE length, payload)
=================================  =============================================
"""

from __future__ import annotations

import abc
import threading
from typing import Generic, Protocol, TypeVar

from dafka.message._errors import FramingError, UnknownContentTypeError

__all__ = [
    "FrameDecoder",
    "Framing",
    "StreamDecoder",
    "framing_by_content_type",
    "register_framing",
    "registered_content_types",
]

M = TypeVar("M")
M_co = TypeVar("M_co", covariant=True)


class FrameDecoder(Protocol[M_co]):
    """An incremental decoder of one byte stream."""

    def feed(self, offset: int, data: bytes) -> None:
        """Append ``data``, which starts at byte ``offset`` of the stream."""
        ...

    def next(self) -> tuple[int, int, M_co] | None:
        """The next frame as ``(begin, end, message)``, or ``None`` if more bytes are needed.

        Raises :class:`FramingError` for one bad frame (the next call goes on after it).
        """
        ...

    def close(self) -> None:
        """Mark the end of the stream: a trailing incomplete frame becomes an error."""
        ...


class Framing(Protocol[M]):
    """A content type's encoder and decoder factory."""

    @property
    def content_type(self) -> str:
        """The content type this framing is registered under."""
        ...

    def encode(self, message: M) -> bytes:
        """The complete frame of ``message``."""
        ...

    def new_decoder(self) -> FrameDecoder[M]:
        """A decoder for one stream."""
        ...


class StreamDecoder(abc.ABC, Generic[M]):
    """Shared buffering of the built-in decoders: subclasses find and parse one frame.

    The buffer is a ``bytes`` plus a read position (``_pos``): slicing out a frame is one
    copy, and the consumed prefix is dropped only when new data arrives.
    """

    def __init__(self) -> None:
        self._buf = b""
        self._pos = 0
        self._base = 0  # Stream offset of _buf[0].
        self._closed = False
        self._pending: FramingError | None = None

    def feed(self, offset: int, data: bytes) -> None:
        """Append ``data`` starting at stream ``offset`` (see the module docstring)."""
        if self._closed:
            raise FramingError("decoder is closed")
        expected = self._base + len(self._buf)
        if offset != expected:
            if self._pos < len(self._buf) and self._pending is None:
                self._pending = FramingError(
                    f"stream jumped from offset {expected} to {offset}: dropped "
                    f"{len(self._buf) - self._pos} bytes of an incomplete frame",
                    begin=self._base + self._pos,
                    end=expected,
                )
            self._buf, self._pos, self._base = bytes(data), 0, offset
            return
        if self._pos:
            self._base += self._pos
            self._buf = self._buf[self._pos :] + data
            self._pos = 0
        elif self._buf:
            self._buf += data
        else:
            self._buf = bytes(data)

    def close(self) -> None:
        """Mark the end of the stream."""
        self._closed = True

    def next(self) -> tuple[int, int, M] | None:
        """The next ``(begin, end, message)``, or ``None`` if more bytes are needed."""
        if self._pending is not None:
            error, self._pending = self._pending, None
            raise error
        return self._next_frame()

    @abc.abstractmethod
    def _next_frame(self) -> tuple[int, int, M] | None:
        """Parse one frame at ``_pos`` (advancing ``_pos`` past it, even when raising)."""

    def _unexpected_eof(self) -> FramingError:
        begin = self._base + self._pos
        end = self._base + len(self._buf)
        self._pos = len(self._buf)
        return FramingError(
            f"unexpected end of stream inside a frame [{begin}, {end})", begin=begin, end=end
        )


_registry: dict[str, Framing[object]] = {}
_registry_lock = threading.Lock()


def register_framing(framing: Framing[object]) -> None:
    """Register ``framing`` under its content type, replacing any previous one."""
    with _registry_lock:
        _registry[framing.content_type] = framing


def framing_by_content_type(content_type: str) -> Framing[object]:
    """The framing registered for ``content_type``; :class:`UnknownContentTypeError` if none."""
    with _registry_lock:
        framing = _registry.get(content_type)
    if framing is None:
        raise UnknownContentTypeError(f"unrecognized content-type {content_type!r}")
    return framing


def registered_content_types() -> list[str]:
    """The content types with a registered framing, sorted."""
    with _registry_lock:
        return sorted(_registry)
