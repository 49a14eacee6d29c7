"""Framings: JSON lines, CSV, fixed binary frames, the registry, chunked decoding."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dafka.message import (
    CSV_CONTENT_TYPE,
    FIXED_CONTENT_TYPE,
    FIXED_FRAME_WORD,
    JSON_CONTENT_TYPE,
    NIL_UUID,
    BinaryMessage,
    CsvFraming,
    CsvRecord,
    DesyncError,
    FixedFraming,
    Flags,
    FramingError,
    JsonFraming,
    JsonMessage,
    ProducerID,
    UnknownContentTypeError,
    build_uuid,
    encode_fixed_frame,
    framing_by_content_type,
    registered_content_types,
)

P = ProducerID.fromhex("0123456789ab")
U1 = build_uuid(P, 0x1E9CC5F83FC2F950, Flags.CONTINUE_TXN)
U2 = build_uuid(P, 0x1E9CC5F83FC2F951, Flags.ACK_TXN)


def decode_all(decoder: object, data: bytes, chunk: int = 0) -> list[object]:
    """Feed ``data`` (in chunks of ``chunk`` bytes if given), collect frames and errors."""
    out: list[object] = []
    size = chunk or max(1, len(data))
    offset = 0

    def pull() -> None:
        while True:
            try:
                frame = decoder.next()  # type: ignore[attr-defined]
            except FramingError as exc:
                out.append(exc)
                continue
            if frame is None:
                return
            out.append(frame)

    for i in range(0, len(data), size):
        decoder.feed(offset, data[i : i + size])  # type: ignore[attr-defined]
        offset += len(data[i : i + size])
        pull()
    decoder.close()  # type: ignore[attr-defined]
    pull()
    return out


# -- registry ----------------------------------------------------------------------------


def test_registry_by_content_type() -> None:
    assert registered_content_types() == sorted(
        [CSV_CONTENT_TYPE, FIXED_CONTENT_TYPE, JSON_CONTENT_TYPE]
    )
    assert isinstance(framing_by_content_type("application/x-ndjson"), JsonFraming)
    assert isinstance(framing_by_content_type("text/csv"), CsvFraming)
    assert isinstance(framing_by_content_type("application/x-protobuf-fixed"), FixedFraming)
    with pytest.raises(UnknownContentTypeError):
        framing_by_content_type("application/x-nope")


# -- JSON lines --------------------------------------------------------------------------


def test_json_encodes_like_go() -> None:
    framing: JsonFraming[JsonMessage] = JsonFraming()
    message = JsonMessage({"s": "<a&b> é \u2028", "n": [1, 2.5, None, True]}, U1)
    assert framing.encode(message) == (
        b'{"uuid":"' + str(U1).encode() + b'","s":"\\u003ca\\u0026b\\u003e \xc3\xa9 \\u2028",'
        b'"n":[1,2.5,null,true]}\n'
    )


def test_json_round_trip_in_any_chunking() -> None:
    framing: JsonFraming[JsonMessage] = JsonFraming()
    messages = [JsonMessage({"i": i, "s": "x" * i}, U1 if i % 2 else U2) for i in range(20)]
    data = b"".join(framing.encode(m) for m in messages)
    for chunk in (0, 1, 7, 64):
        frames = decode_all(framing.new_decoder(), data, chunk)
        assert [f[2] for f in frames] == messages  # type: ignore[index]
        ends = [f[1] for f in frames]  # type: ignore[index]
        assert ends[-1] == len(data)
        assert [f[0] for f in frames][1:] == ends[:-1]  # type: ignore[index]


def test_json_bad_lines_are_errors_for_that_line_only() -> None:
    framing: JsonFraming[JsonMessage] = JsonFraming()
    good = framing.encode(JsonMessage({"a": 1}, U1))
    data = good + b"\n" + b"{not json\n" + b"[1,2]\n" + b'{"uuid":"zz"}\n' + good + b'{"a":'
    out = decode_all(framing.new_decoder(), data, 5)
    kinds = [type(o).__name__ for o in out]
    assert kinds == [
        "tuple",
        "FramingError",
        "FramingError",
        "FramingError",
        "FramingError",
        "tuple",
        "FramingError",
    ]
    blank = out[1]
    assert isinstance(blank, FramingError)
    assert (blank.begin, blank.end) == (len(good), len(good) + 1)
    assert "unexpected end" in str(out[-1])


def test_json_missing_uuid_is_nil() -> None:
    frames = decode_all(JsonFraming().new_decoder(), b'{"x":1}\n')
    assert frames[0][2] == JsonMessage({"x": 1}, NIL_UUID)  # type: ignore[index]


# -- CSV ---------------------------------------------------------------------------------


def test_csv_encodes_like_go() -> None:
    framing: CsvFraming[CsvRecord] = CsvFraming()
    record = CsvRecord([str(U1), "plain", "a,b", 'say "hi"', " lead", "multi\nline", "", "\\."])
    assert framing.encode(record) == (
        str(U1).encode() + b',plain,"a,b","say ""hi"""," lead","multi\nline",,"\\."\n'
    )


def test_csv_round_trip_with_quotes_and_newlines_in_any_chunking() -> None:
    framing: CsvFraming[CsvRecord] = CsvFraming()
    records = [CsvRecord([str(U1), f"v{i}", 'q"uote', "new\nline", ""]) for i in range(10)]
    data = b"".join(framing.encode(r) for r in records)
    for chunk in (0, 1, 3, 50):
        frames = decode_all(framing.new_decoder(), data, chunk)
        assert [f[2] for f in frames] == records  # type: ignore[index]


