"""The store's persistence between a real Storage and a real StoreMachine (no sockets):
damage met by a read, and a full disk, reach the machine in the same turn; RECORDs over the
size limit are logged at most every ``DROP_LOG_INTERVAL``."""

from __future__ import annotations

from pathlib import Path

import pytest

from dafka.node import Persist, Send, SendDirectRecords, StoreConfig, StoreMachine
from dafka.protocol import MAX_MESSAGE_BYTES, Ack, DataMessage, DirectRecord, Fetch
from dafka.server import StorePersistence
from dafka.server._persistence import DROP_LOG_INTERVAL
from dafka.storage import FsyncPolicy, Storage, StorageConfig
from dafka.storage._format import RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE
from tests.integration.storage.tmpfs import fill

W, R = "57000000000000000000000000000001", "52000000000000000000000000000002"
CONFIG = StorageConfig(fsync=FsyncPolicy.batch())


class Turns:
    """A store driver without sockets: a manual clock, and the runner's execute step."""

    def __init__(self, root: Path, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.now = 0.0
        self.storage = Storage.open(root, CONFIG)
        config = StoreConfig(heads_refresh=None, max_message_bytes=max_message_bytes)
        self.machine = StoreMachine(W, R, self.storage, config)
        self.machine.take_actions()
        self.persistence = StorePersistence(
            self.storage, self.machine, "store", clock=lambda: self.now
        )

    def execute(self) -> list[DataMessage]:
        sent: list[DataMessage] = []
        for _ in range(8):
            actions = self.machine.take_actions()
            for action in actions:
                if isinstance(action, Persist):
                    self.persistence.persist(action)
                elif isinstance(action, Send):
                    sent.append(action.message)
                elif isinstance(action, SendDirectRecords):
                    sent.extend(action.messages())
            if not self.persistence.report_durable(self.now) and not actions:
                break
        return sent

    def records(self, first: int, stop: int) -> list[DataMessage]:
        return self.contents(first, [b"%06d" % s for s in range(first, stop)])

    def contents(self, first: int, contents: list[bytes]) -> list[DataMessage]:
        self.machine.on_records("t", "P", first, contents, self.now)
        return self.execute()


def test_a_damaged_record_met_by_a_read_is_refetched_in_the_same_turn(tmp_path: Path) -> None:
    turns = Turns(tmp_path)
    assert turns.records(0, 100) == [Ack("P", "t", 99)]
    plog = turns.storage.log("t", "P")
    assert plog is not None
    with plog.segments[0].path.open("r+b") as f:  # record 50's payload
        f.seek(SEGMENT_HEADER_SIZE + 50 * (RECORD_HEADER_SIZE + 6) + RECORD_HEADER_SIZE + 2)
        f.write(b"XX")
    turns.machine.on_records("t", "P", 100, [b"%06d" % s for s in range(100, 110)], 0.0)
    turns.machine.on_message(Fetch("P", "C", "t", 0, 200), 0.0)  # the read meets record 50
    sent = turns.execute()
    replies = [m for m in sent if isinstance(m, DirectRecord)]
    assert [m.sequence for m in replies] == list(range(50))  # the run ends at the hole
    (fetch,) = [m for m in sent if isinstance(m, Fetch)]
    assert (fetch.requester, fetch.sequence, fetch.count) == (W, 50, 1)  # exactly the hole
    assert turns.storage.head("t", "P") == 109  # nothing after it was given up
    assert turns.storage.holes("t", "P") == [(50, 51)]
    stats = turns.machine.statistics()
    assert (stats.partitions_blocked, stats.holes, stats.hole_records) == (0, 1, 1)
    assert turns.persistence.statistics().truncations == 1
    assert turns.persistence.statistics().records_lost == 1
    turns.machine.on_timer(0.0)  # the reply goes on after the hole
    rest = [m.sequence for m in turns.execute() if isinstance(m, DirectRecord)]
    assert rest == list(range(51, 110))  # never a record the store does not hold
    turns.machine.on_message(DirectRecord(W, "t", "P", 50, b"%06d" % 50), 0.0)  # a peer's
    assert turns.execute() == []
    assert turns.storage.holes("t", "P") == []
    assert turns.machine.statistics().holes == 0
    assert turns.storage.read("t", "P", 0, 200) == [(s, b"%06d" % s) for s in range(110)]


def test_a_full_disk_is_logged_once_per_run_and_its_end_too(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    turns = Turns(small_disk / "log")
    assert turns.records(0, 10) == [Ack("P", "t", 9)]
    filler = fill(small_disk)
    sent = turns.records(10, 5000)  # more than the last page can take
    assert not [m for m in sent if isinstance(m, Ack)]
    for _ in range(3):  # backoff over: the retry fetches, and fails again
        deadline = turns.machine.next_deadline()
        assert deadline is not None
        turns.now = deadline
        turns.machine.on_timer(turns.now)
        (fetch,) = [m for m in turns.execute() if isinstance(m, Fetch)]
        turns.records(fetch.sequence, 5000)
    failures = turns.persistence.statistics().persist_errors
    assert failures >= 4
    errors = [r.getMessage() for r in caplog.records if "disk full (ENOSPC)" in r.getMessage()]
    assert len(errors) == 1
    assert str(small_disk / "log") in errors[0]
    assert "bytes free" in errors[0]
    filler.unlink()
    turns.now = turns.machine.next_deadline() or turns.now
    turns.machine.on_timer(turns.now)
    (fetch,) = [m for m in turns.execute() if isinstance(m, Fetch)]
    assert turns.records(fetch.sequence, 5000) == [Ack("P", "t", 4999)]
    resumed = [r.getMessage() for r in caplog.records if "resume after" in r.getMessage()]
    assert len(resumed) == 1
    assert f"after {failures} failed append(s)" in resumed[0]


def test_oversized_records_are_logged_at_most_every_interval_with_the_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A foreign producer sending RECORDs over the limit without end: each is counted and
    kept as its drop notice, but the WARNING lines come at most every interval, each naming
    one RECORD and how many more were dropped since the last line."""
    turns = Turns(tmp_path, max_message_bytes=1024)
    big = bytes(2000)

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if "dropped RECORD" in r.getMessage()]

    assert turns.contents(0, [big, b"small", big]) == [Ack("P", "t", 2)]
    assert len(lines()) == 1  # the first at once, naming it: the second one only counted
    assert "t/P@0: 2000 bytes, over max_message_bytes=1024" in lines()[0]
    assert "more since the last report" not in lines()[0]
    turns.now = DROP_LOG_INTERVAL / 2
    assert turns.contents(3, [big, big]) == [Ack("P", "t", 4)]
    assert len(lines()) == 1
    turns.now = DROP_LOG_INTERVAL
    assert turns.contents(5, [big]) == [Ack("P", "t", 5)]
    assert len(lines()) == 2
    assert "t/P@5: 2000 bytes" in lines()[1]
    assert lines()[1].endswith("(3 more since the last report)")
    assert turns.persistence.statistics().oversized_dropped == 5
