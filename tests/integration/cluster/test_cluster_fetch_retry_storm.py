"""A store starved of CPU while a consumer catches up: no FETCH retry storm.

The scene of a stall seen at load 20-30 (docs/nodes.md, "FETCH: windows, retries, holes"),
made on purpose with signals: a ``dafka store`` holds a partition the producer has left; a
consumer read it once and seeks back to 0 while the store is stopped (SIGSTOP), so that its
FETCH goes unanswered past ``retry_initial`` and is sent again; the store is then let run
only a sliver of every 0.2 s (SIGCONT / SIGSTOP, as a scheduler starving it would), so it
answers the first window, then the retry's window - duplicates by then - at a crawl. Before,
those duplicates made no progress for longer than ``retry_initial``: each such stretch sent
another retry, whose window queued more duplicates ahead of what was still needed. Now the
store, reading the FETCH and its retry in one turn, answers them once, and duplicates that
still come (a retry read in a later turn) hold the consumer's retry off: after the store
resumes, no FETCH is sent again, and the consumer reads the partition a second time, every
record once and in order.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from dafka.client import Consumer
from dafka.node import ConsumerConfig, FetchPolicy
from tests.integration.cluster.cluster_client import payload, transport
from tests.integration.cluster.cluster_procs import DEADLINE, Processes, wait_until

TOPIC = "starved"
RECORDS = 40_000
WINDOW = 20_000
"""Two windows; the larger the window, the longer its duplicates take at a crawl."""
RUN, STOP = 0.01, 0.19
"""The store's share of every 0.2 s once resumed: 5 % of a core, under the 0.5 s retry."""


class Starver:
    """Lets a stopped process run ``RUN`` s of every ``RUN + STOP`` s, until :meth:`close`
    (which lets it run on for good)."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            os.kill(self._pid, signal.SIGCONT)
            if self._done.wait(RUN):
                break
            os.kill(self._pid, signal.SIGSTOP)
            self._done.wait(STOP)

    def close(self) -> None:
        self._done.set()
        self._thread.join()
        os.kill(self._pid, signal.SIGCONT)


def read(consumer: Consumer, count: int) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + DEADLINE
    while len(got) < count and time.monotonic() < deadline:
        got += [(r.offset, r.value) for r in consumer.poll(timeout=0.5)]
    return got


@pytest.mark.timeout(240)
def test_a_starved_store_is_not_asked_its_windows_again(procs: Processes, tmp_path: Path) -> None:
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
            starver = Starver(store.proc.pid)
        except BaseException:
            store.proc.send_signal(signal.SIGCONT)
            raise
        try:
            again = read(consumer, RECORDS)
        finally:
            starver.close()
        after = consumer.metrics()
        extra = consumer.poll(timeout=0.3)

    assert [o for o, _ in again] == list(range(RECORDS)), procs.describe()
    assert all(value == payload(offset) for offset, value in again)
    assert extra == []
    retries = after.fetch_retries - resumed.fetch_retries
    # Before: 1 to 3 retries once the store resumed (3 runs of 3 at load 15-30), each
    # another window of duplicates queued ahead of the records still needed.
    assert retries == 0, (after, resumed)
    # The only duplicates: at most the window of each retry sent while the store was stopped
    # (none when the store reads the FETCH and its retries in one turn: it answers them once).
    duplicates = after.dropped["duplicates"] - before.dropped["duplicates"]
    assert duplicates <= WINDOW * (resumed.fetch_retries - before.fetch_retries)
    assert store.proc.stop(signal.SIGTERM) == 0
