"""A fencing GET-HEADS: a named producer's resume names its new run and partition count.

The two integers (epoch u64, partitions u32) sit at the end of frame 0, where a C store,
which reads the fields it knows and ignores the rest of the frame, never looks: a C store
answers it as the GET-HEADS it always was (docs/protocol.md, "Fencing resume").
"""

from __future__ import annotations

import pytest

from dafka.protocol import DecodeError, EncodeError, GetHeads, decode_data, encode


def test_a_fencing_get_heads_is_the_c_form_plus_its_trailer() -> None:
    plain = encode(GetHeads("t", "w.0"))[0]
    fencing = encode(GetHeads("t", "w.0", 0x0102030405060708, 3))[0]
    assert fencing == plain + bytes.fromhex("0102030405060708" + "00000003")
    assert decode_data([fencing]) == GetHeads("t", "w.0", 0x0102030405060708, 3)
    assert decode_data([plain]) == GetHeads("t", "w.0")


@pytest.mark.parametrize(
    ("message", "why"),
    [
        (GetHeads("t", "w.0", 5, 0), "needs an epoch and a partition count"),
        (GetHeads("t", "w.0", 0, 2), "needs an epoch and a partition count"),
        (GetHeads("t", "w.1", 5, 2), "partition 0"),
        (GetHeads("t", "w.0", 5, 1 << 32), "partitions"),
    ],
)
def test_the_encoder_refuses_a_half_said_fence(message: GetHeads, why: str) -> None:
    with pytest.raises(EncodeError, match=why):
        encode(message)


@pytest.mark.parametrize(
    ("requester", "trailer", "why"),
    [
        ("w.0", "0000000000000000" + "00000002", "epoch or partitions 0"),
        ("w.0", "0000000000000005" + "00000000", "epoch or partitions 0"),
        ("w.1", "0000000000000005" + "00000002", "not a partition 0"),
        ("w.0", "0000000000000005" + "0000", "trailing garbage"),
    ],
)
def test_the_decoder_refuses_what_the_encoder_never_sends(
    requester: str, trailer: str, why: str
) -> None:
    frame = encode(GetHeads("t", requester))[0] + bytes.fromhex(trailer)
    with pytest.raises(DecodeError, match=why):
        decode_data([frame])
