"""``text/csv``: one record per line, the first field the message's UUID.

Encoding follows Go's ``encoding/csv`` writer (which Gazette uses): ``,`` separated, ``\\n``
terminated, a field quoted only if it contains ``,``, ``"``, ``\\r`` or ``\\n``, begins with
a space or tab, or is ``\\.``. Decoding accepts RFC 4180 quoting, including newlines inside
quoted fields, skips blank lines as Go's reader does, and fixes the field count of the
stream by its first record: a record with another count is an error for that record only.
"""

from __future__ import annotations

import csv
from typing import Generic, Protocol, TypeVar

from dafka.message._errors import FramingError
from dafka.message._framing import StreamDecoder
from dafka.message._types import CsvRecord

__all__ = ["CSV_CONTENT_TYPE", "CsvFrameable", "CsvFraming"]

CSV_CONTENT_TYPE = "text/csv"


class CsvFrameable(Protocol):
    """A message the CSV framing can encode: its fields, the UUID first."""

    def to_csv(self) -> list[str]:
        """The record's fields."""
        ...


C_co = TypeVar("C_co", covariant=True)
C = TypeVar("C", bound=CsvFrameable)


class CsvFactory(Protocol[C_co]):  # pragma: no cover - typing only
    def from_csv(self, fields: list[str]) -> C_co: ...


def _needs_quotes(field: str) -> bool:
    if not field:
        return False
    if field == "\\." or field[0] in " \t" or field[0].isspace():
        return True
    return any(c in field for c in ',"\r\n')


def encode_csv_record(fields: list[str]) -> str:
    """One record as Go's ``csv.Writer`` writes it, ``\\n`` included."""
    out = []
    for field in fields:
        if _needs_quotes(field):
            out.append('"' + field.replace('"', '""') + '"')
        else:
            out.append(field)
    return ",".join(out) + "\n"


class CsvFraming(Generic[C]):
    """CSV records of ``message_type`` (anything with ``to_csv`` and a ``from_csv``)."""

    content_type = CSV_CONTENT_TYPE

    def __init__(self, message_type: CsvFactory[C] = CsvRecord) -> None:  # type: ignore[assignment]
        self.message_type = message_type

    def encode(self, message: C) -> bytes:
        """The record of ``message``, newline included."""
        fields = message.to_csv()
        if not all(isinstance(f, str) for f in fields):
            raise FramingError(f"CSV fields must be strings: {fields!r}")
        return encode_csv_record(fields).encode()

    def new_decoder(self) -> _CsvDecoder[C]:
        """A decoder of one stream of records."""
        return _CsvDecoder(self.message_type)


class _CsvDecoder(StreamDecoder[C]):
    def __init__(self, message_type: CsvFactory[C]) -> None:
        super().__init__()
        self._from_csv = message_type.from_csv
        self._field_count = 0  # Fixed by the first record.

    def _next_frame(self) -> tuple[int, int, C] | None:
        buf = self._buf
        while True:
            pos = self._pos
            # A record ends at the first newline after which its quotes are balanced.
            search = pos
            while True:
                nl = buf.find(b"\n", search)
                if nl < 0:
                    if self._closed and pos < len(buf):
                        raise self._unexpected_eof()
                    return None
                if buf.count(b'"', pos, nl) % 2 == 0:
                    break
                search = nl + 1
            self._pos = nl + 1
            raw = buf[pos : nl + 1]
            if raw.strip(b"\r\n") == b"":
                continue  # Blank lines are skipped, as Go's csv.Reader does.
            begin, end = self._base + pos, self._base + nl + 1
            try:
                text = raw.decode()
                fields = next(csv.reader([text], strict=True))
            except (UnicodeDecodeError, csv.Error, StopIteration) as exc:
                raise FramingError(
                    f"malformed CSV record at [{begin}, {end}): {exc}", begin=begin, end=end
                ) from None
            if self._field_count == 0:
                self._field_count = len(fields)
            elif len(fields) != self._field_count:
                raise FramingError(
                    f"record at [{begin}, {end}) has {len(fields)} fields, expected "
                    f"{self._field_count}",
                    begin=begin,
                    end=end,
                )
            try:
                message = self._from_csv(fields)
            except FramingError as exc:
                raise FramingError(
                    f"bad message at [{begin}, {end}): {exc}", begin=begin, end=end
                ) from None
            return begin, end, message
