"""The message protocol, the envelope, and three ready-made message types.

Gazette asks its ``Message`` interface for ``GetUUID``/``SetUUID``/``NewAcknowledgement``.
The Pythonic equivalent is a read/write ``uuid`` attribute (a plain slot or a property) and
a ``new_acknowledgement(partition)`` method. A type that cannot carry a UUID returns
:data:`NIL_UUID` and ignores assignment: its messages are then delivered at-least-once.

Ready-made types, one per built-in framing:

* :class:`JsonMessage` - a JSON object with a ``"uuid"`` member (``application/x-ndjson``);
* :class:`CsvRecord` - a list of strings whose first field is the UUID (``text/csv``);
* :class:`BinaryMessage` - 16 raw UUID bytes then an opaque payload (fixed framing).
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar, runtime_checkable

from dafka.message._errors import FramingError
from dafka.message._uuid import NIL_UUID

__all__ = [
    "BinaryMessage",
    "CsvRecord",
    "Envelope",
    "JsonMessage",
    "Message",
]


@runtime_checkable
class Message(Protocol):
    """What the publisher and the sequencer need from an application's message type."""

    @property
    def uuid(self) -> uuid.UUID:
        """The UUID last assigned (``NIL_UUID`` if none, or if the type cannot hold one)."""
        ...

    @uuid.setter
    def uuid(self, value: uuid.UUID) -> None: ...

    def new_acknowledgement(self, partition: str) -> Message:
        """An otherwise empty message of this type, to carry an ACK to ``partition``."""
        ...


M = TypeVar("M", bound=Message)


class Envelope(NamedTuple, Generic[M]):
    """A message with where it was read: partition and ``[begin, end)`` byte offsets.

    A named tuple: cheap to build and unpack, which matters on the sequencer's hot path.
    """

    partition: str
    begin: int
    end: int
    message: M


class JsonMessage:
    """A JSON object message: ``body`` holds the members other than ``"uuid"``."""

    __slots__ = ("body", "uuid")
    UUID_FIELD: ClassVar[str] = "uuid"

    def __init__(self, body: dict[str, Any] | None = None, uuid: uuid.UUID = NIL_UUID) -> None:
        self.body: dict[str, Any] = {} if body is None else body
        self.uuid = uuid

    def new_acknowledgement(self, partition: str) -> JsonMessage:
        """An ACK is an object carrying only its UUID."""
        return type(self)()

    def to_json(self) -> dict[str, Any]:
        """The JSON object to encode (the UUID first, as its canonical string)."""
        return {self.UUID_FIELD: str(self.uuid), **self.body}

    @classmethod
    def from_json(cls, document: object) -> JsonMessage:
        """Build from a decoded JSON document; a missing UUID means :data:`NIL_UUID`."""
        if not isinstance(document, dict):
            raise FramingError(f"expected a JSON object, got {type(document).__name__}")
        text = document.pop(cls.UUID_FIELD, None)
        if text is None:
            return cls(document)
        if not isinstance(text, str):
            raise FramingError(f"{cls.UUID_FIELD!r} must be a string")
        try:
            value = uuid.UUID(text)
        except ValueError as exc:
            raise FramingError(f"bad UUID {text!r}: {exc}") from None
        return cls(document, value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JsonMessage):
            return NotImplemented
        return self.uuid == other.uuid and self.body == other.body

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"JsonMessage({self.body!r}, uuid={self.uuid})"


class CsvRecord:
    """A CSV record whose first field is the UUID's canonical string (Gazette's CSVRecord)."""

    __slots__ = ("_uuid", "fields")

    def __init__(self, fields: list[str], uuid: uuid.UUID | None = None) -> None:
        if not fields:
            raise FramingError("a CSV record needs at least its UUID field")
        self.fields = fields
        self._uuid = NIL_UUID
        if uuid is not None:
            self.uuid = uuid
        elif fields[0]:
            self._uuid = _parse_uuid(fields[0])

    @property
    def uuid(self) -> uuid.UUID:
        """The UUID of the first field (parsed once)."""
        return self._uuid

    @uuid.setter
    def uuid(self, value: uuid.UUID) -> None:
        self._uuid = value
        self.fields[0] = str(value)

    def new_acknowledgement(self, partition: str) -> CsvRecord:
        """An ACK has as many fields as this record, all empty but the UUID."""
        return type(self)([""] * len(self.fields))

    def to_csv(self) -> list[str]:
        """The fields to encode."""
        return self.fields

    @classmethod
    def from_csv(cls, fields: list[str]) -> CsvRecord:
        """Build from decoded fields; the first must parse as a UUID."""
        if not fields:
            raise FramingError("fields are empty")
        return cls(fields, _parse_uuid(fields[0]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CsvRecord):
            return NotImplemented
        return self.fields == other.fields

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"CsvRecord({self.fields!r})"


class BinaryMessage:
    """An opaque payload; its frame holds the 16 UUID bytes, then the payload."""

    __slots__ = ("payload", "uuid")

    def __init__(self, payload: bytes = b"", uuid: uuid.UUID = NIL_UUID) -> None:
        self.payload = payload
        self.uuid = uuid

    def new_acknowledgement(self, partition: str) -> BinaryMessage:
        """An ACK has an empty payload."""
        return type(self)()

    def to_bytes(self) -> bytes:
        """The frame payload: UUID bytes then the payload."""
        return self.uuid.bytes + self.payload

    @classmethod
    def from_bytes(cls, data: bytes) -> BinaryMessage:
        """Build from a frame payload of at least 16 bytes."""
        if len(data) < 16:
            raise FramingError(f"a binary message has at least 16 bytes, not {len(data)}")
        return cls(bytes(data[16:]), uuid.UUID(bytes=bytes(data[:16])))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BinaryMessage):
            return NotImplemented
        return self.uuid == other.uuid and self.payload == other.payload

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"BinaryMessage({self.payload!r}, uuid={self.uuid})"


def _parse_uuid(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError as exc:
        raise FramingError(f"bad UUID {text!r}: {exc}") from None
