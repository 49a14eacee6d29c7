"""UUID layout, clocks, flags and producer IDs (vectors from EXACTLY-ONCE.md)."""

from __future__ import annotations

import threading
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dafka.errors import DafkaError
from dafka.message import (
    NIL_UUID,
    Clock,
    Flags,
    ProducerID,
    UUIDError,
    build_uuid,
    build_uuids,
    get_clock,
    get_flags,
    get_producer_id,
    new_producer_id,
    unix_ns_to_clock,
)

P = ProducerID.fromhex("0123456789ab")


@pytest.mark.parametrize(
    ("clock", "flags", "expect"),
    [
        (0x1E9CC5F83FC2F950, 0x2AA, "83fc2f95-cc5f-11e9-82aa-0123456789ab"),
        (0x1EEA838B4CC800A0, Flags.ACK_TXN, "b4cc800a-a838-11ee-8002-0123456789ab"),
        (0x1EEA838B4CC800AA, Flags.OUTSIDE_TXN, "b4cc800a-a838-11ee-a800-0123456789ab"),
    ],
)
def test_vectors_are_byte_exact(clock: int, flags: int, expect: str) -> None:
    u = build_uuid(P, clock, flags)
    assert isinstance(u, uuid.UUID)
    assert str(u) == expect
    assert u.version == 1
    assert u.variant == uuid.RFC_4122
    assert get_clock(u) == clock
    assert get_flags(u) == flags
    assert get_producer_id(u) == P


def test_byte_8_and_9_hold_variant_counter_and_flags() -> None:
    u = build_uuid(P, 0x1E9CC5F83FC2F950 | 0xB, 0x155)
    assert u.bytes[8] == 0x80 | 0xB << 2 | 0x155 >> 8
    assert u.bytes[9] == 0x155 & 0xFF
    assert u.bytes[10:] == bytes(P)


@given(
    clock=st.integers(0, 2**64 - 1),
    flags=st.integers(0, 0x3FF),
    producer=st.binary(min_size=6, max_size=6),
)
def test_round_trip(clock: int, flags: int, producer: bytes) -> None:
    u = build_uuid(producer, clock, flags)
    assert get_clock(u) == clock
    assert get_flags(u) == flags
    assert get_producer_id(u) == producer
    assert uuid.UUID(str(u)) == u


def test_get_clock_masks_the_version_nibble() -> None:
    u = build_uuid(P, 2**64 - 1, 0)
    assert get_clock(u) == 2**64 - 1
    assert get_clock(uuid.UUID("ffffffff-ffff-ffff-bfff-ffffffffffff")) == 2**64 - 1


def test_flags_above_ten_bits_are_an_error() -> None:
    with pytest.raises(UUIDError):
        build_uuid(P, 1, 0x400)
    with pytest.raises(DafkaError):
        build_uuid(P, 1, -1)


def test_bad_producer_and_clock_are_errors() -> None:
    with pytest.raises(UUIDError):
        ProducerID(b"12345")
    with pytest.raises(UUIDError):
        build_uuid(b"1234567", 1, 0)
    with pytest.raises(UUIDError):
        build_uuid(P, 2**64, 0)
    with pytest.raises(UUIDError):
        Clock(-1)


def test_nil_uuid_has_clock_zero() -> None:
    assert get_clock(NIL_UUID) == 0
    assert get_producer_id(NIL_UUID) == bytes(6)


def test_new_producer_ids_have_the_multicast_bit_and_differ() -> None:
    ids = {new_producer_id() for _ in range(64)}
    assert len(ids) == 64
    for pid in ids:
        assert isinstance(pid, ProducerID)
        assert len(pid) == 6
        assert pid[0] & 0x01
        assert int(pid) != 0


def test_clock_update_and_tick() -> None:
    unix_ns = 1_700_000_000_123_456_789
    clock = Clock.from_unix_ns(unix_ns)
    assert clock.value == ((unix_ns // 100) + 122192928000000000) << 4
    assert clock.value == unix_ns_to_clock(unix_ns)
    assert clock.tick() == clock.value
    assert int(clock) == unix_ns_to_clock(unix_ns) + 1
    clock.update(unix_ns - 10_000)  # Earlier wall time: never backwards.
    assert int(clock) == unix_ns_to_clock(unix_ns) + 1
    clock.update(unix_ns + 100)
    assert int(clock) == unix_ns_to_clock(unix_ns + 100)


def test_clock_update_defaults_to_now() -> None:
    clock = Clock()
    clock.update()
    assert clock.value > unix_ns_to_clock(1_600_000_000 * 10**9)


def test_clock_ticks_are_unique_across_threads() -> None:
    clock = Clock(100)
    seen: list[list[int]] = [[] for _ in range(4)]

    def worker(out: list[int]) -> None:
        for _ in range(2000):
            out.append(clock.tick())

    threads = [threading.Thread(target=worker, args=(s,)) for s in seen]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ticks = [t for s in seen for t in s]
    assert len(set(ticks)) == 8000
    assert max(ticks) == 100 + 8000 == clock.value


def test_producer_id_helpers() -> None:
    assert ProducerID.from_int(0x0123456789AB) == P
    assert int(P) == 0x0123456789AB
    assert repr(P) == "ProducerID('0123456789ab')"
    with pytest.raises(UUIDError):
        ProducerID.from_int(1 << 48)


@given(
    first=st.one_of(
        st.integers(0, (1 << 64) - 300),
        # around a wrap of time_low (every 2**36 clocks), where the 12-byte tails change
        st.integers(1, 1 << 27).map(lambda k: (k << 36) - 100),
    ),
    count=st.integers(0, 260),
    flags=st.sampled_from([Flags.OUTSIDE_TXN, Flags.CONTINUE_TXN, Flags.ACK_TXN, 0x3FF]),
    producer=st.binary(min_size=6, max_size=6),
)
def test_build_uuids_is_build_uuid_for_each_clock_of_the_run(
    first: int, count: int, flags: int, producer: bytes
) -> None:
    """The transactional producer's bulk stamping gives the very bytes of ``build_uuid``."""
    expect = [build_uuid(producer, c, flags).bytes for c in range(first, first + count)]
    assert build_uuids(producer, first, count, flags) == expect


def test_build_uuids_checks_as_build_uuid_does() -> None:
    with pytest.raises(UUIDError):
        build_uuids(P, 1, 2, 0x400)
    with pytest.raises(UUIDError):
        build_uuids(b"12345", 1, 2, 0)
    with pytest.raises(UUIDError):
        build_uuids(P, (1 << 64) - 1, 2, 0)


def test_tick_many_hands_out_a_run_after_the_last_tick() -> None:
    clock = Clock(100)
    assert clock.tick() == 101
    assert clock.tick_many(5) == 102
    assert clock.tick() == 107
    with pytest.raises(UUIDError):
        clock.tick_many(0)
