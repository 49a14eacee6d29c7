"""Issue 18 path 4: a consumer that meets records no store holds any more gets a data-loss
error (``fail_on_data_loss``, the default), or skips them and says so - never a silent wait.

One store, the only copy: record ``VICTIM`` of its partition is damaged on disk while it is
down. After its restart it keeps and serves every other record (the damaged one is a hole
of its log, which no peer can fill), and a consumer reading through it finds out within ten
FETCH retries answered only from beyond the hole (fast retries here).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dafka import Consumer, DataLossError, Producer
from dafka.server import InProcessCluster, free_port_pair
from dafka.storage import FsyncPolicy, Storage, StorageConfig
from dafka.storage._format import RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE
from tests.integration.loopback import loopback_client

pytestmark = pytest.mark.integration

RECORDS = 3_000
VICTIM = 1_234
DEADLINE = 60.0
KEY = ("flip", "r.0")


class Damaged:
    def __init__(self, towers: str) -> None:
        self.towers = towers

    def settings(self, **fields: Any) -> dict[str, Any]:
        return loopback_client(
            self.towers,
            DEADLINE,
            offset_reset="earliest",
            fetch_retry_initial=0.05,  # the loss is known after 10 refused retries
            fetch_retry_max=0.2,
            **fields,
        )


def value(i: int) -> bytes:
    return b"%05d" % i + b"." * 95


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Damaged]:
    port = free_port_pair()
    data: Path = tmp_path_factory.mktemp("loss")
    towers = f"127.0.0.1:{port}"
    config = StorageConfig(fsync=FsyncPolicy.batch())
    with (
        InProcessCluster(data, tower_port=port, storage_config=config, beacon_interval=0.2),
        Producer("flip", towers=towers, name="r", batching=False, beacon_interval=0.2) as producer,
    ):
        for i in range(RECORDS):
            producer.send(value(i))
        assert producer.flush(DEADLINE) == 0
    root = data / "store-0" / "log"
    with Storage.open(root, config) as storage:
        held = storage.read(*KEY, 0, RECORDS)
        assert [v for _, v in held] == [value(i) for i in range(RECORDS)]
        log = storage.log(*KEY)
        assert log is not None
        (segment,) = log.segments
        path = segment.path
    at = SEGMENT_HEADER_SIZE + VICTIM * (RECORD_HEADER_SIZE + 100) + RECORD_HEADER_SIZE + 40
    raw = bytearray(path.read_bytes())
    raw[at : at + 3] = bytes(b ^ 0x5A for b in raw[at : at + 3])
    path.write_bytes(bytes(raw))
    with InProcessCluster(data, tower_port=port, storage_config=config, beacon_interval=0.2):
        yield Damaged(towers)


def _until_an_error(consumer: Consumer) -> None:
    while True:
        assert consumer.poll(timeout=DEADLINE) == []


def _read(consumer: Consumer, until: int) -> list[int]:
    got: list[int] = []
    while len(got) < until:
        batch = consumer.poll(timeout=DEADLINE)
        assert batch, f"nothing more after {len(got)} records"
        got += [r.offset for r in batch]
    return got


def test_the_consumer_raises_naming_exactly_the_lost_record(damaged: Damaged) -> None:
    """Before: the store cut the log at the damaged record (and moved the 1,765 records
    after it to its quarantine) and the consumer waited for them forever."""
    with Consumer("flip", **damaged.settings()) as consumer:
        assert _read(consumer, VICTIM) == list(range(VICTIM))  # what came before it first
        with pytest.raises(DataLossError) as lost:
            _until_an_error(consumer)
        error = lost.value
        assert (error.topic, error.partition, error.first, error.end) == (*KEY, VICTIM, VICTIM + 1)
        assert f"flip/r.0: records {VICTIM}..{VICTIM} are gone from every store" in str(error)
        consumer.seek(*KEY, VICTIM + 1)  # the application decides to go on
        rest = _read(consumer, RECORDS - VICTIM - 1)
        assert rest == list(range(VICTIM + 1, RECORDS))


def test_without_fail_on_data_loss_the_records_are_skipped_and_counted(
    damaged: Damaged, caplog: pytest.LogCaptureFixture
) -> None:
    with Consumer("flip", **damaged.settings(fail_on_data_loss=False)) as consumer:
        got = _read(consumer, RECORDS - 1)
        assert got == [i for i in range(RECORDS) if i != VICTIM]
        assert consumer.poll_statistics().records_lost == 1
    assert any(
        f"skipped flip/r.0: records {VICTIM}..{VICTIM}: gone" in r.getMessage()
        for r in caplog.records
    )


def test_the_store_serves_the_records_after_the_hole(damaged: Damaged) -> None:
    with (
        Consumer(assign={KEY: VICTIM - 2}, **damaged.settings()) as consumer,
        pytest.raises(DataLossError),  # an assigned start is a known position too
    ):
        _read(consumer, RECORDS)
    with Consumer(assign={KEY: VICTIM + 1}, **damaged.settings()) as consumer:
        values: list[bytes] = []
        while len(values) < RECORDS - VICTIM - 1:
            values += [r.value for r in consumer.poll(timeout=DEADLINE)]
        assert values == [value(i) for i in range(VICTIM + 1, RECORDS)]
