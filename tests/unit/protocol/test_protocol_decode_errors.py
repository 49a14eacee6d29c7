"""Decode refuses bad frames with DecodeError, a readable reason, and nothing else."""

from __future__ import annotations

import pickle

import pytest

from dafka.errors import DafkaError
from dafka.protocol import (
    Ack,
    Beacon,
    ConsumerHello,
    DecodeError,
    DirectHead,
    DirectRecord,
    Fetch,
    GetHeads,
    Head,
    Message,
    PeerEndpoint,
    Record,
    StoreHello,
    Welcome,
    decode,
    decode_data,
    decode_discovery,
    encode,
)

P = "0123456789ABCDEF0123456789ABCDEF"
PB = P.encode()

SAMPLES: list[Message] = [
    Record("hello", P, 5, b"CONTENT"),
    DirectRecord("C", "hello", P, 5, b"x"),
    Fetch(P, "C", "hello", 5, 10),
    Ack(P, "hello", 5),
    Head("hello", P, 5),
    DirectHead("C", "hello", P, 5),
    GetHeads("hello", "C"),
    ConsumerHello("S", "C", ("hello", "world")),
    StoreHello("C", "S"),
]


def _reason(frames: object, decoder=decode) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(DecodeError) as info:
        decoder(frames)
    assert info.value.__cause__ is None, "fell through to the last-resort fallback"
    return str(info.value)


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_every_truncation_of_frame0_is_refused(message: Message) -> None:
    frames = encode(message)
    for cut in range(len(frames[0])):
        damaged = [frames[0][:cut], *frames[1:]]
        reason = _reason(damaged, decode_data)
        assert "truncated" in reason or cut <= 1 or "empty" in reason, (cut, reason)


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_trailing_garbage_is_refused(message: Message) -> None:
    frames = encode(message)
    assert "1 bytes of trailing garbage" in _reason([frames[0] + b"!", *frames[1:]])


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
@pytest.mark.parametrize("version", [0, 2, 0x30, 0xFF])
def test_wrong_version_is_refused(message: Message, version: int) -> None:
    frames = encode(message)
    at = frames[0].index(b"\0") + 1
    damaged = frames[0][:at] + bytes((version,)) + frames[0][at + 1 :]
    assert f"unsupported version {version}" in _reason([damaged, *frames[1:]])


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_missing_and_extra_frames_are_refused(message: Message) -> None:
    frames = encode(message)
    if len(frames) == 2:
        assert "content frame is missing" in _reason(frames[:1])
        assert "3 frames, expected 2" in _reason([*frames, b""])
    else:
        assert "2 frames, expected 1" in _reason([*frames, b""])
        assert "3 frames, expected 1" in _reason([*frames, b"", b"x"])


def test_signature_of_the_rfc_is_not_accepted() -> None:
    frames = encode(Record("hello", P, 5, b"x"))
    assert "unknown command ID 0xaa" in _reason([b"\xaa\xa5" + frames[0], frames[1]])


@pytest.mark.parametrize("command_id", [b"X", b"m", b"Z", b"\x00", b"\xff", b"B"])
def test_unknown_command_ids_are_refused_on_data_sockets(command_id: bytes) -> None:
    assert "unknown command ID" in _reason([command_id + b"hello\0\x01"], decode_data)


@pytest.mark.parametrize("cls", [Record, Head])
def test_topic_prefix_must_match_the_subject(cls: type) -> None:
    frame0 = encode(cls("hello", P, 5, b"x") if cls is Record else cls("hello", P, 5))[0]
    # Same layout, prefix "hellp": a subscriber to "hellp" must not get a "hello" record.
    damaged = frame0[:5] + b"p" + frame0[6:]
    frames = [damaged, b"x"] if cls is Record else [damaged]
    assert "subject 'hello' differs from the topic prefix 'hellp'" in _reason(frames)


