"""Issue 8 item 1: a node whose runner thread dies says so, everywhere.

The crash is real: a callable that raises runs in the runner thread, as any bug or storage
error in a machine would. Afterwards every client call raises one ``NodeFailedError`` that
carries the cause (never a zmq type, never a timeout), and calls already blocked wake up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from dafka.client import Consumer, PartitionProducer
from dafka.errors import DafkaError, NodeFailedError
from dafka.node import ConsumerConfig, ProducerConfig
from dafka.server import InProcessCluster
from dafka.transport.config import TransportConfig
from dafka.transport.runner import NodeNotReadyError, NodeRunner

WAKE_WITHIN = 2.0
"""A blocked call must wake up this fast after the crash (far below its own timeout)."""


class BoomError(RuntimeError):
    """The cause injected into the runner thread."""


def crash(runner: NodeRunner) -> None:
    """Make ``runner``'s thread raise, as a bug in a machine would."""

    def _raise(_now: float) -> None:
        raise BoomError("injected")

    runner.post(_raise)
    assert runner.failure.event.wait(WAKE_WITHIN), "the runner did not record its failure"


def runner_of(client: PartitionProducer | Consumer) -> NodeRunner:
    return client._runner


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[BaseException | Any]]:
    """Run ``fn`` in a thread; the list gets its exception (or result)."""
    out: list[BaseException | Any] = []

    def _run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=_run, daemon=True)
    thread.start()
    return thread, out


def assert_failed(error: BaseException | Any) -> None:
    assert isinstance(error, NodeFailedError), repr(error)
    assert isinstance(error.cause, BoomError)


def wait_gone(name: str) -> bool:
    deadline = time.monotonic() + WAKE_WITHIN
    while name in dafka_threads():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def dafka_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("dafka-") and t.is_alive()]


def test_producer_calls_raise_node_failed_after_a_crash(cluster: InProcessCluster) -> None:
    producer = PartitionProducer("failing", cluster.client_transport(), producer_id="p-fail")
    assert producer.flush(10) is True
    producer.publish(b"one")
    assert producer.flush(10)
    crash(runner_of(producer))
    assert "dafka-producer-failing" not in dafka_threads() or wait_gone("dafka-producer-failing")
    with pytest.raises(NodeFailedError) as caught:
        producer.flush(10)
    assert isinstance(caught.value.cause, BoomError)
    for call in (
        lambda: producer.publish(b"two"),
        lambda: producer.flush(1),
        producer.statistics,
        producer.transport_statistics,
        producer.close,
        producer.close,  # every later call, not just the first
    ):
        with pytest.raises(NodeFailedError):
            call()
    assert "dafka-producer-failing" not in dafka_threads()


def test_a_blocked_flush_wakes_up_and_raises(cluster: InProcessCluster) -> None:
    for store in list(cluster.stores):  # nobody ACKs: flush blocks
        store.stop()
    cluster.stores.clear()
    producer = PartitionProducer("blocked", cluster.client_transport())
    producer.publish(b"never acked")
    thread, out = in_thread(lambda: producer.flush(60))
    time.sleep(0.2)  # let it block (what is asserted is the wake-up below, not this)
    crashed_at = time.monotonic()
    crash(runner_of(producer))
    thread.join(WAKE_WITHIN)
    assert not thread.is_alive(), "flush still blocked after the crash"
    assert time.monotonic() - crashed_at < WAKE_WITHIN
    assert_failed(out[0])
    with pytest.raises(NodeFailedError):
        producer.close()


def test_a_publish_blocked_on_backpressure_wakes_on_crash_and_on_close(
    cluster: InProcessCluster,
) -> None:
    for store in list(cluster.stores):
        store.stop()
    cluster.stores.clear()
    config = ProducerConfig(max_unacked_records=5)
    crashing = PartitionProducer("bp", cluster.client_transport(), config)
    closing = PartitionProducer("bp", cluster.client_transport(), config)
    for producer in (crashing, closing):
        for i in range(5):
            producer.publish(b"%d" % i)
    blocked_crash, out_crash = in_thread(lambda: crashing.publish(b"sixth"))
    blocked_close, out_close = in_thread(lambda: closing.publish(b"sixth"))
    time.sleep(0.2)
    assert blocked_crash.is_alive(), "publish should block"
    assert blocked_close.is_alive(), "publish should block"
    crash(runner_of(crashing))
    closing.close(flush_timeout=0.1)
    blocked_crash.join(WAKE_WITHIN)
    blocked_close.join(WAKE_WITHIN)
    assert not blocked_crash.is_alive()
    assert not blocked_close.is_alive()
    assert_failed(out_crash[0])
    assert isinstance(out_close[0], DafkaError)
    assert "closed" in str(out_close[0])
    with pytest.raises(NodeFailedError):
        crashing.close()


def test_application_mistakes_are_type_errors_in_the_callers_thread(
    cluster: InProcessCluster,
) -> None:
    with PartitionProducer("types", cluster.client_transport()) as producer:
        for wrong in ("a str", None, 42):
            with pytest.raises(TypeError):
                producer.publish(wrong)  # type: ignore[arg-type]
        producer.publish(bytearray(b"bytes-like is fine"))
        producer.publish(memoryview(b"so is this"))
        assert producer.flush(10), "the node must still be healthy"
        assert producer.next_sequence == 2


def test_consumer_poll_and_iteration_raise_node_failed(cluster: InProcessCluster) -> None:
    consumer = Consumer("c-fail", transport=cluster.client_transport(), config=ConsumerConfig())
    thread, out = in_thread(lambda: consumer.poll(timeout=60))
    time.sleep(0.2)
    crash(runner_of(consumer))
    thread.join(WAKE_WITHIN)
    assert not thread.is_alive(), "poll still blocked after the crash"
    assert_failed(out[0])
    with pytest.raises(NodeFailedError):
        next(iter(consumer))
    for call in (
        lambda: consumer.poll(0),
        consumer.positions,
        consumer.statistics,
        consumer.transport_statistics,
        lambda: consumer.seek("c-fail", "p", 0),
        consumer.close,
        consumer.close,
    ):
        with pytest.raises(NodeFailedError):
            call()


def test_a_failed_init_leaves_no_thread(cluster: InProcessCluster) -> None:
    before = set(dafka_threads())
    nowhere = TransportConfig(
        tower_sub_addresses=("tcp://127.0.0.1:9",),
        tower_pub_addresses=("tcp://127.0.0.1:9",),
        beacon_interval=0.1,
        beacon_timeout=0.4,
    )
    with pytest.raises(NodeNotReadyError):
        PartitionProducer("nowhere", nowhere, ready_timeout=0.3)
    with pytest.raises(NodeNotReadyError):
        Consumer("nowhere", transport=nowhere, ready_timeout=0.3)
    with pytest.raises(DafkaError):  # subscribe refuses the topic after the runner started
        Consumer("x" * 1000, transport=cluster.client_transport())
    assert set(dafka_threads()) <= before
