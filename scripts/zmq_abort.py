"""Reproduce libzmq 4.3.5's abort ``Assertion failed: !_io_error (src/stream_engine_base.cpp:310)``.

    .venv/bin/python scripts/zmq_abort.py lag [--rounds 5] [--heartbeats]
    .venv/bin/python scripts/zmq_abort.py pings [--rounds 5]
    .venv/bin/python scripts/zmq_abort.py store [--rounds 5]

libzmq stops reading a connection while the socket's queue from that peer is full (the
reader lags); an error on the connection then (the peer closed or reset it) sets the
engine's ``_io_error`` and leaves the engine alive until the reader catches up. Anything that
writes on the connection meanwhile aborts the process (zeromq/libzmq#4841, unfixed in 4.3.5):

* ``lag``: a reader (``tests/integration/hardening/lagging_reader.py``: a SUB from dafka's
  socket factory) lags behind a PUB that fills it and closes. With ``--heartbeats`` (the
  ZMTP heartbeats dafka's sockets had until 2026-11) its heartbeat timer's PING is that write:
  aborted in every round. Without: survives.
* ``pings``: a stranger speaking raw ZMTP fills the reader's queue with PING commands among its
  messages, then resets the connection; when the reader catches up, libzmq answers a PING
  still in its read buffer - the same write, whatever the reader's own options.
* ``store``: that stranger against a real ``dafka store``: it beacons through the tower, the
  store's SUBs connect to it, it floods them with PINGs among garbage frames until the store
  stops reading, then resets.

Prints each round's outcome and how many ended in the abort; exit 0 either way (it measures).
"""

from __future__ import annotations

import argparse
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import zmq
from tests.integration.cluster.cluster_procs import Processes, StoreProc, TowerProc
from tests.integration.hardening.stranger import GREETING

from dafka.transport.sockets import CONTROL_MESSAGE_BYTES, bound_endpoint, make_socket

READER = Path(__file__).parent.parent / "tests/integration/hardening/lagging_reader.py"
ABORT = "Assertion failed: !_io_error"


def _command(body: bytes) -> bytes:
    return bytes([0x04, len(body)]) + body


_READY_PUB = _command(b"\x05READY\x0bSocket-Type" + struct.pack(">I", 3) + b"PUB")
_PING = _command(b"\x04PING" + struct.pack(">H", 0))
_FLOOD = (bytes([0, 10]) + b"M" * 10 + bytes([0, 10]) + b"F" * 10) * 4 + _PING
"""Frames a store's SUBs pass up to Python (``M``: RECORDs, ``F``: FETCHes; undecodable, so
counted and dropped), a PING among every 8."""
_BEACONS = (
    b"".join(
        bytes([0x01, len(frame)]) + frame for frame in (b"B", b"stranger-beacon", b"127.0.0.1")
    )
    + bytes([0, 4])
    + b"5999"
) * 2 + _PING
"""Beacons a tower decodes and forwards in Python, a PING among every 2."""


def _lag_round(heartbeats: bool) -> tuple[bool, str]:
    """A reader lags behind a PUB that fills it, then closes: did the reader abort?"""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    pub = make_socket(context, zmq.XPUB, linger_ms=0, hwm=1000, max_inbound_bytes=4096)
    pub.setsockopt(zmq.XPUB_NODROP, 1)
    pub.setsockopt(zmq.SNDTIMEO, 500)
    pub.bind("tcp://127.0.0.1:*")
    endpoint = bound_endpoint(pub)
    argv = [sys.executable, str(READER), endpoint, "100", "6", *(["heartbeats"] * heartbeats)]
    reader = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert reader.stdout is not None
    assert reader.stdin is not None
    reader.stdout.readline()
    pub.recv()  # its subscription: connected
    try:
        while True:
            pub.send(b"r" * 100)
    except zmq.Again:
        pass  # every buffer on the way is full: the reader stopped reading us
    pub.close()
    context.term()
    started = time.monotonic()
    reader.stdin.write("gone\n")
    reader.stdin.flush()
    code = reader.wait(60)
    return code == -6, f"exit {code} {time.monotonic() - started:.1f} s after the peer closed"


