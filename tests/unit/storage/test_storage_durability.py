"""fsync policies and the durable offsets a store ACKs from."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from dafka.errors import ConfigError
from dafka.storage import FsyncPolicy, Storage, StorageConfig, StorageIOError
from dafka.testing import ManualClock


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every fdatasync/fsync of a regular file (directory syncs are not counted)."""
    calls: list[int] = []
    real_fdatasync, real_fsync = os.fdatasync, os.fsync

    def fdatasync(fd: int) -> None:
        calls.append(fd)
        real_fdatasync(fd)

    def fsync(fd: int) -> None:
        import stat

        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def batch(n: int, size: int = 10) -> list[bytes]:
    return [b"r" * size] * n


def test_batch_policy_makes_every_append_durable(tmp_path: Path, syncs: list[int]) -> None:
    with Storage.open(tmp_path, StorageConfig(fsync=FsyncPolicy.batch())) as storage:
        assert storage.durable_offset("t", "p") is None
        storage.append("t", "p", 0, batch(100))
        assert storage.durable_offset("t", "p") == 99
        assert len(syncs) == 1
        storage.append("t", "p", 100, batch(5))
        assert len(syncs) == 2
        assert storage.take_durable_advances() == {("t", "p"): 104}
        assert storage.take_durable_advances() == {}


def test_records_policy_syncs_every_n_records_per_partition(
    tmp_path: Path, syncs: list[int]
) -> None:
    with Storage.open(tmp_path, StorageConfig(fsync=FsyncPolicy.records(10))) as storage:
        storage.append("t", "p", 0, batch(4))
        storage.append("t", "q", 0, batch(9))
        assert storage.durable_offset("t", "p") is None
        assert storage.durable_offset("t", "q") is None
        assert syncs == []
        storage.append("t", "p", 4, batch(6))
        assert storage.durable_offset("t", "p") == 9
        assert storage.durable_offset("t", "q") is None
        assert storage.sync_due(0.0) == {("t", "p"): 9}
        storage.append("t", "q", 9, batch(30))
        assert storage.take_durable_advances() == {("t", "q"): 38}
        assert len(syncs) == 2


def test_interval_policy_is_driven_by_the_callers_clock(tmp_path: Path, syncs: list[int]) -> None:
    """The leading edge: a write after a quiet interval is synced at once (the caller's next
    ``sync_due``); writes within an interval of the last sync wait until an interval after
    it. At most one interval sync per interval, each write synced within an interval."""
    clock = ManualClock(100.0)
    config = StorageConfig(fsync=FsyncPolicy.interval(5), clock=clock)
    with Storage.open(tmp_path, config) as storage:
        assert storage.next_sync_deadline() is None
        storage.append("t", "p", 0, batch(3))
        storage.append("t", "q", 0, batch(2))
        assert storage.next_sync_deadline() == pytest.approx(100.0)  # before: 100.005
        assert storage.sync_due(clock.now) == {("t", "p"): 2, ("t", "q"): 1}
        assert len(syncs) == 2
        assert storage.next_sync_deadline() is None
        clock.advance(0.002)
        storage.append("t", "p", 3, batch(1))
        assert storage.next_sync_deadline() == pytest.approx(100.005)  # an interval after
        clock.advance(0.002)
        storage.append("t", "p", 4, batch(1))
        assert storage.next_sync_deadline() == pytest.approx(100.005)  # first write arms it
        assert storage.sync_due(clock.now) == {}
        assert storage.durable_offset("t", "p") == 2
        clock.advance(0.001)
        assert storage.sync_due(clock.now) == {("t", "p"): 4}
        assert len(syncs) == 3
        assert storage.next_sync_deadline() is None
        assert storage.sync_due(clock.advance(1.0)) == {}
        assert len(syncs) == 3


