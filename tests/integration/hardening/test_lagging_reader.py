"""A node lagging behind a peer that leaves must not die inside libzmq (processes).

A SUB made by dafka's socket factory, in its own process, lags behind a PUB: its queue from
that peer is full, so libzmq stopped reading the connection. The peer then closes. With ZMTP
heartbeats (``ZMQ_HEARTBEAT_IVL``, on every socket until 2026-11) the reader's heartbeat
timer wrote a PING, the peer's kernel answered with a reset, and the next PING aborted the
process in libzmq 4.3.5 (``Assertion failed: !_io_error (src/stream_engine_base.cpp:310)``,
exit -6): how a store lagging behind a producer that exited died in CI. The sockets now
leave dead connections to the kernel (keepalive, ``TCP_MAXRT``), which runs no such timer.
"""

from __future__ import annotations

import sys
from pathlib import Path

import zmq

from dafka.transport.sockets import CONTROL_MESSAGE_BYTES, bound_endpoint, make_socket
from tests.integration.cluster.cluster_procs import DEADLINE, Processes

READER = Path(__file__).with_name("lagging_reader.py")
READER_HWM = 100
LAG = 6.0
"""Seconds the reader lags after its peer left: the old heartbeat (a PING every 2 s) aborted
it within two PINGs (~3 s in every run of scripts/zmq_abort.py), and 6 s covers that on a
loaded machine."""
FULL_AFTER_MS = 500
"""A send that waited this long found every buffer on the way full: the reader's queue (it
reads nothing), both kernels' socket buffers and our own queue."""


def test_a_reader_lagging_behind_a_peer_that_leaves_survives(procs: Processes) -> None:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    pub = make_socket(
        context, zmq.XPUB, linger_ms=0, hwm=1000, max_inbound_bytes=CONTROL_MESSAGE_BYTES
    )
    try:
        pub.setsockopt(zmq.XPUB_NODROP, 1)  # a full queue blocks the send instead of dropping
        pub.setsockopt(zmq.SNDTIMEO, FULL_AFTER_MS)
        pub.bind("tcp://127.0.0.1:*")
        reader = procs.spawn(
            "reader",
            [sys.executable, str(READER), bound_endpoint(pub), str(READER_HWM), str(LAG)],
            stdin=True,
        )
        reader.wait_event("connected")
        assert pub.poll(int(DEADLINE * 1000)), "the reader never subscribed"
        assert pub.recv() == b"\x01"
        sent = 0
        while True:  # until the reader has stopped reading from us: every buffer is full
            try:
                pub.send(b"r" * 100)
            except zmq.Again:
                break
            sent += 1
        assert sent > READER_HWM
    finally:
        pub.close()
        context.term()
    reader.send_line("gone")
    read = reader.wait_event("read", timeout=DEADLINE + LAG)
    code = reader.wait_exit()
    assert "Assertion failed" not in reader.stderr()
    assert code == 0
    assert read["count"] >= READER_HWM  # it read what it held once it caught up
