"""Turning whatever a caller passed as "frames" into ``list[bytes]``, or a clear error.

The decoders' fast paths assume ``bytes`` frames (what pyzmq's ``recv_multipart()`` gives).
When they trip over something else (``memoryview``, ``zmq.Frame``, ``bytearray``...) they
fall back to :func:`as_frames` and retry; when it is not frames at all, the caller gets a
:class:`DecodeError` saying so instead of a ``TypeError`` from deep inside.
"""

from __future__ import annotations

from collections.abc import Sequence

from dafka.protocol._errors import DecodeError


def as_frames(frames: object) -> list[bytes]:
    """``frames`` as a list of ``bytes``, copying buffers that are not ``bytes``."""
    if isinstance(frames, str | bytes | bytearray | memoryview) or not isinstance(frames, Sequence):
        raise DecodeError(f"frames must be a sequence of bytes, got {type(frames).__name__}")
    if not frames:
        raise DecodeError("no frames")
    out: list[bytes] = []
    for index, frame in enumerate(frames):
        if frame.__class__ is bytes:
            out.append(frame)
            continue
        if isinstance(frame, str):
            raise DecodeError(f"frame {index} is a str, not bytes")
        try:
            out.append(bytes(memoryview(frame)))
        except TypeError:
            raise DecodeError(f"frame {index} is a {type(frame).__name__}, not bytes") from None
    return out


def all_bytes(frames: object) -> bool:
    """Whether ``frames`` is already a sequence of ``bytes`` (so a retry would not help)."""
    return isinstance(frames, list | tuple) and all(f.__class__ is bytes for f in frames)


def preview(frame: bytes, limit: int = 24) -> str:
    """A short printable form of a frame, for error messages about junk."""
    return repr(frame[:limit]) + ("..." if len(frame) > limit else "")


__all__ = ["all_bytes", "as_frames", "preview"]
