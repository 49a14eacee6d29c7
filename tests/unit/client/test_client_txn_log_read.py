"""What a starting transactional instance reads of its shared log (``_pinned_before``).

It reads back from the claim's head; the segments it needs are its predecessor's and,
when that one wrote no RECOVERED, the ones it pinned (recursively). ``_pinned_before``
says how far back the next read must start (None: everything needed is in).
"""

from __future__ import annotations

import pytest

from dafka.client._transactions import _epoch_before, _pinned_before
from dafka.message import ProducerID
from dafka.records import (
    CorruptLogError,
    EpochRecord,
    IntentRecord,
    LogRecord,
    Pin,
    RecoveredRecord,
    ack_uuid,
    encode_record,
    log_segments,
)

pytestmark = pytest.mark.unit

P = ProducerID.fromhex("01000000000a")
L = "w~.0"


def epoch(n: int, pins: tuple[Pin, ...] = ()) -> EpochRecord:
    return EpochRecord(n, f"n{n}", "t", ("w.0",), P, P, 10 * n, pins)


def intent(n: int) -> IntentRecord:
    return IntentRecord(n, (("w.0", ack_uuid(P, 1000 + n)),))


def log(*records: LogRecord) -> list[bytes]:
    return [encode_record(r) for r in records]


def test_a_recovered_predecessor_needs_nothing_earlier() -> None:
    contents = log(
        epoch(1),
        intent(0),
        intent(1),
        RecoveredRecord(()),
        epoch(2, (Pin(f"{L}@0", -1),)),
        RecoveredRecord((f"{L}@0",)),
    )
    segments = log_segments(L, contents[4:], first=4)
    assert _pinned_before(L, segments, 4) is None


def test_a_predecessor_that_died_recovering_needs_the_segments_it_pinned() -> None:
    """Instance 2 pinned instance 1 and died before its RECOVERED; instance 3 pinned 2 and
    died too: a start that read from 6 needs 1's segment (from 0), read from 3 it needs it
    too, read from 0 it has everything."""
    contents = log(
        epoch(1),  # 0
        intent(0),  # 1
        intent(1),  # 2
        epoch(2, (Pin(f"{L}@0", -1),)),  # 3: died before RECOVERED
        epoch(3, (Pin(f"{L}@3", -1),)),  # 4: died before RECOVERED
    )
    assert _pinned_before(L, log_segments(L, contents[4:], first=4), 4) == 3
    assert _pinned_before(L, log_segments(L, contents[3:], first=3), 3) == 0
    assert _pinned_before(L, log_segments(L, contents, first=0), 0) is None


def test_a_pin_of_the_earlier_layout_is_not_read_back_and_a_pin_to_no_epoch_is_corrupt() -> None:
    contents = log(epoch(1, (Pin("w~abc.0", -1),)))
    assert _pinned_before(L, log_segments(L, contents, first=0), 0) is None
    bad = log(intent(0), epoch(2, (Pin(f"{L}@0", -1),)))
    with pytest.raises(CorruptLogError, match="no EPOCH"):
        _pinned_before(L, log_segments(L, bad[1:], first=1), 0)


def test_a_window_without_an_epoch_is_extended_back_to_the_instances_epoch() -> None:
    """An INTENT of transaction t at offset o has its instance's EPOCH at or after
    o - t - 2 (EPOCH, RECOVERED, at most one INTENT per transaction before it): one more
    read instead of doubling the window; a RECOVERED has it right before; else double."""
    contents = log(epoch(1), RecoveredRecord(()), *[intent(n) for n in range(300)])
    start = 200
    back = _epoch_before(L, start, contents[start], len(contents) - 1)
    assert back == 0  # transaction 198's INTENT at 200: the EPOCH at 0
    assert log_segments(L, contents[back:], first=back)[0][0] == f"{L}@0"
    assert _epoch_before(L, 1, contents[1], 301) == 0
    assert _epoch_before(L, 100, encode_record(epoch(2)), 149) == 50
