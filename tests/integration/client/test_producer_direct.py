"""The default ``Producer``'s lone message leaves from the calling thread; loops still batch.

``Producer.send``/``produce`` of a message that comes ``DIRECT_GAP`` or more after the previous
one, with nothing queued, drains the queue in the caller's thread (``NodeRunner.run_here``)
as ``PartitionProducer.publish`` does: one thread wake-up less on its way. A loop's messages
are queued and batched by the runner as before. On a real cluster (a tower and a store in
this process, a live consumer): every message is delivered once and in order, whether it
went directly or through the queue, also when the two alternate from two threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dafka import Producer
from tests.integration.client.test_producer import (
    FAST,
    Cluster,
    live_consumer,
    poll_values,
)
from tests.integration.transport.transport_helpers import held_turn, records_sent


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(tmp_path, stores=1) as c:
        yield c


def test_lone_messages_are_sent_by_the_calling_thread(cluster: Cluster) -> None:
    with (
        live_consumer(cluster, "lone") as consumer,
        Producer("lone", towers=cluster.towers, partitions=1, **FAST) as producer,
    ):
        for i in range(40):  # each after the previous one was stored: lone
            producer.send(f"send-{i}".encode()).result(timeout=10)
        for i in range(40):
            producer.produce(f"produce-{i}".encode(), key=b"k")  # the keyed path too
            assert producer.flush(10) == 0
        expected = [f"send-{i}".encode() for i in range(40)]
        expected += [f"produce-{i}".encode() for i in range(40)]
        assert poll_values(consumer, 80) == expected
        stats = producer.transport_statistics()
    # one RECORD per lone message; the others met the runner in a turn (an ACK's)
    assert stats.sent_here >= 40, stats


def test_a_loop_still_goes_in_batches_from_the_runner(cluster: Cluster) -> None:
    count = 50_000
    with (
        live_consumer(cluster, "loop") as consumer,
        Producer("loop", towers=cluster.towers, partitions=1, **FAST) as producer,
    ):
        for i in range(count):
            producer.produce(b"%d" % i)
        assert producer.flush(30) == 0
        assert poll_values(consumer, count) == [b"%d" % i for i in range(count)]
        stats = producer.transport_statistics()
    assert stats.sent <= count // 20, stats  # batches, not a RECORD per message


def test_direct_and_queued_messages_of_two_threads_keep_each_threads_order(
    cluster: Cluster,
) -> None:
    per_thread = 3_000
    with (
        live_consumer(cluster, "mixed") as consumer,
        Producer("mixed", towers=cluster.towers, partitions=1, **FAST) as producer,
    ):

        def send(name: str) -> None:
            for i in range(per_thread):
                producer.produce(f"{name}-{i}".encode())
                if i % 50 == 0:
                    time.sleep(0.0002)  # a gap: the next one may go directly

        threads = [threading.Thread(target=send, args=(n,)) for n in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert producer.flush(30) == 0
        got = poll_values(consumer, 2 * per_thread)
        stats = producer.transport_statistics()
    assert len(got) == 2 * per_thread
    assert len(set(got)) == len(got)
    for name in ("a", "b"):
        assert [v for v in got if v.startswith(name.encode())] == [
            f"{name}-{i}".encode() for i in range(per_thread)
        ]
    assert stats.sent_here > 0, stats


def test_a_lone_message_that_finds_the_runner_in_mid_turn_leaves_at_that_turns_end(
    cluster: Cluster,
) -> None:
    """As ``PartitionProducer``'s: a lone message sent while the runner is in mid-turn (an
    ACK's) is drained and sent at the end of that turn (``NodeRunner.run_at_turn_end``),
    not after a wake-up in a turn of its own: it has left before work posted after it
    runs."""
    with (
        live_consumer(cluster, "midturn") as consumer,
        Producer("midturn", towers=cluster.towers, partitions=1, **FAST) as producer,
    ):
        producer.send(b"first").result(timeout=10)
        runner = producer._runner
        seen: list[int] = []
        with held_turn(runner):
            machines = producer._machine.machines
            sent = records_sent(runner, machines)  # the runner is held: no race
            time.sleep(0.001)  # DIRECT_GAP after the last drain: lone
            future = producer.send(b"mid-turn")
            runner.post(lambda _now: seen.append(records_sent(runner, machines)))
        future.result(timeout=10)
        assert poll_values(consumer, 2) == [b"first", b"mid-turn"]
    assert seen == [sent + 1]  # sent in busy's turn: before the next turn ran the probe