def test_an_interval_sync_fsyncs_its_dirty_partitions_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four dirty partitions are fsynced concurrently (each fsync alone waits for its own
    journal commit: 5-7 ms each here, 25+ ms an interval): every call waits at a barrier
    of four, which one-at-a-time calls never pass."""
    barrier = threading.Barrier(4, timeout=10)
    real_fdatasync = os.fdatasync

    def fdatasync(fd: int) -> None:
        barrier.wait()
        real_fdatasync(fd)

    clock = ManualClock(100.0)
    config = StorageConfig(fsync=FsyncPolicy.interval(5), clock=clock)
    with Storage.open(tmp_path, config) as storage:
        for p in "abcd":
            storage.append("t", p, 0, batch(2))
        monkeypatch.setattr(os, "fdatasync", fdatasync)
        assert storage.sync_due(clock.advance(0.005)) == {("t", p): 1 for p in "abcd"}
        monkeypatch.setattr(os, "fdatasync", real_fdatasync)


def test_a_failed_fsync_of_one_partition_is_raised_and_the_others_are_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(100.0)
    config = StorageConfig(fsync=FsyncPolicy.interval(5), clock=clock)
    with Storage.open(tmp_path, config) as storage:
        for p in "abc":
            storage.append("t", p, 0, batch(2))
        bad = storage._logs[("t", "b")].segments[-1].fd
        real_fdatasync = os.fdatasync

        def fdatasync(fd: int) -> None:
            if fd == bad:
                raise OSError(5, "I/O error")
            real_fdatasync(fd)

        monkeypatch.setattr(os, "fdatasync", fdatasync)
        with pytest.raises(StorageIOError, match="I/O error"):
            storage.sync_due(clock.advance(0.005))
        monkeypatch.setattr(os, "fdatasync", real_fdatasync)
        assert storage.take_durable_advances() == {("t", "a"): 1, ("t", "c"): 1}
        assert storage.durable_offset("t", "b") is None


def test_without_a_clock_the_first_sync_due_arms_the_deadline(tmp_path: Path) -> None:
    with Storage.open(tmp_path, StorageConfig(fsync=FsyncPolicy.interval(10))) as storage:
        assert storage.next_sync_deadline() is None
        storage.append("t", "p", 0, batch(3))
        assert storage.next_sync_deadline() == float("-inf")
        assert storage.sync_due(50.0) == {("t", "p"): 2}  # no sync for an interval: at once
        assert storage.next_sync_deadline() is None
        storage.append("t", "p", 3, batch(1))
        assert storage.sync_due(50.004) == {}
        assert storage.next_sync_deadline() == pytest.approx(50.01)
        assert storage.sync_due(50.009) == {}
        assert storage.sync_due(50.01) == {("t", "p"): 3}
        assert storage.next_sync_deadline() is None


def test_the_last_interval_sync_is_told_under_the_interval_policy_alone(tmp_path: Path) -> None:
    """What a store's runner holds its writer's records by (``StorePersistence.hold_until``):
    no write can be synced sooner than an interval after the last interval sync. Under any
    policy that may sync on an append there is no such time."""
    clock = ManualClock(100.0)
    config = StorageConfig(fsync=FsyncPolicy.interval(5), clock=clock)
    with Storage.open(tmp_path / "ms", config) as storage:
        assert storage.last_interval_sync() is None  # none ran yet
        storage.append("t", "p", 0, batch(1))
        storage.sync_due(clock.advance(0.001))
        assert storage.last_interval_sync() == pytest.approx(100.001)
        storage.append("t", "p", 1, batch(1))
        storage.sync_due(clock.advance(0.002))  # not due: synced an interval after the last
        assert storage.last_interval_sync() == pytest.approx(100.001)
    for text in ("batch", "records:10+ms:5", "batch+ms:5", "os"):
        policy = FsyncPolicy.parse(text)
        with Storage.open(tmp_path / text, StorageConfig(fsync=policy, clock=clock)) as storage:
            storage.append("t", "p", 0, batch(1))
            storage.sync_due(clock.advance(1.0))
            assert storage.last_interval_sync() is None, text


def test_records_and_interval_combine(tmp_path: Path) -> None:
    clock = ManualClock()
    policy = FsyncPolicy.parse("records:10+ms:20")
    with Storage.open(tmp_path, StorageConfig(fsync=policy, clock=clock)) as storage:
        storage.append("t", "p", 0, batch(3))
        assert storage.durable_offset("t", "p") is None
        storage.append("t", "p", 3, batch(7))
        assert storage.durable_offset("t", "p") == 9
        storage.append("t", "p", 10, batch(1))
        assert storage.sync_due(clock.advance(0.02)) == {("t", "p"): 10}


def test_os_policy_counts_written_as_durable(tmp_path: Path, syncs: list[int]) -> None:
    with Storage.open(tmp_path, StorageConfig(fsync=FsyncPolicy.os())) as storage:
        storage.append("t", "p", 0, batch(50))
        assert storage.durable_offset("t", "p") == 49
        assert storage.take_durable_advances() == {("t", "p"): 49}
    assert syncs != []  # close still fsyncs everything


def test_flush_syncs_everything_whatever_the_policy(tmp_path: Path, syncs: list[int]) -> None:
    clock = ManualClock()
    config = StorageConfig(fsync=FsyncPolicy.interval(1000), clock=clock)
    with Storage.open(tmp_path, config) as storage:
        storage.append("t", "p", 0, batch(5))
        storage.flush()
        assert storage.durable_offset("t", "p") == 4
        assert storage.next_sync_deadline() is None
        assert storage.sync_due(clock.now) == {("t", "p"): 4}  # left for the loop to ACK


def test_rolling_a_segment_syncs_it(tmp_path: Path) -> None:
    config = StorageConfig(fsync=FsyncPolicy.records(10_000), segment_bytes=1000)
    with Storage.open(tmp_path, config) as storage:
        storage.append("t", "p", 0, batch(100, size=50))
        durable = storage.durable_offset("t", "p")
        log = storage.log("t", "p")
        assert log is not None
        assert durable == log.segments[-1].base - 1


def test_reopen_makes_what_is_held_durable(tmp_path: Path) -> None:
    config = StorageConfig(fsync=FsyncPolicy.records(1000))
    with Storage.open(tmp_path, config) as storage:
        storage.append("t", "p", 0, batch(5))
    with Storage.open(tmp_path, config) as storage:
        assert storage.durable_offset("t", "p") == 4


@pytest.mark.parametrize(
    ("text", "policy"),
    [
        ("batch", FsyncPolicy.batch()),
        ("records:7", FsyncPolicy.records(7)),
        ("ms:2.5", FsyncPolicy.interval(2.5)),
        ("os", FsyncPolicy.os()),
        ("never", FsyncPolicy.os()),
        ("batch+ms:3", FsyncPolicy(every_batch=True, interval_ms=3)),
    ],
)
def test_policies_parse_and_print(text: str, policy: FsyncPolicy) -> None:
    assert FsyncPolicy.parse(text) == policy
    assert FsyncPolicy.parse(str(policy)) == policy


@pytest.mark.parametrize("text", ["", "sometimes", "records:x", "records:0", "ms:-1", "batch:3"])
def test_bad_policies_are_config_errors(text: str) -> None:
    with pytest.raises(ConfigError):
        FsyncPolicy.parse(text)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"segment_bytes": 10},
        {"segment_bytes": 2**32},
        {"index_interval_bytes": 0},
        {"max_record_bytes": -1},
        {"first_offset": -1},
        {"index_flush_entries": 0},
    ],
)
def test_bad_configs_are_config_errors(kwargs: dict[str, int]) -> None:
    with pytest.raises(ConfigError):
        StorageConfig(**kwargs)  # type: ignore[arg-type]


def test_storage_is_the_record_reader_the_store_machine_expects(tmp_path: Path) -> None:
    from dafka.node import RecordReader

    with Storage.open(tmp_path, StorageConfig(fsync=FsyncPolicy.os())) as storage:
        storage.append("t", "p", 0, [b"a", b"b"])
        reader: RecordReader = storage  # checked by mypy --strict
        held, contents = reader.read_contents("t", "p", 1, 5)
        assert (held, list(contents)) == (1, [b"b"])
        assert dict(reader.heads("t")) == {"p": 1}
        assert list(reader.topics()) == ["t"]


def test_reports_pending_says_whether_a_report_would_hold_anything(tmp_path: Path) -> None:
    """What a store's runner looks at before each report: an advance to take, damage to take,
    a sync due (armed or not) - never False when ``sync_due``/``take_*`` would report."""
    clock = ManualClock(100.0)
    config = StorageConfig(fsync=FsyncPolicy.interval(5), clock=clock)
    with Storage.open(tmp_path, config) as storage:
        assert not storage.reports_pending(clock.now)
        storage.append("t", "p", 0, batch(3))
        assert storage.reports_pending(clock.now)  # a quiet interval: due at once
        assert storage.sync_due(clock.now) == {("t", "p"): 2}
        assert not storage.reports_pending(clock.now)
        storage.append("t", "p", 3, batch(1))
        assert not storage.reports_pending(clock.advance(0.004))  # due an interval after
        assert storage.reports_pending(clock.advance(0.001))
        assert storage.sync_due(clock.now) == {("t", "p"): 3}
        storage.flush()  # an advance waits to be taken
        storage.append("t", "p", 4, batch(1))
        storage.flush()
        assert storage.reports_pending(clock.now)
        assert storage.take_durable_advances() == {("t", "p"): 4}
        assert not storage.reports_pending(clock.now)
    with Storage.open(tmp_path, StorageConfig(fsync=FsyncPolicy.interval(10))) as storage:
        storage.append("t", "p", 5, batch(1))
        assert storage.reports_pending(0.0)  # not armed yet (no clock): sync_due arms it
        assert storage.sync_due(0.0) == {("t", "p"): 5}
        assert not storage.reports_pending(0.0)
        log = tmp_path / "t" / "p"
        (segment,) = sorted(log.glob("*.log"))
        data = bytearray(segment.read_bytes())
        data[-3] ^= 0xFF  # the last record's payload
        segment.write_bytes(bytes(data))
        storage.read("t", "p", 0, 10)  # meets the damage: a truncation to take
        assert storage.reports_pending(0.0)
        assert len(storage.take_truncations()) == 1
        assert not storage.reports_pending(0.0)
