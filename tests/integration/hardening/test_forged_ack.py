"""Issue 18, path 2: a forged or stray ACK does not make a producer drop unstored records.

A tower runs with no store at all, so nothing the producer sends is stored. A peer made of
real sockets joins like a node (it beacons through the tower, so the producer's runner
connects to it) and, once the producer subscribed to its ACKs, sends ACKs for records the
producer did send. Before, any ACK released records: every future resolved and ``flush()``
returned 0 for messages no store held. Now an ACK counts only from a store that introduced
itself to the producer (STORE-HELLO naming the sender), and only up to the last sequence sent;
the refused ACKs are counted in the producer's metrics and logged.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import zmq

from dafka import Producer
from dafka.protocol import Ack, StoreHello, encode
from dafka.server import InProcessCluster, free_port_pair
from dafka.transport.sockets import (
    CONTROL_MESSAGE_BYTES,
    bound_port,
    make_socket,
)

TOPIC = "forged"
MESSAGES = 100
DEADLINE = 30.0
FAST: dict[str, Any] = {
    "beacon_interval": 0.2,
    "beacon_timeout": 0.8,
    "advertised_host": "127.0.0.1",
    "bind_host": "127.0.0.1",
    "batching": False,
}


class Forger:
    """A peer on real sockets: it beacons through the tower (nodes connect to its XPUB) and
    sends what it is told to whoever subscribed to it."""

    def __init__(self, tower_sub: str) -> None:
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.node_id = "FORGER" + uuid.uuid4().hex[:26].upper()
        self._pub = make_socket(
            self._context, zmq.XPUB, linger_ms=0, max_inbound_bytes=CONTROL_MESSAGE_BYTES
        )
        self._pub.setsockopt(zmq.XPUB_VERBOSE, 1)
        self._pub.bind("tcp://127.0.0.1:*")
        self._beacon_pub = make_socket(
            self._context, zmq.PUB, linger_ms=0, max_inbound_bytes=CONTROL_MESSAGE_BYTES
        )
        self._beacon_pub.connect(tower_sub)
        self._beacon = [
            b"B",
            self.node_id.encode(),
            b"127.0.0.1",
            str(bound_port(self._pub)).encode(),
        ]
        self.subscribed: set[bytes] = set()
        self.sent = 0

    def pump(self, want: bytes, messages: list[object]) -> None:
        """One round: beacon, read subscriptions, and once ``want`` is subscribed send
        ``messages`` (encodable protocol messages)."""
        self._beacon_pub.send_multipart(self._beacon)
        while self._pub.poll(0):
            notice = self._pub.recv()
            if notice[:1] == b"\x01":
                self.subscribed.add(notice[1:])
        if want in self.subscribed:
            for message in messages:
                self._pub.send_multipart(encode(message))  # type: ignore[arg-type]
                self.sent += 1

    def close(self) -> None:
        self._context.destroy(0)


@pytest.fixture
def towers(tmp_path: object) -> Iterator[tuple[str, str]]:
    """A tower and no store: ``(towers for a Producer, the tower's SUB endpoint)``."""
    port = free_port_pair()
    with InProcessCluster(f"{tmp_path}/data", stores=0, tower_port=port) as cluster:
        yield f"127.0.0.1:{port}", cluster.tower.sub_endpoint


def forge_until_refused(producer: Producer, forger: Forger, messages: list[object]) -> None:
    """Send ``messages`` from the forger until the producer took (old code: nothing in
    flight) or refused (counted) a forged ACK."""
    want = b"K" + producer.partitions[0].encode()
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        forger.pump(want, messages)
        dropped = producer.metrics().dropped
        if len(producer) == 0 or dropped.get("acks_from_unknown", 0) + dropped.get(
            "acks_beyond_sent", 0
        ):
            return
        time.sleep(0.05)
    raise AssertionError(f"no forged ACK reached the producer ({forger.sent} sent)")


def test_an_ack_from_a_peer_that_is_no_store_releases_nothing(
    towers: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    spec, tower_sub = towers
    forger = Forger(tower_sub)
    caplog.set_level(logging.WARNING, logger="dafka.transport.drops")
    try:
        with Producer(TOPIC, towers=spec, **FAST) as producer:
            futures = [producer.send(b"m%d" % i) for i in range(MESSAGES)]
            pid = producer.partitions[0]
            forge_until_refused(producer, forger, [Ack(pid, TOPIC, MESSAGES - 1)])
            held = len(producer)
            assert held == MESSAGES, (
                f"{MESSAGES - held} of {MESSAGES} messages marked stored by a forged ACK, "
                "with no store running"
            )
            assert not any(f.done() for f in futures)
            metrics = producer.metrics()
            assert metrics.dropped["acks_from_unknown"] >= 1, metrics.dropped
            assert metrics.stores_known == 0
            producer.close(timeout=0)  # nothing is stored: every future fails
        assert all(f.exception() is not None for f in futures)
    finally:
        forger.close()
    assert any(
        "not a store that greeted this producer" in r.getMessage() for r in caplog.records
    ), [r.getMessage() for r in caplog.records]


def test_an_ack_beyond_what_was_sent_releases_nothing(towers: tuple[str, str]) -> None:
    """Even from a peer that introduced itself as a store (authentication is another
    matter): no store can hold what this producer never sent."""
    spec, tower_sub = towers
    forger = Forger(tower_sub)
    try:
        with Producer(TOPIC, towers=spec, **FAST) as producer:
            futures = [producer.send(b"m%d" % i) for i in range(MESSAGES)]
            pid = producer.partitions[0]
            forged = [StoreHello(pid, forger.node_id), Ack(pid, TOPIC, 1 << 40)]
            forge_until_refused(producer, forger, forged)
            held = len(producer)
            assert held == MESSAGES, (
                f"{MESSAGES - held} of {MESSAGES} messages marked stored by an ACK of a "
                "sequence never sent"
            )
            assert not any(f.done() for f in futures)
            metrics = producer.metrics()
            assert metrics.dropped["acks_beyond_sent"] >= 1, metrics.dropped
            assert metrics.stores_known == 1
            producer.close(timeout=0)
    finally:
        forger.close()
