"""Reproduce libzmq 4.3.5's abort ``Assertion failed: !_io_error (src/stream_engine_base.cpp:310)``.

    PYTHONPATH=. .venv/bin/python scripts/zmq_abort.py lag [--rounds 5] [--heartbeats]
    PYTHONPATH=. .venv/bin/python scripts/zmq_abort.py pings|store|tower [--rounds 5]

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
  store's SUBs connect to it, it floods them with PINGs among garbage frames for 2 s, then
  resets (``tests/integration/hardening/ping_stranger.py``).
* ``tower``: that stranger connects to a real ``dafka tower``'s beacon input and floods it
  with beacons (forwarded in Python, slower than they come) and PINGs, then resets.

With a libzmq patched by ``scripts/libzmq-4.3.5-out-event.patch`` every mode survives
(docs/nodes.md, "Limits against strangers").

Prints each round's outcome and how many ended in the abort; exit 0 either way (it measures).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zmq
from tests.integration.cluster.cluster_procs import Processes, StoreProc, TowerProc
from tests.integration.hardening.ping_stranger import (
    STORE_FLOOD,
    attack_store,
    attack_tower,
    flood_and_reset,
)

from dafka.transport.sockets import bound_endpoint, make_socket

READER = Path(__file__).parent.parent / "tests/integration/hardening/lagging_reader.py"
ABORT = "Assertion failed: !_io_error"


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
        sent = flood_and_reset(conn, 10.0, STORE_FLOOD)
    reader.stdin.write("gone\n")
    reader.stdin.flush()
    code = reader.wait(60)
    return code == -6, f"exit {code} ({sent} bytes sent before the reset)"


def _store_round(tower: TowerProc, store: StoreProc) -> tuple[bool, str]:
    """A stranger beacons its listening socket, the store connects, the stranger floods and
    resets each connection: did the store die within 5 s?"""
    sent = attack_store(tower.sub_endpoint)
    deadline = time.monotonic() + 5
    while store.proc.running() and time.monotonic() < deadline:
        time.sleep(0.1)
    code = store.proc.popen.poll()
    aborted = code is not None and ABORT in store.proc.stderr()
    return aborted, f"{sent} bytes sent to its 2 SUBs, store exit {code}"


def _tower_round(tower: TowerProc) -> tuple[bool, str]:
    """A stranger connects to the tower's beacon input as a PUB, floods beacons with PINGs
    among them for 2 s and resets: did the tower die within 5 s?"""
    sent = attack_tower(tower.sub_endpoint)
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
