"""The batch format: round trips, corruption detection, plain records are not batches."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dafka.message import Flags, ProducerID, build_uuid
from dafka.records import (
    HEADER_SIZE,
    MAGIC,
    CorruptBatchError,
    DroppedRecordError,
    check_batch,
    control_indexes,
    decode_batch,
    drop_notice,
    encode_batch,
    is_batch,
)

header = st.tuples(st.text(max_size=8), st.binary(max_size=8))


@st.composite
def batches(draw: st.DrawFn) -> dict[str, object]:
    n = draw(st.integers(1, 20))
    values = draw(st.lists(st.binary(max_size=40), min_size=n, max_size=n))
    out: dict[str, object] = {"values": values}
    if draw(st.booleans()):
        out["keys"] = draw(st.lists(st.none() | st.binary(max_size=10), min_size=n, max_size=n))
    if draw(st.booleans()):
        out["headers"] = draw(
            st.lists(st.lists(header, max_size=3).map(tuple), min_size=n, max_size=n)
        )
    if draw(st.booleans()):
        base = draw(st.integers(0, 2**40))
        spread = draw(st.sampled_from([1000, 2**33]))
        out["timestamps"] = draw(st.lists(st.integers(base, base + spread), min_size=n, max_size=n))
    if draw(st.booleans()):
        some_uuid = st.binary(min_size=16, max_size=16).filter(any)
        out["uuids"] = draw(st.lists(some_uuid, min_size=n, max_size=n))
    return out


@given(batches())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_round_trip(batch: dict[str, object]) -> None:
    content = encode_batch(**batch)  # type: ignore[arg-type]
    assert is_batch(content)
    got = decode_batch(content)
    values = batch["values"]
    assert isinstance(values, list)
    n = len(values)
    assert got.values == values
    assert got.keys == batch.get("keys", [None] * n)
    assert got.headers == batch.get("headers", [()] * n)
    assert got.timestamps == batch.get("timestamps", [None] * n)
    assert got.uuids == batch.get("uuids", [None] * n)


def test_the_extremes_of_the_timestamp_range_share_a_batch() -> None:
    got = decode_batch(encode_batch([b"low", b"high"], timestamps=[0, 2**63 - 1]))
    assert got.timestamps == [0, 2**63 - 1]


def test_absent_and_empty_keys_differ() -> None:
    got = decode_batch(encode_batch([b"a", b"b", b"c"], keys=[None, b"", b"k"]))
    assert got.keys == [None, b"", b"k"]


def _sample() -> bytes:
    return encode_batch(
        [b"one", b"", b"three"],
        keys=[b"k", None, b""],
        headers=[(("h", b"v"),), (), (("x", b""), ("y", b"z"))],
        timestamps=[1_700_000_000_000, 1_700_000_000_005, 1_700_000_000_001],
        uuids=[bytes(range(16)), bytes(16), b"\xff" * 16],
    )


def test_every_single_byte_flip_is_caught() -> None:
    content = _sample()
    for i in range(len(content)):
        for flip in (0x01, 0x80, 0xFF):
            damaged = bytearray(content)
            damaged[i] ^= flip
            if i < len(MAGIC):
                # a damaged magic is no longer a batch: delivered as a plain record, and
                # decode_batch refuses it
                assert not is_batch(bytes(damaged))
            with pytest.raises(CorruptBatchError):
                decode_batch(bytes(damaged))


def test_truncation_and_extension_are_caught() -> None:
    content = _sample()
    for end in range(len(content)):
        with pytest.raises(CorruptBatchError):
            decode_batch(content[:end])
    with pytest.raises(CorruptBatchError):
        decode_batch(content + b"\x00")


def _with_crc(body: bytes) -> bytes:
    return MAGIC + struct.pack("<I", crc32c(body)) + body


def test_structure_is_checked_even_with_a_valid_crc() -> None:
    good = _sample()
    body = bytearray(good[12:])
    # count larger than the content can hold
    wrong_count = bytearray(body)
    struct.pack_into("<I", wrong_count, 0, 10_000_000)
    # unknown flag bit
    wrong_flags = bytearray(body)
    struct.pack_into("<H", wrong_flags, 4, 0x80 | body[4])
    # reserved field set
    wrong_reserved = bytearray(body)
    struct.pack_into("<H", wrong_reserved, 6, 1)
    # zero messages
    zero = bytearray(body)
    struct.pack_into("<I", zero, 0, 0)
    for damaged in (wrong_count, wrong_flags, wrong_reserved, zero, body + b"junk"):
        with pytest.raises(CorruptBatchError):
            decode_batch(_with_crc(bytes(damaged)))


def test_non_utf8_header_name_is_corrupt() -> None:
    content = encode_batch([b"v"], headers=[(("ab", b""),)])
    body = bytearray(content[12:])
    at = body.rindex(b"ab")
    body[at : at + 2] = b"\xff\xfe"
    with pytest.raises(CorruptBatchError):
        decode_batch(_with_crc(bytes(body)))


@pytest.mark.parametrize(
    "plain",
    [
        b"",
        b"Hello, World",  # what the C reference's producer test publishes
        bytes(100),
        b"\x89PNG\r\n\x1a\n" + bytes(40),
        struct.pack(">Q", 42) + bytes(92),  # bench/cluster payload layout
    ],
)
def test_plain_records_are_not_batches(plain: bytes) -> None:
    assert not is_batch(plain)
    with pytest.raises(CorruptBatchError):
        decode_batch(plain)


@given(st.binary(max_size=200))
def test_a_plain_record_starting_with_the_magic_is_reported(tail: bytes) -> None:
    content = MAGIC + tail
    assert is_batch(content)
    with pytest.raises(CorruptBatchError):
        decode_batch(content)


def test_encode_rejects_mismatched_columns() -> None:
    with pytest.raises(ValueError, match="keys"):
        encode_batch([b"a", b"b"], keys=[b"k"])
    with pytest.raises(ValueError, match="16 bytes"):
        encode_batch([b"a"], uuids=[b"short"])
    with pytest.raises(ValueError, match="16 bytes"):  # 32 bytes in all, but not 16 each
        encode_batch([b"a", b"b"], uuids=[b"x" * 15, b"y" * 17])
    with pytest.raises(ValueError, match="at least one"):
        encode_batch([])


def test_header_size_is_documented() -> None:
    assert HEADER_SIZE == 28
    assert len(encode_batch([b""])) == HEADER_SIZE + 4


def test_messages_without_uuid_in_a_batch_with_uuids() -> None:
    got = decode_batch(encode_batch([b"a", b"b"], uuids=[bytes(16), b"\x01" * 16]))
    assert got.uuids == [None, b"\x01" * 16]


def test_a_drop_notice_names_the_size_it_stands_for_and_nothing_else_passes_for_one() -> None:
    """What a store keeps in place of a RECORD over its max_message_bytes (issue 18)."""
    notice = drop_notice(70_000_000)
    assert len(notice) == HEADER_SIZE
    assert is_batch(notice)
    assert notice == drop_notice(70_000_000)  # every store keeps the same bytes
    with pytest.raises(DroppedRecordError) as raised:
        check_batch(notice)
    assert raised.value.size == 70_000_000
    assert isinstance(raised.value, CorruptBatchError)  # older readers skip it as corrupt
    with pytest.raises(DroppedRecordError):
        decode_batch(notice)
    body = bytearray(notice[12:])
    body[0] = 1  # a count: not a notice any more, and not a valid batch either
    forged = MAGIC + struct.pack("<I", crc32c(bytes(body))) + bytes(body)
    with pytest.raises(CorruptBatchError) as corrupt:
        check_batch(forged)
    assert not isinstance(corrupt.value, DroppedRecordError)
    flipped = notice[:-1] + bytes([notice[-1] ^ 1])  # the CRC covers the size
    with pytest.raises(CorruptBatchError, match="CRC"):
        check_batch(flipped)


def test_control_indexes_are_the_acks_only() -> None:
    """``control_indexes``: the messages whose UUID flags are exactly ACK_TXN (a value
    with other high flag bits is treated as OUTSIDE_TXN by the sequencer: not an ACK)."""
    pid = ProducerID(b"\x02" * 6)
    ack = build_uuid(pid, 16, Flags.ACK_TXN).bytes
    cont = build_uuid(pid, 32, Flags.CONTINUE_TXN).bytes
    odd = bytearray(ack)
    odd[8] |= 0x01  # flags 0x102: not ACK_TXN
    content = encode_batch([b"a", b"", b"b", b""], uuids=[cont, ack, bytes(odd), ack])
    layout, _ = check_batch(content)
    assert control_indexes(content, layout) == [1, 3]
    plain = encode_batch([b"a", b"b"], uuids=[cont, cont])
    assert control_indexes(plain, check_batch(plain)[0]) == []
    no_uuids = encode_batch([b"\x02" * 20])
    assert control_indexes(no_uuids, check_batch(no_uuids)[0]) == []
