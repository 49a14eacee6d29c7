"""Transaction-log records and what a successor appends (pure)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dafka.message import Flags, ProducerID, build_uuid, get_clock, get_flags
from dafka.records import (
    CorruptLogError,
    EpochRecord,
    IntentRecord,
    LogRecord,
    Pin,
    RecoveredRecord,
    ack_uuid,
    decode_at,
    decode_record,
    encode_record,
    instance_state,
    is_shared_log,
    log_owner,
    log_partition,
    log_segments,
    obligations,
    segment_offset,
    shared_log_partition,
)

pytestmark = pytest.mark.unit

P1 = ProducerID.fromhex("01000000000a")
P2 = ProducerID.fromhex("01000000000b")
PARTS = ("w.0", "w.1", "w.2")


def epoch(n: int, p: ProducerID, c0: int, pins: tuple[Pin, ...] = ()) -> EpochRecord:
    return EpochRecord(n, f"n{n}", "t", PARTS, p, P2, c0, pins)


def test_records_round_trip() -> None:
    records: list[LogRecord] = [
        epoch(3, P1, 1000, (Pin("w~a.0", 4),)),
        IntentRecord(7, (("w.0", ack_uuid(P1, 1001)), ("w.2", ack_uuid(P1, 1002)))),
        RecoveredRecord(("w~a.0",)),
    ]
    for record in records:
        assert decode_record(encode_record(record)) == record


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not json",
        b"{}",
        b'{"type":"nope"}',
        b'{"type":"intent","txn":1,"acks":[["w.0","00"]]}',
    ],
)
def test_garbage_is_a_corrupt_log_error(content: bytes) -> None:
    with pytest.raises(CorruptLogError):
        decode_record(content)


def test_partition_names() -> None:
    name = log_partition("orders.writer", "abc")
    assert name == "orders.writer~abc.0"
    assert log_owner(name) == "orders.writer"
    assert log_owner("orders.writer.0") is None


def test_resolving_acks_are_the_last_ack_of_every_partition() -> None:
    intent1 = IntentRecord(0, (("w.0", ack_uuid(P1, 1001)), ("w.1", ack_uuid(P1, 1002))))
    intent2 = IntentRecord(1, (("w.1", ack_uuid(P1, 1003)),))
    contents = [encode_record(r) for r in (epoch(1, P1, 1000), intent1, intent2)]
    state = instance_state("w~n1.0", contents)
    assert state is not None
    acks = dict(state.resolving_acks())
    assert acks == {
        "w.0": ack_uuid(P1, 1001),
        "w.1": ack_uuid(P1, 1003),
        "w.2": ack_uuid(P1, 1000),  # the opening ACK: rolls back a span opened there
    }
    assert all(get_flags(uuid.UUID(bytes=u)) == Flags.ACK_TXN for u in acks.values())
    assert get_clock(uuid.UUID(bytes=acks["w.2"])) == 1000
    assert state.last_txn == 1


def test_an_empty_log_is_no_instance_and_a_log_must_start_with_its_epoch() -> None:
    assert instance_state("x", []) is None
    with pytest.raises(CorruptLogError):
        instance_state("x", [encode_record(RecoveredRecord(()))])
    with pytest.raises(CorruptLogError):
        instance_state("x", [encode_record(epoch(1, P1, 5)), encode_record(epoch(2, P1, 5))])


def test_obligations_follow_unrecovered_predecessors_up_to_their_pins() -> None:
    old = [
        encode_record(epoch(1, P1, 100)),
        encode_record(IntentRecord(0, (("w.0", ack_uuid(P1, 101)),))),
    ]
    # The INTENT after the pin (head 0) is void: the successor pinned the log before it.
    mid = [encode_record(epoch(2, P2, 200, (Pin("w~n1.0", 0),)))]
    middle = instance_state("w~n2.0", mid)
    assert middle is not None
    chain = obligations(middle, {"w~n1.0": old})
    assert [s.log for s in chain] == ["w~n1.0", "w~n2.0"]
    assert dict(chain[0].resolving_acks())["w.0"] == ack_uuid(P1, 100)
    # Once the middle one wrote RECOVERED, its predecessor is no longer an obligation.
    done = instance_state("w~n2.0", [*mid, encode_record(RecoveredRecord(("w~n1.0",)))])
    assert done is not None
    assert [s.log for s in obligations(done, {})] == ["w~n2.0"]


def test_a_pin_of_minus_one_takes_the_whole_log() -> None:
    old = [
        encode_record(epoch(1, P1, 100)),
        encode_record(IntentRecord(0, (("w.0", ack_uuid(P1, 101)),))),
    ]
    successor = instance_state("w~n2.0", [encode_record(epoch(2, P2, 200, (Pin("w~n1.0", -1),)))])
    assert successor is not None
    chain = obligations(successor, {"w~n1.0": old})
    assert dict(chain[0].resolving_acks())["w.0"] == ack_uuid(P1, 101)  # the INTENT counts


def test_the_shared_log_is_named_by_the_id_alone() -> None:
    name = shared_log_partition("orders.writer")
    assert name == "orders.writer~.0"
    assert log_owner(name) == "orders.writer"
    assert is_shared_log(name)
    assert not is_shared_log(log_partition("orders.writer", "abc"))


def test_a_shared_log_splits_into_its_instances_each_resolved_as_a_log_of_its_own() -> None:
    """Instance 1 committed and recovered; instance 2 claimed, pinned 1 and died before its
    RECOVERED: instance 3's obligations are 2's leftovers and, inherited, 1's."""
    one = epoch(1, P1, 10)
    intent = IntentRecord(0, (("w.1", ack_uuid(P1, 11)),))
    two = epoch(2, P2, 20, (Pin("w~.0@0", -1),))
    contents = [encode_record(r) for r in (one, intent, RecoveredRecord(()), two)]
    segments = log_segments("w~.0", contents)
    assert [(name, len(records)) for name, records in segments] == [("w~.0@0", 3), ("w~.0@3", 1)]
    last = instance_state(*segments[-1])
    assert last is not None
    assert not last.recovered
    owed = obligations(last, dict(segments))
    assert [state.log for state in owed] == ["w~.0@0", "w~.0@3"]
    assert owed[0].last_acks["w.1"] == ack_uuid(P1, 11)
    with pytest.raises(CorruptLogError, match="does not start with an EPOCH"):
        log_segments("w~.0", contents[1:])


