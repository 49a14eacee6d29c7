"""Issue 19: a stranger cannot exhaust a node (resource limits, secured or not).

A tower, a store and a producer run as processes, a consumer in this process. A stranger
(``stranger.py``: raw ZMTP, no libzmq) sends a 1 MiB subscription to every listening socket
(the tower's beacon output, every data PUB it learns from the beacons: the store's writer and
reader, the producer's, the consumer's) and a 1 MiB beacon to the tower's beacon input. Before
``ZMQ_MAXMSGSIZE`` the tower died of it (segfault inside libzmq, nothing logged) and the store
kept ~50 MB of it for good. Now every node hangs up on the stranger, stays up with its memory
where it was, and the producer's records all reach the consumer.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import zmq

from dafka.client import Consumer
from dafka.node import ConsumerConfig
from tests.integration.cluster.cluster_client import payload, transport
from tests.integration.cluster.cluster_procs import DEADLINE, Processes, wait_until
from tests.integration.hardening import stranger

TOPIC = "limits"
RECORDS = 2_000
MIB = 1024 * 1024


def _data_endpoints(tower_pub: str, at_least: int) -> set[str]:
    """The data endpoints beaconing through the tower (read as any node would)."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sub = context.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"B")
    sub.connect(tower_pub)
    found: set[str] = set()
    try:

        def enough() -> set[str] | None:
            while sub.poll(100):
                frames = sub.recv_multipart()
                if len(frames) >= 3:
                    found.add(frames[2].decode())
            return found if len(found) >= at_least else None

        return wait_until(enough, f"{at_least} beaconing data endpoints")
    finally:
        sub.close()
        context.term()


@pytest.mark.timeout(180)
def test_a_1mib_subscription_on_every_listening_socket(procs: Processes, tmp_path: Path) -> None:
    tower = procs.tower()
    store = procs.store(tmp_path / "store", [tower])
    half = str(RECORDS // 2)
    producer = procs.client(
        "producer", "produce", [tower], TOPIC, "--records", str(RECORDS), "--pause-at", half
    )
    config = ConsumerConfig(offset_reset="earliest")
    with Consumer(
        TOPIC, transport=transport([tower.spec], 0.2), config=config, ready_timeout=DEADLINE
    ) as consumer:
        pid = producer.wait_event("ready")["id"]
        producer.wait_event("paused")
        # store writer + reader, producer, consumer: 4 data PUBs
        endpoints = _data_endpoints(tower.pub_endpoint, at_least=4)
        nodes = {"tower": tower.proc, "store": store.proc, "producer": producer}
        before = {name: proc.rss_kb() for name, proc in nodes.items()}
        hung_up = {tower.pub_endpoint: stranger.subscribe(tower.pub_endpoint, b"B" * MIB)}
        hung_up[tower.sub_endpoint] = stranger.publish(
            tower.sub_endpoint, [b"B", b"x" * MIB, b"127.0.0.1", b"5000"]
        )
        for endpoint in sorted(endpoints):
            hung_up[endpoint] = stranger.subscribe(endpoint, b"M" + b"t" * MIB)
        for name, proc in nodes.items():
            assert proc.running(), f"{name} died of a 1 MiB frame:\n{proc.tail(40)}"
        after = {name: proc.rss_kb() for name, proc in nodes.items()}
        print(f"hung up: {hung_up}\nRSS KiB before {before} after {after}")
        assert all(hung_up.values()), hung_up
        for name in nodes:
            assert after[name] <= before[name] * 1.2, (name, before[name], after[name])

        producer.send_line("go")
        received: list[int] = []
        deadline = time.monotonic() + DEADLINE
        while len(received) < RECORDS and time.monotonic() < deadline:
            for record in consumer.poll(timeout=0.5):
                if record.partition == pid:
                    assert record.value == payload(record.offset)
                    received.append(record.offset)
        assert producer.wait_exit(DEADLINE) == 0, procs.describe()
        assert received == list(range(RECORDS)), len(received)
    for name, proc in nodes.items():
        assert proc.running() or name == "producer", proc.tail(40)