def test_record_of_another_topic_with_a_shared_prefix_is_refused() -> None:
    # ZeroMQ delivers "hello2" to a "hello" subscriber; a RECORD whose inline topic and
    # subject disagree is malformed whatever the subscription.
    good = encode(Record("hello2", P, 1, b""))
    damaged = b"Mhello\0" + good[0][len(b"Mhello2\0") :]
    assert "RECORD" in _reason([damaged, b""])


@pytest.mark.parametrize(
    ("frame0", "reason"),
    [
        (b"M\0\x01\x01p\x01t" + bytes(8), "inline topic (topic) is empty"),
        (b"Mt\0\x01\x00\x01t" + bytes(8), "producer is empty"),
        (b"Mt\0\x01\x01\0\x01t" + bytes(8), "producer contains a NUL byte"),
        (b"K" + PB + b"\0\x01\x00" + bytes(8), "topic is empty"),
        (b"M" + b"t" * 256 + b"\0\x01", "inline topic (topic) is 256 bytes long"),
        (b"Mhello", "no NUL terminator"),
        (b"Mhello\0", "version byte is missing"),
        (b"Mhello\0\x01", "producer is missing"),
        (b"Mhello\0\x01\x05abc", "producer is 5 bytes long but 3 are left"),
        (b"Mt\0\x01\x01p\x01t" + bytes(7), "sequence take 8 bytes but 7 are left"),
        (b"Ft\0\x01\x01c\x01t" + bytes(8), "sequence and count take 12 bytes but 8"),
    ],
)
def test_field_problems_are_explained(frame0: bytes, reason: str) -> None:
    frames = [frame0, b""] if frame0[:1] == b"M" else [frame0]
    assert reason in _reason(frames)


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        (b"", "topic count is missing"),
        (b"\x00\x00", "topic count is missing"),
        (b"\xff\xff\xff\xff", "4294967295 topics cannot fit"),
        (b"\x00\x00\x00\x02\x00\x00\x00\x01a\x00\x00", "2 topics cannot fit in the 7 bytes"),
        (b"\x00\x00\x00\x02\x00\x00\x00\x06abcdef", "topic 1 is missing"),
        (b"\x00\x00\x00\x01\x00\x00\x01\x00abc", "topic 0 is 256 bytes long but 3 are left"),
        (b"\x00\x00\x00\x01\x00\x00\x01\x00" + b"a" * 256, "topic 0 is 256 bytes long (at most"),
        (b"\x00\x00\x00\x01\x00\x00\x00\x00!", "topic 0 is empty"),
        (b"\x00\x00\x00\x01\x00\x00\x00\x01\x00", "topic 0 contains a NUL byte"),
        (b"\x00\x00\x00\x01\x00\x00\x00\x01ab", "1 bytes of trailing garbage"),
    ],
)
def test_consumer_hello_topic_list_problems(tail: bytes, reason: str) -> None:
    assert reason in _reason([b"WS\0\x01\x01C" + tail], decode_data)


def test_a_lone_w_is_a_welcome_anywhere_but_on_a_data_socket() -> None:
    assert decode([b"W"]) == Welcome()
    assert decode_discovery([b"W"]) == Welcome()
    assert "CONSUMER-HELLO" in _reason([b"W"], decode_data)


def test_a_welcome_is_one_frame() -> None:
    assert "WELCOME: 2 frames, expected 1" in _reason([b"W", b""], decode_discovery)
    assert "CONSUMER-HELLO" in _reason([b"W", b""], decode)


def test_data_messages_are_not_discovery_messages() -> None:
    assert "not a beacon or welcome" in _reason(encode(Ack(P, "t", 1)), decode_discovery)
    assert "unknown command ID 'B'" in _reason(encode(Beacon(P, "", 1)), decode_data)


