"""``application/x-ndjson``: one JSON object per ``\\n``-terminated line.

Encoding follows Go's ``encoding/json`` encoder, which Gazette uses: compact separators,
non-ASCII kept as UTF-8, and ``<``, ``>``, ``&``, U+2028, U+2029 escaped as ``\\uXXXX``
(these can only occur inside JSON strings, so a plain replace is safe). A blank or
malformed line is an error for that line only.
"""

from __future__ import annotations

import json
from typing import Any, Generic, Protocol, TypeVar

from dafka.message._errors import FramingError
from dafka.message._framing import StreamDecoder
from dafka.message._types import JsonMessage

__all__ = ["JSON_CONTENT_TYPE", "JsonFrameable", "JsonFraming"]

JSON_CONTENT_TYPE = "application/x-ndjson"

_GO_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


class JsonFrameable(Protocol):
    """A message the JSON framing can encode: it renders itself as a JSON document."""

    def to_json(self) -> Any:
        """The JSON-able document of this message."""
        ...


J_co = TypeVar("J_co", covariant=True)
J = TypeVar("J", bound=JsonFrameable)


class JsonFactory(Protocol[J_co]):  # pragma: no cover - typing only
    def from_json(self, document: Any) -> J_co: ...


def _go_dumps(document: Any) -> str:
    text = json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for char, escaped in _GO_ESCAPES:
        if char in text:
            text = text.replace(char, escaped)
    return text


class JsonFraming(Generic[J]):
    """JSON lines of ``message_type`` (anything with ``to_json`` and a ``from_json``)."""

    content_type = JSON_CONTENT_TYPE

    def __init__(self, message_type: JsonFactory[J] = JsonMessage) -> None:  # type: ignore[assignment]
        self.message_type = message_type

    def encode(self, message: J) -> bytes:
        """The line of ``message``, newline included."""
        try:
            return (_go_dumps(message.to_json()) + "\n").encode()
        except (TypeError, ValueError) as exc:
            raise FramingError(f"cannot encode {message!r} as JSON: {exc}") from None

    def new_decoder(self) -> _JsonDecoder[J]:
        """A decoder of one stream of lines."""
        return _JsonDecoder(self.message_type)


class _JsonDecoder(StreamDecoder[J]):
    def __init__(self, message_type: JsonFactory[J]) -> None:
        super().__init__()
        self._from_json = message_type.from_json

    def _next_frame(self) -> tuple[int, int, J] | None:
        buf, pos = self._buf, self._pos
        nl = buf.find(b"\n", pos)
        if nl < 0:
            if self._closed and pos < len(buf):
                raise self._unexpected_eof()
            return None
        self._pos = nl + 1
        begin, end = self._base + pos, self._base + nl + 1
        line = buf[pos:nl]
        if not line.strip():
            raise FramingError(f"blank line at [{begin}, {end})", begin=begin, end=end)
        try:
            document = json.loads(line)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
            raise FramingError(
                f"malformed JSON line at [{begin}, {end}): {exc}", begin=begin, end=end
            ) from None
        try:
            message = self._from_json(document)
        except FramingError as exc:
            raise FramingError(
                f"bad message at [{begin}, {end}): {exc}", begin=begin, end=end
            ) from None
        return begin, end, message
