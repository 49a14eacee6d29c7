"""A store paused past a consumer's FETCH deadline answers the FETCH and its retry once.

The scene that started the FETCH retry storm at load 20-30 (docs/nodes.md, "FETCH: windows,
retries, holes"), made on purpose with signals: a ``dafka store`` holds a partition the
producer has left; a consumer read it once and seeks back to 0 while the store is stopped
(SIGSTOP), so that its FETCH goes unanswered past ``retry_initial`` and is sent again; then
the store resumes (SIGCONT) and reads the FETCH and its retry. Before, it answered both:
the retry's whole window came back as duplicates, queued ahead of the next window the
consumer needed (on a store starved of CPU those duplicates outlasted ``retry_initial``, and
each such stretch sent another retry). Now the store answers them with one reply: the
consumer reads the partition a second time, every record once and in order, and the
duplicates it gets are those of retries sent *after* the store resumed (a stall of the
loaded machine; none on a quiet one), not of those sent while it was stopped - but for a
slice, when the store reads the retry a turn after the FETCH. (That duplicates which still
come hold the consumer's retry off is shown deterministically in
tests/unit/node/test_node_fetch_retry_hold.py.)
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from dafka.client import Consumer
from dafka.node import ConsumerConfig, FetchPolicy
from tests.integration.cluster.cluster_client import payload, transport
from tests.integration.cluster.cluster_procs import DEADLINE, Processes, wait_until

TOPIC = "paused"
RECORDS = 30_000
WINDOW = 10_000


def read(consumer: Consumer, count: int) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + DEADLINE
    while len(got) < count and time.monotonic() < deadline:
        got += [(r.offset, r.value) for r in consumer.poll(timeout=0.5)]
    return got


@pytest.mark.timeout(240)
def test_a_paused_store_answers_a_fetch_and_its_retry_once(
    procs: Processes, tmp_path: Path
) -> None:
    tower = procs.tower()
    store = procs.store(tmp_path / "store", [tower])
    producer = procs.client("producer", "produce", [tower], TOPIC, "--records", str(RECORDS))
    pid = producer.wait_event("ready")["id"]
    assert producer.wait_exit(DEADLINE) == 0, procs.describe()
    assert producer.require("done")["acked"] == RECORDS

    policy = FetchPolicy(window=WINDOW, retry_initial=0.5, retry_max=5.0)
    with Consumer(
        TOPIC,
        transport=transport([tower.spec], 0.5),  # peers expire after 2 s: the stop is shorter
        config=ConsumerConfig(offset_reset="earliest", fetch=policy),
    ) as consumer:
        first = read(consumer, RECORDS)
        assert [o for o, _ in first] == list(range(RECORDS)), procs.describe()

        store.proc.send_signal(signal.SIGSTOP)
        try:
            before = consumer.metrics()
            consumer.seek(TOPIC, pid, 0)
            # The FETCH and its first retry wait in the stopped store's socket.
            wait_until(
                lambda: consumer.metrics().fetch_retries > before.fetch_retries,
                "the consumer's first retry",
            )
            resumed = consumer.metrics()
        finally:
            store.proc.send_signal(signal.SIGCONT)
        again = read(consumer, RECORDS)
        after = consumer.metrics()
        extra = consumer.poll(timeout=0.3)

    assert [o for o, _ in again] == list(range(RECORDS)), procs.describe()
    assert all(value == payload(offset) for offset, value in again)
    assert extra == []
    stopped = resumed.fetch_retries - before.fetch_retries
    later = after.fetch_retries - resumed.fetch_retries
    duplicates = after.dropped["duplicates"] - before.dropped["duplicates"]
    # Before: the window of each retry sent while the store was stopped came back as
    # duplicates (8,408 and 10,000 with one retry, no retry after the resume to explain
    # them). Now none, or - when the store read the retry a turn after the FETCH - what
    # the reply had sent by then (a slice of 2,048 records a turn).
    assert duplicates <= WINDOW // 2 + WINDOW * later, (stopped, later, duplicates)
    assert store.proc.stop(signal.SIGTERM) == 0
