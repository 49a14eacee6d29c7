"""Strings on the wire: ``str`` in Python, UTF-8 with ``surrogateescape`` in bytes.

``surrogateescape`` makes bytes -> str -> bytes the identity for *any* bytes, so whatever a C
peer sends as a node id or topic comes back out byte for byte. The rules a name must follow
are the intersection of what the wire and the C reference allow:

* at most 255 bytes (a ``string`` field has a 1-byte length);
* no NUL byte (C handles every field as a NUL-terminated C string, and the inline topic of
  frame 0 ends at the first NUL);
* not empty (node ids are 1-255 bytes; an empty topic would subscribe to every topic).
"""

from __future__ import annotations

from dafka.protocol._errors import EncodeError

MAX_NAME = 255
"""Longest node id or topic, in bytes."""


def text(raw: bytes) -> str:
    """Wire bytes as ``str``; never fails."""
    return raw.decode("utf-8", "surrogateescape")


def wire(value: object, what: str) -> bytes:
    """A ``str`` field as wire bytes, with only the encoding checked (hosts, endpoints)."""
    if not isinstance(value, str):
        raise EncodeError(f"{what} must be a str, got {type(value).__name__}")
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise EncodeError(f"{what} {value!r} is not encodable as UTF-8: {exc.reason}") from None
    if b"\0" in raw:
        raise EncodeError(f"{what} {value!r} contains a NUL byte")
    return raw


def name(value: object, what: str) -> bytes:
    """A node id or topic as wire bytes: 1-255 bytes, no NUL, else :class:`EncodeError`."""
    raw = wire(value, what)
    if not raw:
        raise EncodeError(f"{what} must not be empty")
    if len(raw) > MAX_NAME:
        raise EncodeError(f"{what} is {len(raw)} bytes long; at most {MAX_NAME} fit on the wire")
    return raw


def name_problem(raw: bytes) -> str | None:
    """Why ``raw`` is not a valid name, or ``None`` if it is: the decoder's :func:`name`."""
    if not raw:
        return "is empty"
    if len(raw) > MAX_NAME:
        return f"is {len(raw)} bytes long (at most {MAX_NAME})"
    if b"\0" in raw:
        return "contains a NUL byte"
    return None


__all__ = ["MAX_NAME", "name", "name_problem", "text", "wire"]
