"""Topic and partition names <-> directory names: safe, injective and reversible.

A topic or a partition (a producer id) is any wire string: ``str`` decoded from UTF-8 with
``surrogateescape``, so any byte string a peer sends, including ``/``, ``..``, NUL or bytes that
are not UTF-8. Such a name must never let a path escape the data directory, two names must
never share a directory, and the store must recover the names from the directory listing at
start-up (so that heads and topics are listed without any other catalogue).

The mapping works on the name's bytes (``name.encode("utf-8", "surrogateescape")``):

* ``A-Z a-z 0-9 _ -`` stand for themselves, and so does ``.`` except as the first character
  (so no directory is ``.``, ``..`` or hidden, and engine files starting with ``.`` never clash);
* every other byte is ``%XX`` with two upper-case hex digits (``/`` is ``%2F``, NUL ``%00``);
* the empty name is ``%`` (a lone ``%`` is never produced otherwise).

Only canonical forms are accepted back, so the mapping is a bijection between names and the
directory names it produces; anything else found on disk is not ours and is skipped.

Wire names are at most 255 bytes, so escaping can triple them past the 255-byte limit of a
directory name. A name whose escaped form is longer than :data:`MAX_PLAIN` gets the *long*
form: the first part of the escaped form, ``~`` (never produced by escaping) and a SHA-256
digest of the bytes; the full name is kept in a ``.name`` file inside the directory, which
:func:`name_from_directory` reads back and checks against the digest.

Case-insensitive filesystems are out of scope: ``a`` and ``A`` are different directories.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from dafka.storage._errors import InvalidNameError

MAX_PLAIN = 200
"""Longest escaped name used as is; longer ones get the hashed long form."""

NAME_FILE = ".name"
"""File holding the raw bytes of a long-form name, inside its directory."""

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.")
_ESCAPE = [chr(b) if b in _SAFE else f"%{b:02X}" for b in range(256)]
_PLAIN_RE = re.compile(r"(?:[A-Za-z0-9_-]|%[0-9A-F]{2})(?:[A-Za-z0-9_.-]|%[0-9A-F]{2})*")
_LONG_PREFIX = 120
_DIGEST_HEX = 40
_LONG_RE = re.compile(r"[A-Za-z0-9_.%-]*~[0-9a-f]{40}")


def name_bytes(name: str, what: str = "name") -> bytes:
    """The bytes a wire string stands for; only strings a wire decode can produce are accepted.

    ``surrogateescape`` is not injective on every ``str`` (``"é"`` and ``"\\udcc3\\udca9"``
    both give ``b"\\xc3\\xa9"``), so a string that does not come back unchanged from its bytes is
    refused: otherwise two names could share a log.
    """
    if not isinstance(name, str):
        raise InvalidNameError(f"{what} must be a str, got {type(name).__name__}")
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise InvalidNameError(f"{what} {name!r} is not a wire string: {exc.reason}") from None
    if raw.decode("utf-8", "surrogateescape") != name:
        raise InvalidNameError(f"{what} {name!r} is not in the canonical wire decoding")
    return raw


def _escape(raw: bytes) -> str:
    if not raw:
        return "%"
    out = "".join([_ESCAPE[b] for b in raw])
    return "%2E" + out[1:] if out[0] == "." else out


def _unescape(text: str) -> bytes | None:
    if text == "%":
        return b""
    if not _PLAIN_RE.fullmatch(text):
        return None
    raw = _decode_percent(text)
    return raw if _escape(raw) == text else None


def _decode_percent(text: str) -> bytes:
    out = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "%":
            out.append(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(ord(text[i]))
            i += 1
    return bytes(out)


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:_DIGEST_HEX]


def directory_name(name: str, what: str = "name") -> str:
    """The directory name standing for ``name`` (plain or long form); never a path."""
    raw = name_bytes(name, what)
    escaped = _escape(raw)
    if len(escaped) <= MAX_PLAIN:
        return escaped
    prefix = escaped[:_LONG_PREFIX]
    cut = prefix.rfind("%", len(prefix) - 2)
    if cut != -1:  # never cut an escape in half, so the prefix stays readable
        prefix = prefix[:cut]
    return f"{prefix}~{_digest(raw)}"


def is_long_form(directory: str) -> bool:
    """Whether the name's bytes live in a ``.name`` file (see :func:`write_name_file`)."""
    return "~" in directory


def write_name_file(directory: Path, name: str) -> None:
    """Record a long-form name in its directory (written before anything else goes in)."""
    path = directory / NAME_FILE
    tmp = directory / (NAME_FILE + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, name_bytes(name))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def name_from_directory(directory: Path) -> str | None:
    """The name a directory stands for, or None if it is not one of ours (skipped)."""
    text = directory.name
    if _LONG_RE.fullmatch(text):
        try:
            raw = (directory / NAME_FILE).read_bytes()
        except OSError:
            return None
        name = raw.decode("utf-8", "surrogateescape")
    else:
        raw_plain = _unescape(text)
        if raw_plain is None:
            return None
        name = raw_plain.decode("utf-8", "surrogateescape")
    # Only the canonical directory of a name counts: this keeps the mapping a bijection.
    return name if directory_name(name) == text else None


__all__ = [
    "MAX_PLAIN",
    "NAME_FILE",
    "directory_name",
    "is_long_form",
    "name_bytes",
    "name_from_directory",
    "write_name_file",
]
