"""The tower forwards beacons between real sockets on loopback, as a C tower does."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import zmq

from dafka.transport.sockets import CONTROL_MESSAGE_BYTES, DATA_MESSAGE_BYTES, make_socket
from dafka.transport.tower import Tower, rewrite_beacon


@pytest.fixture
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield ctx
    ctx.term()


@pytest.fixture
def tower(context: zmq.Context[zmq.Socket[bytes]]) -> Iterator[Tower]:
    t = Tower("tcp://127.0.0.1:*", "tcp://127.0.0.1:*", context=context)
    t.start()
    yield t
    t.stop()


def _receive_beacon_while_sending(
    pub: zmq.Socket[bytes], sub: zmq.Socket[bytes], beacon: list[bytes], deadline_s: float = 5.0
) -> list[bytes]:
    """Send the beacon periodically (as nodes do) until the SUB receives it forwarded.

    Only a B message of this beacon's node counts: copies of an earlier beacon sent the
    same way may still be in flight (under load they arrive after the next one is sent).
    """
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        pub.send_multipart(beacon)
        if sub.poll(50):
            frames = sub.recv_multipart()
            if frames[0] == b"B" and frames[1:2] == beacon[1:2]:
                return frames
    raise AssertionError("no beacon forwarded before the deadline")


def test_welcome_then_beacon_with_peer_address(
    context: zmq.Context[zmq.Socket[bytes]], tower: Tower
) -> None:
    sub = make_socket(context, zmq.SUB, linger_ms=0, max_inbound_bytes=DATA_MESSAGE_BYTES)
    pub = make_socket(context, zmq.PUB, linger_ms=0, max_inbound_bytes=CONTROL_MESSAGE_BYTES)
    try:
        sub.setsockopt(zmq.SUBSCRIBE, b"W")
        sub.setsockopt(zmq.SUBSCRIBE, b"B")
        sub.connect(tower.pub_endpoint)
        assert sub.poll(5000), "no welcome message"
        assert sub.recv_multipart() == [b"W"]
        pub.connect(tower.sub_endpoint)
        frames = _receive_beacon_while_sending(pub, sub, [b"B", b"NODE1", b"", b"4242"])
        assert frames == [b"B", b"NODE1", b"tcp://127.0.0.1:4242"]
        frames = _receive_beacon_while_sending(pub, sub, [b"B", b"NODE2", b"10.1.2.3", b"7"])
        assert frames == [b"B", b"NODE2", b"tcp://10.1.2.3:7"]
    finally:
        sub.close()
        pub.close()


def test_malformed_beacons_are_counted_not_forwarded(
    context: zmq.Context[zmq.Socket[bytes]], tower: Tower
) -> None:
    sub = make_socket(context, zmq.SUB, linger_ms=0, max_inbound_bytes=DATA_MESSAGE_BYTES)
    pub = make_socket(context, zmq.PUB, linger_ms=0, max_inbound_bytes=CONTROL_MESSAGE_BYTES)
    try:
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(tower.pub_endpoint)
        assert sub.recv_multipart() == [b"W"]
        pub.connect(tower.sub_endpoint)
        good = [b"B", b"GOOD", b"127.0.0.1", b"1"]
        _receive_beacon_while_sending(pub, sub, good)
        before = tower.statistics().dropped_malformed
        for bad in ([b"B", b"X", b"h"], [b"B", b"X", b"h", b"port"], [b"Q", b"X", b"h", b"1"]):
            pub.send_multipart(bad)
        deadline = time.monotonic() + 5
        while tower.statistics().dropped_malformed < before + 3:
            assert time.monotonic() < deadline, "malformed beacons were not counted"
            time.sleep(0.01)
        pub.send_multipart(good)
        while sub.poll(200):
            assert sub.recv_multipart()[1] == b"GOOD"
    finally:
        sub.close()
        pub.close()


@pytest.mark.parametrize(
    ("frames", "peer", "expected"),
    [
        ([b"B", b"N", b"", b"5"], "10.0.0.9", [b"B", b"N", b"tcp://10.0.0.9:5"]),
        ([b"B", b"N", b"h", b"5"], None, [b"B", b"N", b"tcp://h:5"]),
        ([b"B", b"N", b"", b"5"], None, None),
        ([b"B", b"", b"h", b"5"], None, None),
        ([b"B", b"N", b"h", b"70000"], None, None),
        ([b"B", b"N", b"h", b"0"], None, None),
    ],
)
def test_rewrite_beacon(
    frames: list[bytes], peer: str | None, expected: list[bytes] | None
) -> None:
    assert rewrite_beacon(frames, peer) == expected