def test_a_shared_log_record_that_does_not_decode_is_named_never_skipped() -> None:
    """The one rule for an unreadable record of a shared log (``decode_at``): it may be an
    INTENT or a later EPOCH, so the split stops there and names it (a starting instance
    raises it; a running one stops, tests/integration/eos/test_eos_log_records.py)."""
    one = epoch(1, P1, 10)
    intent = IntentRecord(0, (("w.1", ack_uuid(P1, 11)),))
    contents = [encode_record(one), b"{not json", encode_record(intent)]
    with pytest.raises(CorruptLogError, match=r"does not decode.*\(record 1 of w~\.0\)"):
        log_segments("w~.0", contents)  # before: no record named
    with pytest.raises(CorruptLogError, match=r"record 7 of w~\.0"):
        decode_at("w~.0", 7, b'{"type":"nope"}')
    assert decode_at("w~.0", 0, contents[0]) == one


def test_a_shared_log_read_from_an_offset_splits_from_its_first_epoch() -> None:
    """A start reads the shared log back from its head (``first`` > 0): the records before
    the first EPOCH read belong to an instance that began earlier - decoded, not folded."""
    one = epoch(1, P1, 10)
    intents = [IntentRecord(n, (("w.1", ack_uuid(P1, 11 + n)),)) for n in range(3)]
    two = epoch(2, P2, 20, (Pin("w~.0@0", -1),))
    records: list[LogRecord] = [one, *intents, RecoveredRecord(()), two]
    contents = [encode_record(r) for r in records]
    segments = log_segments("w~.0", contents[2:], first=2)
    assert [(name, len(records)) for name, records in segments] == [("w~.0@5", 1)]
    assert log_segments("w~.0", contents[2:5], first=2) == []
    with pytest.raises(CorruptLogError, match=r"record 3 of w~\.0"):
        log_segments("w~.0", [contents[2], b"junk", contents[5]], first=2)
    assert segment_offset("w~.0", "w~.0@5") == 5
    assert segment_offset("w~.0", "w~abc.0") is None  # a log of the earlier layout
    with pytest.raises(CorruptLogError):
        segment_offset("w~.0", "w~.0@x")


def test_a_pin_back_to_an_instance_on_the_way_is_a_corrupt_log_not_a_recursion() -> None:
    """An EPOCH that pins itself (never written by dafka: an instance pins its predecessor)
    recursed until Python's limit - a RecursionError out of the producer's constructor."""
    looping = epoch(2, P2, 20, (Pin("w~.0@0", -1),))
    segments = log_segments("w~.0", [encode_record(looping)])
    state = instance_state(*segments[-1])
    assert state is not None
    with pytest.raises(CorruptLogError, match=r"pins w~\.0@0"):
        obligations(state, dict(segments))


@given(clock=st.integers(0, (1 << 64) - 1), producer=st.binary(min_size=6, max_size=6))
def test_an_ack_is_the_uuid_build_uuid_gives(clock: int, producer: bytes) -> None:
    """``ack_uuid`` stamps through ``build_uuids`` (faster): the very bytes of
    ``build_uuid``'s ACK, which the successor and the readers compare."""
    ack = ack_uuid(ProducerID(producer), clock)
    assert ack == build_uuid(producer, clock, Flags.ACK_TXN).bytes
    assert get_flags(uuid.UUID(bytes=ack)) == Flags.ACK_TXN
