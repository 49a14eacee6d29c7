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


def test_handovers_are_a_key_of_their_own_absent_when_there_are_none() -> None:
    beat = MemberBeat("g", "m1", 3, handed=(("t", "p", 42, 2, 1_700_000_000_000_000),))
    frames = encode(beat)
    assert b'"handed":[["t","p",42,2,1700000000000000]]' in frames[1]
    assert decode_data(frames) == beat
    assert b"handed" not in encode(BEAT)[1]  # the original form: older members read it


def test_the_tenure_clock_is_a_key_of_its_own_absent_while_zero() -> None:
    beat = MemberBeat("g", "m1", 3, tenure=1_700_000_000_000_001)
    frames = encode(beat)
    assert frames[1].endswith(b',"tenure":1700000000000001,"topics":[],"view":[]}')
    assert decode_data(frames) == beat
    assert b"tenure" not in encode(BEAT)[1]  # the original form: older members read it


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
    return ("{" + ",".join(f'"{k}":{v}' for k, v in sorted(fields.items()) if v) + "}").encode()


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
        _state(handed="[]"),
        _state(handed='[["t","p",1,0]]'),
        _state(handed='[["t","p",1,0,-1]]'),
        _state(handed='[["t","p",1,0,1.5]]'),
        _state(handed='{"t":1}'),
        _state(tenure="0"),
        _state(tenure="-1"),
        _state(tenure="1.5"),
        _state(tenure='"1"'),
        b"[" * 100_000,
    ],
)
def test_a_malformed_state_is_a_decode_error(state: bytes) -> None:
    # the helper's form is canonical: what is refused below is the value
    good = decode_data([encode(BEAT)[0], _state(handed='[["t","p",1,0,2]]')])
    assert isinstance(good, MemberBeat)
    assert good.handed == (("t", "p", 1, 0, 2),)
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
    with pytest.raises(EncodeError, match="tenure"):
        encode(MemberBeat("g", "m", 0, tenure=-1))