def _stranger(conn: socket.socket, flood_for: float, flood: bytes = _FLOOD) -> int:
    """Handshake as a PUB on an accepted connection, flood PINGs among messages until the
    peer has stopped reading for 0.5 s (or ``flood_for`` passed), then reset; bytes sent."""
    conn.sendall(GREETING)
    greeting = b""
    while len(greeting) < 64:
        chunk = conn.recv(64 - len(greeting))
        if not chunk:
            return 0
        greeting += chunk
    conn.sendall(_READY_PUB)
    conn.settimeout(0.5)
    flood, sent = flood * (8192 // len(flood) + 1), 0
    deadline = time.monotonic() + flood_for
    try:
        while time.monotonic() < deadline:
            sent += conn.send(flood)
    except TimeoutError:
        pass  # its kernel buffer and ours are full: libzmq stopped reading
    except OSError:
        return sent
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()  # a reset
    return sent


def _pings_round() -> tuple[bool, str]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        endpoint = f"tcp://127.0.0.1:{server.getsockname()[1]}"
        argv = [sys.executable, str(READER), endpoint, "100", "1"]
        reader = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert reader.stdout is not None
        assert reader.stdin is not None
        reader.stdout.readline()
        conn, _ = server.accept()
        sent = _stranger(conn, 10.0)
    reader.stdin.write("gone\n")
    reader.stdin.flush()
    code = reader.wait(60)
    return code == -6, f"exit {code} ({sent} bytes sent before the reset)"


def _store_round(tower: TowerProc, store: StoreProc) -> tuple[bool, str]:
    """A stranger beacons its listening socket, the store connects, the stranger floods and
    resets each connection: did the store die within 5 s?"""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    beacon = make_socket(context, zmq.PUB, linger_ms=0, max_inbound_bytes=CONTROL_MESSAGE_BYTES)
    beacon.connect(tower.sub_endpoint)
    sent: list[int] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        server.settimeout(0.2)
        port = str(server.getsockname()[1]).encode()
        node_id = b"stranger-" + uuid.uuid4().hex[:8].encode()
        threads: list[threading.Thread] = []
        deadline = time.monotonic() + 20
        # Beacon all along: a peer the store stops hearing of is disconnected (and the
        # connection torn down cleanly) before the reset.
        while time.monotonic() < deadline and (
            len(threads) < 2 or any(thread.is_alive() for thread in threads)
        ):
            beacon.send_multipart([b"B", node_id, b"127.0.0.1", port])
            if len(threads) == 2:  # writer and reader SUBs connected: flooding
                time.sleep(0.1)
                continue
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=lambda c=conn: sent.append(_stranger(c, 2.0)))
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
    beacon.close()
    context.term()
    deadline = time.monotonic() + 5
    while store.proc.running() and time.monotonic() < deadline:
        time.sleep(0.1)
    code = store.proc.popen.poll()
    aborted = code is not None and ABORT in store.proc.stderr()
    return aborted, f"{len(sent)} connections flooded ({sum(sent)} bytes), store exit {code}"


def _tower_round(tower: TowerProc) -> tuple[bool, str]:
    """A stranger connects to the tower's beacon input as a PUB, floods beacons with PINGs
    among them for 2 s and resets: did the tower die within 5 s?"""
    host, port = tower.sub_endpoint.removeprefix("tcp://").rsplit(":", 1)
    with socket.create_connection((host, int(port))) as conn:
        sent = _stranger(conn, 2.0, _BEACONS)
    deadline = time.monotonic() + 5
    while tower.proc.running() and time.monotonic() < deadline:
        time.sleep(0.1)
    code = tower.proc.popen.poll()
    aborted = code is not None and ABORT in tower.proc.stderr()
    return aborted, f"{sent} bytes sent, tower exit {code}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["lag", "pings", "store", "tower"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--heartbeats", action="store_true", help="lag: the old options")
    args = parser.parse_args()
    aborted = 0
    with tempfile.TemporaryDirectory(prefix="dafka-zmq-abort-") as tmp:
        procs = Processes(Path(tmp))
        try:
            tower = procs.tower() if args.mode in ("store", "tower") else None
            store = None
            for round_ in range(args.rounds):
                if args.mode == "lag":
                    died, what = _lag_round(args.heartbeats)
                elif args.mode == "pings":
                    died, what = _pings_round()
                elif args.mode == "tower":
                    assert tower is not None
                    if not tower.proc.running():
                        tower = procs.tower()
                    died, what = _tower_round(tower)
                else:
                    assert tower is not None
                    if store is None or not store.proc.running():
                        store = procs.store(Path(tmp) / "store", [tower])
                    died, what = _store_round(tower, store)
                aborted += died
                print(f"round {round_ + 1}: {'ABORTED' if died else 'survived'}: {what}")
        finally:
            procs.close()
    print(f"{args.mode}: {aborted} of {args.rounds} rounds aborted in libzmq")
    return 0


if __name__ == "__main__":
    sys.exit(main())
