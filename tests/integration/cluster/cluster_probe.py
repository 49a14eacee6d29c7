"""Looking into running stores from the outside, over the wire, one store at a time.

A store process cannot be asked "what do you hold?" through a client (a consumer sees the
cluster, not one store) and its data directory is locked while it runs. The protocol itself
can: a GET-HEADS answered by one store's *reader* (our SUB connected to that reader's port
only) tells its durable heads, and a SUB on a store's *writer* port sees every ACK it sends.
The tests use both to wait for conditions on a given store instead of sleeping.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import zmq

from dafka.protocol import Ack, DirectHead, GetHeads, HeadsEnd, decode_data, encode
from dafka.storage import Storage
from dafka.transport.sockets import (
    CONTROL_MESSAGE_BYTES,
    DATA_MESSAGE_BYTES,
    bound_port,
    make_socket,
)
from tests.integration.cluster.cluster_client import payload
from tests.integration.cluster.cluster_procs import StoreProc, TowerProc

Key = tuple[str, str]


class HeadsProbe:
    """A minimal node that beacons to the towers and asks single stores for their heads."""

    def __init__(self, tower_sub_endpoints: list[str]) -> None:
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.node_id = "probe-" + uuid.uuid4().hex[:12]
        self._pub = make_socket(
            self._context, zmq.PUB, linger_ms=0, max_inbound_bytes=CONTROL_MESSAGE_BYTES
        )
        self._pub.bind("tcp://127.0.0.1:*")
        self._beacon = make_socket(
            self._context, zmq.PUB, linger_ms=0, max_inbound_bytes=CONTROL_MESSAGE_BYTES
        )
        for endpoint in tower_sub_endpoints:
            self._beacon.connect(endpoint)

    def heads(
        self,
        reader_port: int,
        topic: str,
        expected: dict[str, int],
        timeout: float = 60.0,
        *,
        until_end: bool = False,
    ) -> dict[str, int]:
        """Ask the reader on ``reader_port`` until its heads of ``topic`` include ``expected``
        (and, ``until_end``, until it said "that is all": :attr:`last_end`).

        Returns the last heads it told (the caller asserts on them); GET-HEADS is repeated
        because the store connects to us only after our beacon went through a tower.
        """
        self.last_end: HeadsEnd | None = None
        sub = make_socket(self._context, zmq.SUB, linger_ms=0, max_inbound_bytes=DATA_MESSAGE_BYTES)
        sub.setsockopt(zmq.SUBSCRIBE, b"E" + self.node_id.encode())
        sub.setsockopt(zmq.SUBSCRIBE, b"A" + self.node_id.encode())  # HEADS-END
        sub.connect(f"tcp://127.0.0.1:{reader_port}")
        beacon = [b"B", self.node_id.encode(), b"127.0.0.1", str(bound_port(self._pub)).encode()]
        ask = encode(GetHeads(topic, self.node_id))
        heads: dict[str, int] = {}
        deadline = time.monotonic() + timeout
        try:
            next_ask = 0.0
            while time.monotonic() < deadline and not (
                _reached(heads, expected) and (self.last_end is not None or not until_end)
            ):
                now = time.monotonic()
                if now >= next_ask:  # paced: a beacon and a question 4 times a second
                    self._beacon.send_multipart(beacon)
                    self._pub.send_multipart(ask)
                    next_ask = now + 0.25
                if sub.poll(max(1, int((next_ask - now) * 1000))):
                    while True:
                        try:
                            message = decode_data(sub.recv_multipart(zmq.NOBLOCK))
                        except zmq.Again:
                            break
                        if isinstance(message, HeadsEnd) and message.topic == topic:
                            self.last_end = message
                        if isinstance(message, DirectHead) and message.topic == topic:
                            heads[message.producer] = max(
                                heads.get(message.producer, -1), message.sequence
                            )
        finally:
            sub.close()
        return heads

    def close(self) -> None:
        self._pub.close()
        self._beacon.close()
        self._context.term()


def _reached(heads: dict[str, int], expected: dict[str, int]) -> bool:
    return all(heads.get(partition) == head for partition, head in expected.items())


class AckWatch:
    """Every ACK one store's writer sends, seen on a SUB connected to its writer port."""

    def __init__(self, writer_port: int) -> None:
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._sub = make_socket(
            self._context, zmq.SUB, linger_ms=0, max_inbound_bytes=DATA_MESSAGE_BYTES
        )
        self._sub.setsockopt(zmq.SUBSCRIBE, b"K")
        self._sub.connect(f"tcp://127.0.0.1:{writer_port}")
        self.highest: dict[Key, int] = {}

    def pump(self) -> dict[Key, int]:
        """Take the ACKs received so far; the highest ACKed sequence per partition."""
        while True:
            try:
                message = decode_data(self._sub.recv_multipart(zmq.NOBLOCK))
            except zmq.Again:
                return self.highest
            if isinstance(message, Ack):
                key = (message.topic, message.producer)
                self.highest[key] = max(self.highest.get(key, -1), message.sequence)

    def close(self) -> None:
        self._sub.close()
        self._context.term()


def read_log(data_dir: Path) -> dict[Key, list[tuple[int, bytes]]]:
    """Every record of a stopped store's data directory: (topic, partition) -> records."""
    with Storage.open(data_dir / "log") as storage:
        out: dict[Key, list[tuple[int, bytes]]] = {}
        for topic in storage.topics():
            for partition in storage.partitions(topic):
                head = storage.head(topic, partition)
                count = -1 if head is None else head + 1
                out[(topic, partition)] = storage.read(topic, partition, 0, count)
        return out


def check_partition(records: list[tuple[int, bytes]], count: int, size: int = 100) -> None:
    """Assert a partition holds exactly sequences 0..count-1 with their payloads."""
    assert len(records) == count, f"{len(records)} records, expected {count}"
    for expected, (sequence, content) in enumerate(records):
        assert sequence == expected, f"sequence {sequence} at position {expected}"
        assert content == payload(sequence, size), f"wrong content at {sequence}"


def wait_heads(
    tower: TowerProc,
    stores: Sequence[StoreProc],
    topic: str,
    expected: dict[str, int],
    describe: Callable[[], str] | None = None,
) -> None:
    """Wait until each of ``stores`` holds the heads ``expected`` of ``topic`` (asked of each
    store's reader alone); ``describe``: what a failed wait says (the processes' state)."""
    probe = HeadsProbe([tower.sub_endpoint])
    try:
        for store in stores:
            assert probe.heads(store.reader_port, topic, expected) == expected, (
                describe() if describe is not None else ""
            )
    finally:
        probe.close()


def stopped_logs(stores: Sequence[StoreProc]) -> dict[Key, list[tuple[int, bytes]]]:
    """Stop each store cleanly (SIGTERM) and read its data directory: the log they all hold
    (asserted the same in every store)."""
    for store in stores:
        assert store.proc.stop(signal.SIGTERM) == 0, store.proc.tail()
    logs = [read_log(store.data_dir) for store in stores]
    for log in logs[1:]:
        assert log == logs[0], "the two stores' logs differ"
    return logs[0]


__all__ = ["AckWatch", "HeadsProbe", "check_partition", "read_log", "stopped_logs", "wait_heads"]
