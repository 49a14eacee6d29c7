"""Bounded reads: ``Consumer(assign=..., end_offsets=...)`` read with ``read_to_end``, and what a
consumer does with records that are gone (``fail_on_data_loss``).

One store whose retention keeps ~8 KiB of a partition of 2,000 records of 100 bytes: the
oldest records are gone for good (the store answers FETCHes for them from its first record
on, and the consumer skips to it), and the records past the head never arrive.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dafka import Consumer, DataLossError, Producer
from dafka.client import ConsumerSettings, ReadCommittedConsumer, replay_from_stores
from dafka.message import Flags, build_uuid
from dafka.records import encode_batch
from dafka.server import InProcessCluster, free_port_pair
from dafka.storage import FsyncPolicy, RetentionPolicy, StorageConfig
from tests.integration.loopback import loopback_client

pytestmark = pytest.mark.integration

RECORDS = 2_000
KEPT = 20
DEADLINE = 30.0


class Trimmed:
    """A cluster holding the tail of one partition (retention goes on trimming it: at least
    its last ``KEPT`` records stay)."""

    def __init__(self, towers: str) -> None:
        self.towers = towers
        self.key = ("kept", "r.0")

    def settings(self, **fields: Any) -> dict[str, Any]:
        return loopback_client(
            self.towers,
            DEADLINE,
            fetch_retry_initial=0.05,  # the skip comes after 10 refused retries
            fetch_retry_max=0.2,
            **fields,
        )


@pytest.fixture(scope="module")
def trimmed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trimmed]:
    port = free_port_pair()
    config = StorageConfig(
        segment_bytes=4096,
        fsync=FsyncPolicy.batch(),
        retention=RetentionPolicy(max_bytes=8192),
        retention_check_s=0.1,
    )
    data: Path = tmp_path_factory.mktemp("bounded")
    with InProcessCluster(data, tower_port=port, storage_config=config, beacon_interval=0.2) as c:
        towers = f"127.0.0.1:{port}"
        with Producer(
            "kept",
            towers=towers,
            name="r",
            batching=False,
            beacon_interval=0.2,
            beacon_timeout=0.8,
        ) as producer:
            for i in range(RECORDS):
                producer.send(b"%05d" % i + b"." * 95)
            assert producer.flush(DEADLINE) == 0
        storage, runner = c.stores[0].storage, c.stores[0].runner
        assert storage is not None
        assert runner is not None

        def first() -> int:
            found = runner.call(lambda _n: storage.start_offset("kept", "r.0"))
            return found or 0

        deadline = time.monotonic() + DEADLINE  # a retention run after the last record
        while (RECORDS - first()) * 100 >= 8192 + 2 * 4096:
            assert time.monotonic() < deadline, "retention never ran"
            time.sleep(0.05)
        yield Trimmed(towers)


def _offsets(consumer: Consumer, idle_timeout: float = DEADLINE) -> list[int]:
    return [o for columns in consumer.read_to_end(idle_timeout) for o in columns.offsets]


def _first_offsets(consumer: Consumer) -> list[int]:
    """What arrives first, waited for without an idle timeout (a short one, counted from
    the start, could end the read before the first FETCH was answered on a busy machine)."""
    columns = consumer.poll_columns(timeout=DEADLINE)
    assert len(columns), "nothing arrived"
    return list(columns.offsets)


def test_read_to_end_reads_a_bounded_range_as_columns(trimmed: Trimmed) -> None:
    key, start = trimmed.key, RECORDS - KEPT
    with Consumer(assign={key: start}, end_offsets={key: RECORDS}, **trimmed.settings()) as c:
        chunks = list(c.read_to_end(DEADLINE, max_records=7))
        assert c.at_end()
        assert c.poll_statistics().records_lost == 0
    assert max(len(columns) for columns in chunks) <= 7
    assert [o for columns in chunks for o in columns.offsets] == list(range(start, RECORDS))
    assert chunks[0].values[0] == b"%05d" % start + b"." * 95
    with Consumer(assign={key: 5}, end_offsets={key: 5}, **trimmed.settings()) as empty:
        assert empty.at_end()
        assert list(empty.read_to_end(DEADLINE)) == []


def test_records_gone_from_every_store_are_skipped_and_counted(trimmed: Trimmed) -> None:
    key = trimmed.key
    with Consumer(
        assign={key: 0},
        end_offsets={key: RECORDS},
        **trimmed.settings(fail_on_data_loss=False),
    ) as c:
        got = _offsets(c)
        first = got[0]
        assert 0 < first <= RECORDS - KEPT
        assert got == list(range(first, RECORDS))
        assert c.poll_statistics().records_lost == first


def test_fail_on_data_loss_raises_at_the_gap_naming_it(trimmed: Trimmed) -> None:
    key = trimmed.key
    with Consumer(assign={key: 0}, end_offsets={key: RECORDS}, **trimmed.settings()) as c:
        with pytest.raises(DataLossError, match=r"kept/r\.0: records 0\.\.\d+ are gone") as lost:
            _offsets(c)  # the default: fail_on_data_loss=True
        assert c.position(*key) == 0  # nothing after the gap was handed out
        error = lost.value
        assert (error.topic, error.partition, error.first) == (*key, 0)
        assert error.end is not None
        with pytest.raises(DataLossError):  # until the application moves past it
            c.poll_columns(0.1)
        c.seek(*key, error.end)
        assert _offsets(c) == list(range(error.end, RECORDS))


def test_records_that_never_arrive_end_the_read_or_raise(trimmed: Trimmed) -> None:
    key, start, end = trimmed.key, RECORDS - KEPT, RECORDS + 5
    with Consumer(
        assign={key: start},
        end_offsets={key: end},
        **trimmed.settings(fail_on_data_loss=False),
    ) as c:
        first = _first_offsets(c)
        assert [*first, *_offsets(c, idle_timeout=1.0)] == list(range(start, RECORDS))
        assert not c.at_end()
        assert c.poll_statistics().records_lost == 5
    with Consumer(assign={key: start}, end_offsets={key: end}, **trimmed.settings()) as c:
        got: list[int] = _first_offsets(c)

        def read() -> None:
            for columns in c.read_to_end(1.0):
                got.extend(columns.offsets)

        with pytest.raises(DataLossError, match=rf"records {RECORDS}\.\.{end - 1} did not arrive"):
            read()
        assert got == list(range(start, RECORDS))


def test_replay_from_stores_serves_a_span_that_left_the_ring(trimmed: Trimmed) -> None:
    """A span that left the read-committed consumer's ring is replayed - from the RECORDs
    the filter saw last when it holds them all, else by a bounded read of the stores
    (replay_from_stores, which the Spark source's filters use too, checked below)."""
    pid = b"\x01abcde"
    values = [b"m%02d" % i for i in range(40)]
    with Producer("txn", towers=trimmed.towers, name="t", batching=False) as producer:
        for clock, value in enumerate(values, 1):  # one CONTINUE per RECORD: a long span
            uuid = build_uuid(pid, clock, Flags.CONTINUE_TXN).bytes
            producer.send(encode_batch([value], uuids=[uuid]))
        producer.send(encode_batch([b""], uuids=[build_uuid(pid, 41, Flags.ACK_TXN).bytes]))
        assert producer.flush(DEADLINE) == 0
    key = ("txn", "t.0")
    settings = trimmed.settings()
    with ReadCommittedConsumer(
        assign={key: 0}, end_offsets={key: 41}, buffer=8, **settings
    ) as consumer:
        got = [r.value for columns in consumer.read_to_end(DEADLINE) for r in columns]
        assert got == values
        assert consumer.replays + consumer.replays_recent >= 1
    replay = replay_from_stores(ConsumerSettings(**settings), idle_timeout=1.0)
    assert [r.offset for r in replay("txn", "t.0", 3, 5)] == [3, 4, 5]
    with pytest.raises(DataLossError, match=r"txn/t\.0: records 41\.\.44 did not arrive"):
        replay("txn", "t.0", 40, 44)


def test_the_idle_clock_starts_when_a_store_answered(tmp_path: Path) -> None:
    """Records cannot be missing before a store could send them: on a busy machine the
    greeting alone can take seconds. With no store at all the read still ends, saying so."""
    port = free_port_pair()
    with InProcessCluster(tmp_path, tower_port=port, stores=0, beacon_interval=0.2):
        key = ("nobody", "p.0")
        settings = Trimmed(f"127.0.0.1:{port}").settings()
        with (
            Consumer(assign={key: 0}, end_offsets={key: 3}, **settings) as c,
            pytest.raises(DataLossError, match=r"records 0\.\.2 \(no store answered\)"),
        ):
            list(c.read_to_end(1.0))
