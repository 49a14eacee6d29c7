"""A ``poll`` waiting for records reads them in its own thread; the runner reads otherwise.

A consumer (no group, no ACL) lends its data sockets to the thread waiting in ``poll``
(``NodeRunner.wait_here``): a record arriving then is read and delivered by
that thread, one thread wake-up less than through the runner. Meanwhile the runner's poll
leaves the data SUBs to it; once it has gone, the runner reads them again (records keep
being received while the application does not poll). On a real cluster (a tower and a store
in this process, a producer): every record once, in order, whoever read it.
"""

from __future__ import annotations

import cProfile
import pstats
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dafka.client import PartitionProducer
from dafka.records import Record
from tests.integration.client.test_producer import (
    Cluster,
    live_consumer,
    poll_values,
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(tmp_path, stores=1) as c:
        yield c


def test_a_waiting_poll_reads_the_records_in_its_own_thread(cluster: Cluster) -> None:
    with (
        live_consumer(cluster, "waits") as consumer,
        PartitionProducer("waits", cluster.client_transport()) as producer,
    ):
        producer.publish(b"first")
        assert poll_values(consumer, 1, poll=0.5) == [b"first"]
        before = consumer.transport_statistics().received_here
        got: list[bytes] = []
        for i in range(30):  # each published while the consumer waits in poll for it
            producer.publish(f"r{i}".encode())
            got += poll_values(consumer, 1, poll=0.5)
        assert got == [f"r{i}".encode() for i in range(30)]
        read_here = consumer.transport_statistics().received_here - before
    assert read_here >= 15  # the others arrived while the runner was in a turn (a beacon's)


def test_a_waiting_poll_reads_each_lone_record_once(cluster: Cluster) -> None:
    """A poll waits on the SUB's descriptor first and reads once it is ready: one read per
    record. It read before waiting too, which found nothing once per record at a steady
    rate (~15-20 us of CPU each, issue 23)."""
    with (
        live_consumer(cluster, "once") as consumer,
        PartitionProducer("once", cluster.client_transport()) as producer,
    ):
        producer.publish(b"first")
        assert poll_values(consumer, 1, poll=0.5) == [b"first"]
        before = consumer.transport_statistics()
        got: list[bytes] = []
        for i in range(30):  # each published while the consumer waits in poll for it
            producer.publish(f"r{i}".encode())
            got += poll_values(consumer, 1, poll=0.5)
        assert got == [f"r{i}".encode() for i in range(30)]
        after = consumer.transport_statistics()
    read_here = after.received_here - before.received_here
    reads = after.reads_here - before.reads_here
    assert read_here >= 15  # the others arrived while the runner was in a turn (a beacon's)
    assert reads <= read_here + 5  # a descriptor may signal a command now and then


def test_a_lone_records_poll_and_delivery_call_nothing_of_the_condition(cluster: Cluster) -> None:
    """``poll`` and a delivery take the consumer's lock itself, not through its Condition
    (``with`` on a Condition is a Python call each way), and a delivery notifies the
    Condition only while a thread sleeps on it: 4 of the ~48 Python calls of a lone
    record's poll were the Condition's (issue 23, the client's CPU per record at 1k/s).
    The polling thread is profiled (cProfile: exact call counts)."""
    with (
        live_consumer(cluster, "plain") as consumer,
        PartitionProducer("plain", cluster.client_transport()) as producer,
    ):
        producer.publish(b"first")
        assert poll_values(consumer, 1, poll=0.5) == [b"first"]
        profile = cProfile.Profile()
        got: list[bytes] = []
        for i in range(20):
            producer.publish(f"r{i}".encode())
            deadline = time.monotonic() + 30
            while len(got) <= i and time.monotonic() < deadline:
                profile.enable()
                records = consumer.poll(timeout=0.5)
                profile.disable()
                got += [r.value for r in records]
        assert got == [f"r{i}".encode() for i in range(20)]
    calls = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    condition = {
        name: count
        for (path, _, name), (count, *_) in calls.items()
        if path.endswith("threading.py") and name in ("__enter__", "__exit__", "notify")
    }
    assert condition == {}


def test_records_arrive_while_the_application_does_not_poll(cluster: Cluster) -> None:
    with (
        live_consumer(cluster, "away") as consumer,
        PartitionProducer("away", cluster.client_transport()) as producer,
    ):
        producer.publish(b"first")
        # the poll waited: the runner left the SUBs
        assert poll_values(consumer, 1, poll=0.5) == [b"first"]
        received = consumer.transport_statistics().received
        for i in range(10):
            producer.publish(f"r{i}".encode())
        assert producer.flush(10)
        # the runner reads them (at its next turn) without a poll asking
        deadline = time.monotonic() + 10
        while consumer.transport_statistics().received < received + 10:
            assert time.monotonic() < deadline, "the runner did not read while nobody polled"
            time.sleep(0.01)
        assert poll_values(consumer, 10, poll=0.5) == [f"r{i}".encode() for i in range(10)]


def test_two_threads_polling_get_every_record_once_in_order(cluster: Cluster) -> None:
    count = 3_000
    with (
        live_consumer(cluster, "two") as consumer,
        PartitionProducer("two", cluster.client_transport()) as producer,
    ):
        got: list[list[bytes]] = [[], []]
        done = threading.Event()

        def poll(into: list[bytes]) -> None:
            while not done.is_set():
                into += [r.value for r in consumer.poll(timeout=0.05, max_records=7)]

        threads = [threading.Thread(target=poll, args=(g,)) for g in got]
        for t in threads:
            t.start()
        try:
            for i in range(count):
                producer.publish(b"%d" % i)
                if i % 100 == 0:
                    time.sleep(0.001)  # a gap: the pollers wait, and read
            assert producer.flush(30)
            deadline = time.monotonic() + 30
            while sum(map(len, got)) < count and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            done.set()
            for t in threads:
                t.join()
    values = sorted(int(v) for v in got[0] + got[1])
    assert values == list(range(count))  # once each
    for part in got:  # each thread's share in order
        assert [int(v) for v in part] == sorted(int(v) for v in part)


def test_close_wakes_a_poll_waiting_on_the_sockets(cluster: Cluster) -> None:
    consumer = live_consumer(cluster, "closing")
    out: list[list[Record]] = []
    started = threading.Event()

    def poll() -> None:
        started.set()
        out.append(consumer.poll(timeout=60))

    thread = threading.Thread(target=poll)
    thread.start()
    assert started.wait(10)
    deadline = time.monotonic() + 10
    while consumer._direct_waiter is None:  # the poll waits on the sockets
        assert time.monotonic() < deadline, "poll never waited on the sockets"
        time.sleep(0.01)
    consumer.close()
    thread.join(10)
    assert not thread.is_alive(), "poll still waiting after close"
    assert out == [[]]


def test_a_poll_that_began_in_the_runners_turn_still_waits_on_the_sockets(
    cluster: Cluster,
) -> None:
    """The runner held its turn when ``poll`` began (no data wait could be had then): the
    poll asks again soon, rather than waiting on the condition for its whole timeout (it
    did: 4 of 9 runs of the test above at load 5 never saw the direct waiter)."""
    consumer = live_consumer(cluster, "mid-turn")
    turns = consumer._runner._turns
    assert turns is not None
    out: list[list[Record]] = []
    thread = threading.Thread(target=lambda: out.append(consumer.poll(timeout=60)))
    with turns.lock:  # the runner in mid-turn as the poll begins
        thread.start()
        deadline = time.monotonic() + 10
        while not consumer._lock._waiters:  # type: ignore[attr-defined]  # poll got no
            assert time.monotonic() < deadline, "poll never began waiting"  # data wait
            time.sleep(0.01)
        assert consumer._data_wait is None
    deadline = time.monotonic() + 10
    while consumer._direct_waiter is None:
        assert time.monotonic() < deadline, "poll kept off the sockets after the turn ended"
        time.sleep(0.01)
    consumer.close()
    thread.join(10)
    assert not thread.is_alive()
    assert out == [[]]
