"""The run trailer of RECORD, DIRECT-RECORD, ACK, HEAD, DIRECT-HEAD: epoch and run start.

A named producer's records say which run wrote them (docs/guarantees.md, "A reused sequence:
run epochs"). The two u64 sit at the end of frame 0, where a C node, which reads the fields
it knows and ignores the rest of the frame (dafka_proto.c's RECORD parser stops after the
sequence), never looks: a C peer reads exactly the record it read before.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from dafka.protocol import (
    Ack,
    DecodeError,
    DirectHead,
    DirectRecord,
    EncodeError,
    Head,
    Record,
    decode_data,
    encode,
)

ADDRESS = "0123abcd-4567-89ef-0123-456789abcdef"
ADDRESS_HEX = "30313233616263642d343536372d383965662d303132332d343536373839616263646566"
PLAIN_HEX = "4d68656c6c6f0001" + "24" + ADDRESS_HEX + "0568656c6c6f0000000000000005"
"""PROTOCOL.md's RECORD vector: topic hello, that address, sequence 5."""


def test_a_record_with_its_run_is_the_c_record_plus_two_u64() -> None:
    frames = encode(Record("hello", ADDRESS, 5, b"CONTENT", 0x0102030405060708, 3))
    assert frames[0].hex() == PLAIN_HEX + "0102030405060708" + "0000000000000003"
    assert frames[1] == b"CONTENT"
    # what a C node parses (everything up to the sequence) is the C vector itself
    assert frames[0][: len(bytes.fromhex(PLAIN_HEX))] == bytes.fromhex(PLAIN_HEX)


def test_epoch_zero_is_the_c_record_byte_for_byte() -> None:
    assert encode(Record("hello", ADDRESS, 5, b"CONTENT"))[0].hex() == PLAIN_HEX


@pytest.mark.parametrize(
    "message",
    [
        Record("hello", ADDRESS, 5, b"CONTENT", 7, 5),
        Record("hello", ADDRESS, 9, b"", (1 << 64) - 1, 0),
        DirectRecord("REQ", "hello", ADDRESS, 12, b"x", 1_700_000_000_000, 10),
        Head("hello", ADDRESS, 32, 1_700_000_000_000, 33),
        DirectHead("REQ", "hello", ADDRESS, 40, 9, 33),
        Ack(ADDRESS, "hello", 40, 9, 33),
    ],
)
def test_both_forms_round_trip_and_share_the_header_cache(
    message: Record | DirectRecord | Ack | Head | DirectHead,
) -> None:
    plain = replace(message, epoch=0, run_start=0)
    for first, second in ((plain, message), (message, plain), (message, message)):
        assert decode_data(encode(first)) == first
        assert decode_data(encode(second)) == second


@pytest.mark.parametrize(
    ("trailer", "reason"),
    [
        ((0).to_bytes(8, "big") + (0).to_bytes(8, "big"), "epoch 0"),
        ((4).to_bytes(8, "big") + (6).to_bytes(8, "big"), "run start 6 is after"),
        ((4).to_bytes(8, "big"), "trailing garbage"),
        (b"\x01" * 17, "trailing garbage"),
    ],
)
def test_a_bad_trailer_is_a_decode_error(trailer: bytes, reason: str) -> None:
    frame0 = bytes.fromhex(PLAIN_HEX) + trailer
    with pytest.raises(DecodeError, match=reason):
        decode_data([frame0, b"CONTENT"])
    decode_data([bytes.fromhex(PLAIN_HEX), b"CONTENT"])  # the cached header: same verdicts
    with pytest.raises(DecodeError, match=reason):
        decode_data([frame0, b"CONTENT"])


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (Record("t", "p", 5, b"", 0, 2), "run_start 2 without an epoch"),
        (Record("t", "p", 5, b"", 3, 6), "run_start 6 is after"),
        (Record("t", "p", 5, b"", -1, 0), "epoch -1 is outside uint64"),
        (DirectRecord("r", "t", "p", 5, b"", 1 << 64, 0), "epoch .* is outside uint64"),
    ],
)
def test_a_bad_run_is_an_encode_error(message: Record | DirectRecord, reason: str) -> None:
    encode(replace(message, epoch=0, run_start=0))
    with pytest.raises(EncodeError, match=reason):
        encode(message)


def test_a_head_of_a_run_that_published_nothing_names_its_start() -> None:
    """A restarted producer's first HEAD is its resume point minus one; its run starts
    after it: for a head, run_start may exceed the sequence (a record's may not)."""
    head = Head("hello", ADDRESS, 32, 5, 33)
    frames = encode(head)
    plain = encode(Head("hello", ADDRESS, 32))[0]
    assert frames[0] == plain + (5).to_bytes(8, "big") + (33).to_bytes(8, "big")
    assert decode_data(frames) == head
    with pytest.raises(DecodeError, match="epoch 0"):
        decode_data([plain + bytes(8) + (33).to_bytes(8, "big")])


def test_an_ack_with_its_run_is_the_c_ack_plus_two_u64() -> None:
    """A C producer reads the ACK's fields up to the sequence and never sees the trailer."""
    plain = encode(Ack(ADDRESS, "hello", 5))[0]
    frames = encode(Ack(ADDRESS, "hello", 5, 2, 3))
    assert frames == [plain + (2).to_bytes(8, "big") + (3).to_bytes(8, "big")]
