"""MEMBER (``Y``), the consumer group beat: its bytes, and every malformed state refused with
DecodeError (docs/protocol.md, docs/groups.md)."""

from __future__ import annotations

import pytest

from dafka.protocol import MEMBER_ID, DecodeError, EncodeError, MemberBeat, decode_data, encode

BEAT = MemberBeat("g", "m1", 3, "", ("t",), ("m1", "m2"), (("t", "p"),), False, 5)


def test_frames_are_the_documented_ones() -> None:
    frames = encode(BEAT)
    assert frames[0] == MEMBER_ID + b"g\x00\x01\x02m1" + (3).to_bytes(8, "big")
    assert frames[1] == (
        b'{"claims":[["t","p"]],"instance":"","leaving":false,"started":5,'
        b'"topics":["t"],"view":["m1","m2"]}'
    )
    assert decode_data(frames) == BEAT


@pytest.mark.parametrize(
    "state",
    [
        b"not json",
        b"[]",
        b'{"claims":[],"instance":"","leaving":false,"started":5,"topics":[]}',
        b'{"claims":[],"instance":"","leaving":false,"started":5,"topics":[],"view":[],"x":1}',
        b'{"claims":[["t"]],"instance":"","leaving":false,"started":5,"topics":[],"view":[]}',
        b'{"claims":[],"instance":"","leaving":0,"started":5,"topics":[],"view":[]}',
        b'{"claims":[],"instance":"","leaving":false,"started":-1,"topics":[],"view":[]}',
        b'{"claims":[],"instance":"","leaving":false,"started":5.0,"topics":[],"view":[]}',
        b'{"claims":[],"instance":"","leaving":false,"started":5,"topics":[""],"view":[]}',
        b'{"claims":[],"instance":"","leaving":false,"started":5,"topics":[1],"view":[]}',
        b'{"claims":[],"instance":"","leaving":false,"started":5,"topics":["\\ud800"],"view":[]}',
        b'{"view":[],"claims":[],"instance":"","leaving":false,"started":5,"topics":[]}',
        b'{"claims": [],"instance":"","leaving":false,"started":5,"topics":[],"view":[]}',
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
