"""The runner's receive path on real sockets: RECORD runs, malformed messages in between.

A raw XPUB plays a producer: it beacons through a real tower, waits until the consumer's
SUB subscribed (the XPUB shows the notice), then sends valid RECORDs, HEADs and malformed
messages (a RECORD without its content frame, one with an extra frame). The runner reads
runs of RECORDs without decoding each one; whatever breaks a run must be handled as before:
the consumer gets every valid record once, in order, and the bad ones are counted.
"""

from __future__ import annotations

import zmq

from dafka.client import Consumer
from dafka.node import ConsumerConfig
from dafka.protocol import Head, Record, encode
from dafka.records import Record as ClientRecord
from dafka.transport.tower import Tower
from tests.integration.transport.transport_helpers import loopback, wait_for

TOPIC = "runs"
PRODUCER = "50000000000000000000000000000005"


def record(sequence: int) -> list[bytes]:
    return encode(Record(TOPIC, PRODUCER, sequence, f"content-{sequence}".encode()))


def send(pub: zmq.Socket[bytes], frames: list[bytes]) -> None:
    pub.send_multipart(frames)


def test_runs_survive_heads_and_malformed_messages(tower: Tower) -> None:
    transport = loopback(tower)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    pub = ctx.socket(zmq.XPUB)
    beacon = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    beacon.setsockopt(zmq.LINGER, 0)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    beacon.connect(tower.sub_endpoint)
    consumer = Consumer(TOPIC, transport=transport, config=ConsumerConfig(offset_reset="earliest"))
    try:
        subscribed = False

        def consumer_subscribed() -> bool:
            nonlocal subscribed
            beacon.send_multipart([b"B", PRODUCER.encode(), b"127.0.0.1", str(port).encode()])
            while pub.poll(0):
                if pub.recv() == b"\x01M" + TOPIC.encode():
                    subscribed = True
            return subscribed

        wait_for(consumer_subscribed, "the consumer to subscribe to our RECORDs")
        good = record(3)
        for sequence in range(3):
            send(pub, record(sequence))
        send(pub, [good[0]])  # a RECORD without its content: undecodable, ends the run
        send(pub, record(3))
        send(pub, encode(Head(TOPIC, PRODUCER, 4)))  # ends the run, then a new one starts
        # three frames where no run goes on: undecodable (one that continues a run is taken
        # as its first two frames: test_receive_runs_equal_messages.py)
        send(pub, [*record(4), b"extra"])
        for sequence in range(4, 10):
            send(pub, record(sequence))
        send(pub, record(7))  # a duplicate inside what would be a run: dropped

        got: list[ClientRecord] = []

        def all_received() -> bool:
            got.extend(consumer.poll(timeout=0.05))
            return len(got) >= 10

        wait_for(all_received, "the records")
        assert [(r.offset, r.value) for r in got] == [
            (s, f"content-{s}".encode()) for s in range(10)
        ]
        wait_for(lambda: consumer.statistics().dropped_duplicates == 1, "the duplicate")
        stats = consumer.transport_statistics()
        assert stats.undecodable == 2
        assert consumer.statistics().delivered == 10
    finally:
        consumer.close()
        pub.close()
        beacon.close()
