"""The read-committed view the checks use: Gazette's rules over stored messages."""

from __future__ import annotations

from dafka.client import Record
from dafka.message import Flags, build_uuid, new_producer_id
from dafka.pipeline._committed import committed_values

PRODUCER = bytes(new_producer_id())


def record(
    offset: int, value: bytes, clock: int | None, flags: Flags = Flags.CONTINUE_TXN
) -> Record:
    uid = None if clock is None else build_uuid(PRODUCER, clock, flags).bytes
    return Record("t", "p.0", offset, 0, None, value, (), None, uid)


def test_plain_messages_pass_through() -> None:
    assert committed_values([record(1, b"b", None), record(0, b"a", None)]) == [b"a", b"b"]


def test_a_transaction_shows_once_acknowledged_and_a_replay_never() -> None:
    log = [
        record(0, b"a", 10),
        record(1, b"b", 11),
        record(2, b"", 12, Flags.ACK_TXN),  # commits a and b
        record(3, b"a", 10),  # a duplicate of an older write: dropped
        record(4, b"c", 13),  # never acknowledged: not visible
    ]
    assert committed_values(log) == [b"a", b"b"]
