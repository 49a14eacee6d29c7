"""offsets_for_times / seek_to_timestamp on a real cluster (tower and two stores in their
processes): exact answers by the records' timestamps, found by reading a handful of single
records - not the partition - and ``dafka consume --from-timestamp`` starting there."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dafka import Admin, AsyncConsumer, Consumer, NoStoreError
from dafka.client import TimestampSearch
from dafka.node import ProducerMachine
from dafka.protocol import new_node_id
from dafka.records import encode_batch
from dafka.server import LocalCluster
from dafka.transport.runner import Identity, NodeRunner
from tests.integration.client.test_consumer_cluster import DEADLINE, client

pytestmark = pytest.mark.integration

RECORDS = 3000
T0 = 1_700_000_000_000


def stamps(offset: int) -> list[int]:
    """RECORD ``offset`` holds three messages stamped 10 ms apart; RECORDs 30 ms apart."""
    return [T0 + 30 * offset + 10 * i for i in range(3)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(stores=2, beacon_interval=0.2) as running:
        yield running


@pytest.fixture(scope="module")
def partition(cluster: LocalCluster) -> str:
    """RECORDS batched RECORDs in topic ``times``, published RECORD by RECORD (exact
    offsets), stored by both stores; then the producer is gone."""
    pid = new_node_id()
    machine = ProducerMachine("times", pid)
    runner = NodeRunner(machine, [Identity(pid)], cluster.transport, name="raw")
    runner.start(DEADLINE)
    try:

        def publish(now: float) -> None:
            for offset in range(RECORDS):
                values = [b"%d.%d" % (offset, i) for i in range(3)]
                machine.publish(encode_batch(values, timestamps=stamps(offset)), now)

        runner.call(publish)
        deadline = time.monotonic() + DEADLINE
        while runner.call(lambda _n: machine.unacked):
            assert time.monotonic() < deadline, "records not stored"
            time.sleep(0.05)
    finally:
        runner.stop()
    return pid


def test_offsets_for_times_reads_a_handful_of_records(
    cluster: LocalCluster, partition: str
) -> None:
    key = ("times", partition)
    asked = {
        T0 - 5: 0,  # before everything: the first RECORD
        T0 + 30 * 1234: 1234,  # a RECORD's first message
        T0 + 30 * 1234 + 15: 1234,  # inside a RECORD: the one holding its last message
        T0 + 30 * 1234 + 25: 1235,  # after a RECORD's last message: the next one
        T0 + 30 * (RECORDS - 1) + 20: RECORDS - 1,
    }
    with TimestampSearch(cluster.transport, ready_timeout=DEADLINE) as search:
        for stamp, expected in asked.items():
            before = search.probes
            assert search.offsets_for_times({key: stamp}, timeout=DEADLINE) == {key: expected}
            # a binary search: ~12 single records of 3,000, never the partition
            assert search.probes - before <= math.ceil(math.log2(RECORDS + 1)) + 2
        late = search.offsets_for_times({key: T0 + 30 * RECORDS}, timeout=DEADLINE)
        assert late == {key: None}  # nothing at or after it yet
        unknown = search.offsets_for_times({("times", "NOBODY"): T0}, timeout=DEADLINE)
        assert unknown == {("times", "NOBODY"): None}


def test_consumer_seeks_to_a_timestamp(cluster: LocalCluster, partition: str) -> None:
    key = ("times", partition)
    with Consumer("times", **client(cluster, offset_reset="latest")) as consumer:
        assert consumer.offsets_for_times({key: T0 + 30 * 2000}) == {key: 2000}
        assert consumer.seek_to_timestamp(T0 + 30 * 2990 + 5) == {key: 2990}
        got: list[Any] = []
        deadline = time.monotonic() + DEADLINE
        while len(got) < 30:
            assert time.monotonic() < deadline, f"only {len(got)} messages"
            got += consumer.poll(timeout=0.2)
        assert (got[0].offset, got[0].index) == (2990, 0)
        assert [r.value for r in got[:3]] == [b"2990.0", b"2990.1", b"2990.2"]
        assert consumer.statistics().delivered <= 10  # only what follows the seek
        # a time after the last RECORD: its end
        assert consumer.seek_to_timestamp(T0 + 30 * RECORDS, [key]) == {key: RECORDS}


def test_async_consumer_offsets_for_times(cluster: LocalCluster, partition: str) -> None:
    key = ("times", partition)

    async def run() -> dict[tuple[str, str], int | None]:
        async with AsyncConsumer("times", **client(cluster)) as consumer:
            sought = await consumer.seek_to_timestamp(T0 + 30 * 7, [key])
            assert sought == {key: 7}
            return await consumer.offsets_for_times({key: T0 + 30 * 8})

    assert asyncio.run(run()) == {key: 8}


def test_cli_from_timestamp_starts_at_the_records_found(
    cluster: LocalCluster, partition: str
) -> None:
    stamp = T0 + 30 * 2995 + 15  # inside RECORD 2995: its first two messages are before
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dafka",
            "consume",
            "times",
            "--tower",
            cluster.towers,
            "--beacon-interval",
            "0.2",
            "--from-timestamp",
            str(stamp),
            "-e",
            "-f",
            "%o.%i %s\\n",
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    assert lines[0] == "2995.2 2995.2"
    assert len(lines) == 1 + 3 * (RECORDS - 2996)


def test_admin_lists_describes_and_searches(cluster: LocalCluster, partition: str) -> None:
    admin = Admin(**client(cluster))
    listed = admin.topics()
    assert listed["times"].heads == {partition: RECORDS - 1}
    info = admin.describe("times")
    assert info.records == RECORDS
    assert info.producers == ()  # its producer is gone
    assert list(info.partitions[partition].stores.values()) == [RECORDS - 1] * 2
    assert info.partitions[partition].lag == 0
    assert admin.describe("nobody-knows").partitions == {}
    key = ("times", partition)
    assert admin.offsets_for_times({key: T0 + 30 * 99}) == {key: 99}


def test_no_store_is_an_error_that_says_so() -> None:
    with LocalCluster(stores=0, beacon_interval=0.2) as empty:
        with pytest.raises(NoStoreError, match=r"no store answered within 1\.0 s"):
            Admin(**client(empty)).offsets_for_times({("t", "p"): 1}, timeout=1.0)
        with pytest.raises(NoStoreError, match="no live store"):
            Admin(**client(empty)).delete_topic("t")


def test_a_search_ends_on_the_stores_that_is_all_not_a_quiet_window(
    cluster: LocalCluster, partition: str
) -> None:
    """The heads were taken after ``max(0.3, probe_timeout)`` of quiet (no "that is all" on
    the wire): with a 5 s probe timeout, each lookup waited 5 s first. The stores' HEADS-END
    ends that wait: three lookups of one partition well within one window."""
    key = ("times", partition)
    window = 5.0
    with TimestampSearch(cluster.transport, ready_timeout=DEADLINE, probe_timeout=window) as s:
        started = time.monotonic()
        for offset in (7, 1500, RECORDS - 1):
            assert s.offsets_for_times({key: T0 + 30 * offset}, timeout=DEADLINE) == {key: offset}
        took = time.monotonic() - started
    assert took < window, f"three lookups took {took:.2f}s: the quiet window was waited"