def test_csv_field_count_is_fixed_by_the_first_record() -> None:
    framing: CsvFraming[CsvRecord] = CsvFraming()
    data = (
        f"{U1},a,b\n".encode()
        + b"\n"  # Blank lines are skipped.
        + f"{U1},a\n".encode()
        + b"not-a-uuid,a,b\n"
        + b'x,"bad"quote,b\n'
        + f"{U2},c,d\n".encode()
    )
    out = decode_all(framing.new_decoder(), data, 4)
    kinds = [type(o).__name__ for o in out]
    assert kinds == ["tuple", "FramingError", "FramingError", "FramingError", "tuple"]
    assert "expected 3" in str(out[1])
    last = out[-1]
    assert isinstance(last, tuple)
    assert last[2].fields == [str(U2), "c", "d"]
    assert last[2].uuid == U2


def test_csv_record_uuid_accessors() -> None:
    record = CsvRecord(["", "x"])
    assert record.uuid == NIL_UUID
    record.uuid = U1
    assert record.fields == [str(U1), "x"]
    with pytest.raises(FramingError):
        CsvRecord([])


# -- fixed frames ------------------------------------------------------------------------


def test_fixed_frame_layout() -> None:
    framing: FixedFraming[BinaryMessage] = FixedFraming()
    frame = framing.encode(BinaryMessage(b"hello", U1))
    assert frame[:4] == bytes([0x66, 0x33, 0x93, 0x36]) == FIXED_FRAME_WORD
    assert frame[4:8] == (21).to_bytes(4, "little")
    assert frame[8:24] == U1.bytes
    assert frame[24:] == b"hello"


@given(payloads=st.lists(st.binary(max_size=40), max_size=8), chunk=st.integers(1, 30))
def test_fixed_round_trip(payloads: list[bytes], chunk: int) -> None:
    framing: FixedFraming[BinaryMessage] = FixedFraming()
    messages = [BinaryMessage(p, build_uuid(P, i + 1, 0)) for i, p in enumerate(payloads)]
    data = b"".join(framing.encode(m) for m in messages)
    assert [f[2] for f in decode_all(framing.new_decoder(), data, chunk)] == messages  # type: ignore[index]


def test_fixed_desync_skips_to_the_next_magic_word_and_continues() -> None:
    framing: FixedFraming[BinaryMessage] = FixedFraming()
    a = framing.encode(BinaryMessage(b"a", U1))
    b = framing.encode(BinaryMessage(b"b", U2))
    garbage = b"garbage\x66\x33!"
    for chunk in (0, 1, 5):
        out = decode_all(framing.new_decoder(), a + garbage + b, chunk)
        frames = [o for o in out if isinstance(o, tuple)]
        errors = [o for o in out if isinstance(o, DesyncError)]
        assert [f[2].payload for f in frames] == [b"a", b"b"]
        assert b"".join(e.skipped for e in errors) == garbage
        assert errors[0].begin == len(a)
        assert errors[-1].end == len(a) + len(garbage)
        assert frames[1][0] == len(a) + len(garbage)


def test_fixed_truncated_frame_and_trailing_newline() -> None:
    framing: FixedFraming[BinaryMessage] = FixedFraming()
    a = framing.encode(BinaryMessage(b"abc", U1))
    out = decode_all(framing.new_decoder(), a + b"\n")
    assert len(out) == 1  # One trailing newline is tolerated, as in Gazette.
    out = decode_all(framing.new_decoder(), a + a[:-1])
    assert isinstance(out[-1], FramingError)
    assert "unexpected end" in str(out[-1])
    out = decode_all(framing.new_decoder(), a + a[:5])
    assert isinstance(out[-1], FramingError)


def test_fixed_oversized_length_is_a_desync() -> None:
    framing: FixedFraming[BinaryMessage] = FixedFraming(max_frame=100)
    good = framing.encode(BinaryMessage(b"ok", U1))
    bogus = FIXED_FRAME_WORD + (10**6).to_bytes(4, "little") + b"zz"
    out = decode_all(framing.new_decoder(), bogus + good)
    assert isinstance(out[0], DesyncError)
    assert out[-1][2].payload == b"ok"  # type: ignore[index]


def test_fixed_short_payload_is_an_error() -> None:
    framing: FixedFraming[BinaryMessage] = FixedFraming()
    out = decode_all(framing.new_decoder(), encode_fixed_frame(b"short"))
    assert isinstance(out[0], FramingError)


# -- streams -----------------------------------------------------------------------------


def test_a_jump_in_offsets_drops_the_interrupted_frame() -> None:
    framing: JsonFraming[JsonMessage] = JsonFraming()
    line = framing.encode(JsonMessage({"a": 1}, U1))
    decoder = framing.new_decoder()
    decoder.feed(0, line + line[:5])
    assert decoder.next() is not None
    assert decoder.next() is None
    decoder.feed(1000, line)
    with pytest.raises(FramingError) as info:
        decoder.next()
    assert (info.value.begin, info.value.end) == (len(line), len(line) + 5)
    frame = decoder.next()
    assert frame is not None
    assert frame[:2] == (1000, 1000 + len(line))
    decoder.close()
    with pytest.raises(FramingError):
        decoder.feed(2000, b"")


def test_binary_message_accessors() -> None:
    message = BinaryMessage(b"x")
    assert message.uuid == NIL_UUID
    ack = message.new_acknowledgement("p")
    assert ack.payload == b""
    assert BinaryMessage.from_bytes(uuid.UUID(int=5).bytes + b"y") == BinaryMessage(
        b"y", uuid.UUID(int=5)
    )
