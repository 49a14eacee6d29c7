"""MEMBER (``Y``), the consumer group beat: its bytes, and every malformed state refused with
DecodeError (docs/protocol.md, docs/groups.md)."""

from __future__ import annotations

import pytest

from dafka.protocol import MEMBER_ID, DecodeError, EncodeError, MemberBeat, decode_data, encode

BEAT = MemberBeat(
    "g", "m1", 3, "", ("t",), ("m1", "m2"), (("t", "p"),), False, 5, 7, "ab", (("m2", 4),)
)


def test_frames_are_the_documented_ones() -> None:
    frames = encode(BEAT)
    assert frames[0] == MEMBER_ID + b"g\x00\x01\x02m1" + (3).to_bytes(8, "big")
    assert frames[1] == (
        b'{"acks":{"m2":4},"claims":[["t","p"]],"digest":"ab","generation":7,"instance":"",'
        b'"leaving":false,"started":5,"topics":["t"],"view":["m1","m2"]}'
    )
    assert decode_data(frames) == BEAT


def _state(**changes: str) -> bytes:
    fields = {
        "acks": "{}",
        "claims": "[]",
        "digest": '""',
        "generation": "0",
        "instance": '""',
        "leaving": "false",
        "started": "5",
        "topics": "[]",
        "view": "[]",
    }
    fields.update(changes)
    return ("{" + ",".join(f'"{k}":{v}' for k, v in fields.items() if v) + "}").encode()


@pytest.mark.parametrize(
    "state",
    [
        b"not json",
        b"[]",
        _state(view=""),
        _state(x="1"),
        _state(claims='[["t"]]'),
        _state(leaving="0"),
        _state(started="-1"),
        _state(started="5.0"),
        _state(generation="true"),
        _state(digest='"\\u00e9"'),
        _state(acks='{"m":-1}'),
        _state(acks="[]"),
        _state(acks='{"b":1,"a":2}'),
        _state(topics='[""]'),
        _state(topics="[1]"),
        _state(topics='["\\ud800"]'),
        _state(claims="[] "),
        b"[" * 100_000,
    ],
)
def test_a_malformed_state_is_a_decode_error(state: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_data([encode(BEAT)[0], state])


def test_a_beat_without_its_state_frame_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="frames"):
        decode_data([encode(BEAT)[0]])


def test_bad_fields_are_encode_errors() -> None:
    with pytest.raises(EncodeError, match="group"):
        encode(MemberBeat("", "m", 0))
    with pytest.raises(EncodeError, match="claim"):
        encode(MemberBeat("g", "m", 0, claims=(("t",),)))  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match="started"):
        encode(MemberBeat("g", "m", 0, started=-1))
