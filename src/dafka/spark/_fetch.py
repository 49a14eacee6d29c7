"""Bounded reads for the executors: the RECORDs ``[start, end)`` of one partition, by FETCH.

Spark's executors each read the ranges the driver planned. A range is read by a short-lived
consumer node whose machine has the partition *assigned* (``ConsumerMachine.assign``): it
FETCHes ``[start, end)`` from the stores (and the producer, while it lives) and subscribes to
no RECORD of the topic, so an executor receives only what it asked for.

What if the range never completes: a store lost records the planner was told existed (a
HEAD from a producer that died before any store held its tail, or retention). After
``timeout`` seconds without progress the read fails with :class:`DataLossError` when
``fail_on_data_loss`` (the default, as Spark's Kafka source), or ends where it got to. A run
that skips a hole (records removed by retention) is data loss too.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterator, Sequence

from dafka.errors import DataLossError
from dafka.node import ConsumerConfig, ConsumerMachine, Deliver, FetchPolicy
from dafka.protocol import new_node_id
from dafka.transport.config import TransportConfig
from dafka.transport.runner import Identity, NodeRunner

MAX_QUEUED_RUNS = 256
"""Delivered runs waiting for the task: beyond it the runner stops reading its sockets."""

FETCH_POLICY = FetchPolicy(retry_initial=0.05, retry_max=2.0)
"""A task's first FETCH leaves before its subscriptions have reached the tower and is often
lost (ZeroMQ's slow joiner): retrying after 50 ms (doubling) rather than the clients' 0.5 s
takes ~0.5 s off every task."""


class _RangeNode:
    """One consumer node reading one assigned range; deliveries queue up for the task."""

    def __init__(self, transport: TransportConfig, topic: str, partition: str) -> None:
        node_id = new_node_id()
        self.machine = ConsumerMachine(
            node_id, ConsumerConfig(latest_settle=0.0, fetch=FETCH_POLICY)
        )
        self.runs: collections.deque[Deliver] = collections.deque()
        self.ready = threading.Condition()
        self.runner = NodeRunner(
            self.machine,
            [Identity(node_id)],
            transport,
            on_deliver=self._on_deliver,
            receive_paused=lambda: len(self.runs) >= MAX_QUEUED_RUNS,
            name=f"spark-read-{topic}",
        )

    def _on_deliver(self, run: Deliver) -> None:
        with self.ready:
            self.runs.append(run)
            self.ready.notify()

    def take(self, timeout: float) -> list[Deliver]:
        with self.ready:
            if not self.runs:
                self.ready.wait(timeout)
            out = list(self.runs)
            self.runs.clear()
            return out


def read_range(
    transport: TransportConfig,
    topic: str,
    partition: str,
    start: int,
    end: int,
    *,
    timeout: float,
    fail_on_data_loss: bool,
) -> Iterator[tuple[int, Sequence[bytes]]]:
    """Yields ``(first_sequence, contents)`` runs covering ``[start, end)`` in order."""
    if end <= start:
        return
    node = _RangeNode(transport, topic, partition)
    node.runner.start(10.0)
    try:
        node.runner.call(lambda now: node.machine.assign(topic, partition, start, end, now))
        expected = start
        last_progress = time.monotonic()
        while expected < end:
            progressed = False
            for run in node.take(0.2):
                first = run.first_sequence
                contents = run.contents
                if first > expected:
                    if fail_on_data_loss:
                        raise DataLossError(
                            f"{topic}/{partition}: records {expected}..{first - 1} are gone "
                            "(failOnDataLoss=false skips them)",
                            topic=topic,
                            partition=partition,
                            first=expected,
                            end=first,
                        )
                elif first < expected:  # cannot happen with an assigned cursor; be safe
                    contents = contents[expected - first :]
                    first = expected
                if not contents:
                    continue
                contents = contents[: end - first]
                expected = first + len(contents)
                progressed = True
                yield first, contents
            if progressed:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > timeout:
                if fail_on_data_loss:
                    raise DataLossError(
                        f"{topic}/{partition}: records {expected}..{end - 1} did not arrive "
                        f"within {timeout} s (failOnDataLoss=false skips them)",
                        topic=topic,
                        partition=partition,
                        first=expected,
                        end=end,
                    )
                return
    finally:
        node.runner.stop()


__all__ = ["read_range"]