@pytest.mark.parametrize(
    ("frames", "reason"),
    [
        ([b"B", PB, b"", b"55a6"], "port b'55a6' is not a decimal number"),
        ([b"B", PB, b"", b""], "is not a decimal number"),
        ([b"B", PB, b"", b"+80"], "is not a decimal number"),
        ([b"B", PB, b"", b" 80"], "is not a decimal number"),
        ([b"B", PB, b"", b"080"], "is not a decimal number"),
        ([b"B", PB, b"", b"123456"], "is not a decimal number"),
        ([b"B", PB, b"", "٣".encode()], "is not a decimal number"),
        ([b"B", PB, b"", b"65536"], "port 65536 is outside 0..65535"),
        ([b"B", b"", b"", b"80"], "node id is empty"),
        ([b"B", PB, b"h\0st", b"80"], "host contains a NUL byte"),
        ([b"B", PB, b""], "endpoint is empty"),
        ([b"B", b"x" * 256, b"tcp://h:1"], "node id is 256 bytes long"),
        ([b"B", PB], "2 frames, expected 4"),
        ([b"B", PB, b"", b"80", b""], "5 frames, expected 4"),
        ([b"Bx", PB, b"", b"80"], "not a beacon or welcome"),
        ([], "no frames"),
    ],
)
def test_beacon_problems_are_explained(frames: list[bytes], reason: str) -> None:
    assert reason in _reason(frames, decode_discovery)
    assert reason in _reason(frames, decode)


@pytest.mark.parametrize(
    ("frames", "reason"),
    [
        ([], "no frames"),
        ((), "no frames"),
        ([b""], "frame 0 is empty"),
        ([b"", b"x"], "frame 0 is empty"),
        (b"Mhello\0\x01", "frames must be a sequence of bytes, got bytes"),
        ("Mhello", "frames must be a sequence of bytes, got str"),
        (None, "frames must be a sequence of bytes, got NoneType"),
        (42, "frames must be a sequence of bytes, got int"),
        (["Mhello\0"], "frame 0 is a str, not bytes"),
        ([encode(Ack(P, "t", 1))[0], 5], "2 frames, expected 1"),
        ([b"Mt\0\x01\x01p\x01t" + bytes(8), 5], "frame 1 is a int, not bytes"),
        ([None], "frame 0 is a NoneType, not bytes"),
    ],
)
@pytest.mark.parametrize("decoder", [decode, decode_data])
def test_things_that_are_not_frames_are_refused(frames: object, reason: str, decoder) -> None:  # type: ignore[no-untyped-def]
    assert reason in _reason(frames, decoder)


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_buffers_other_than_bytes_are_accepted(message: Message) -> None:
    frames = encode(message)
    assert decode([memoryview(f) for f in frames]) == message  # type: ignore[misc]
    assert decode_data(tuple(bytearray(f) for f in frames)) == message  # type: ignore[misc]
    decoded = decode([frames[0], *(memoryview(f) for f in frames[1:])])  # type: ignore[list-item]
    assert decoded == message
    if isinstance(decoded, Record | DirectRecord):
        assert type(decoded.content) is bytes


def test_discovery_accepts_buffers_too() -> None:
    frames = [bytearray(b"B"), memoryview(PB), b"tcp://h:1"]
    assert decode_discovery(frames) == PeerEndpoint(P, "tcp://h:1")  # type: ignore[arg-type]


def test_decode_error_carries_reason_and_command_and_pickles() -> None:
    with pytest.raises(DecodeError) as info:
        decode_data([b"Mhello\0\x02"])
    error = info.value
    assert isinstance(error, DafkaError)
    assert error.command == "RECORD"
    assert error.reason == "1 frame, expected 2: the content frame is missing"
    assert str(error) == "RECORD: 1 frame, expected 2: the content frame is missing"
    again = pickle.loads(pickle.dumps(error))
    assert (again.reason, again.command, str(again)) == (error.reason, error.command, str(error))
    with pytest.raises(DecodeError) as info:
        decode_data([b"X"])
    assert info.value.command is None
