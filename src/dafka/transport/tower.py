"""The tower: a beacon forwarder that lets nodes find each other.

A tower is an XSUB (beacons in, default ``tcp://*:5556``) and an XPUB (beacons out, default
``tcp://*:5557``) with the XPUB welcome message ``W``, bytes as the C reference
(``../shared/PROTOCOL.md`` section 3):

* a node's beacon arrives as 4 frames ``B | node id | host | port`` and leaves as 3 frames
  ``B | node id | tcp://host:port``; an empty host is replaced by the peer address of the
  connection the beacon came in on (unlike C we never swap 127.0.0.1 for another interface:
  that made the C tower crash on machines without one);
* subscriptions flow from the XPUB to the XSUB, except those starting with ``W`` (the
  welcome prefix is the tower's own business);
* a frame over 4 KiB (``CONTROL_MESSAGE_BYTES``, far more than any beacon or subscription)
  disconnects its sender inside ZeroMQ before it is read (a 256 KiB subscription used to
  crash the tower in libzmq);
* anything else is dropped and counted, never forwarded and never fatal - including a beacon
  whose host nobody can connect to (``my host``, ``*``, non-ASCII; the rule is
  :func:`dafka.node.host_problem`), which would otherwise reach every node.

Several towers may serve one cluster; nodes connect to all of them and keep working while at
least one is alive.

A secured tower (``security=``) binds both sockets as CURVE servers that admit only the keys
of its authorized-keys directory (:mod:`dafka.transport.security`), and forwards each beacon
with a 4th frame: the Z85 public key its connection authenticated with, the key peers then
expect from that endpoint. A beacon without an authenticated key is dropped and counted.
Given an ACL too (``security.acl``), it forwards only the beacons of keys the ACL names (a
store, or in a grant): an authorized key named nowhere, which no node would let do anything,
is not found by any node either (dropped, counted in ``acl_refused``, logged once per key).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass

import zmq

from dafka.errors import DafkaError
from dafka.node import host_problem, port_problem
from dafka.protocol import BEACON_ID, WELCOME_ID
from dafka.transport._guard import Guard
from dafka.transport._stats import RunnerStats
from dafka.transport.failure import FailureLatch
from dafka.transport.memory import release_free_memory
from dafka.transport.security import Gate, Security, peer_key, warn_if_exposed
from dafka.transport.sockets import (
    BEACON_HWM,
    CONTROL_MESSAGE_BYTES,
    bound_endpoint,
    make_socket,
)

log = logging.getLogger(__name__)

_FLOOD_WINDOW = 5.0
_FLOOD_BEACONS = 20_000
"""More beacons forwarded in a 5 s window than this, then a tenth as many in the next: a
flood ended, and the tower returns the memory it grew by (``dafka.transport._memory``)."""


@dataclass
class TowerStats:
    """Counters of a running tower (``Tower.statistics()``)."""

    beacons_forwarded: int = 0
    subscriptions_forwarded: int = 0
    dropped_malformed: int = 0
    dropped_unauthenticated: int = 0
    """Secured tower: beacons whose connection carried no authenticated key."""
    refused_keys: int = 0
    """Secured tower: connections refused by ZAP (a key not in the directory)."""
    failed_handshakes: int = 0
    """Secured tower: connections whose CURVE handshake failed (a peer without a key...)."""
    acl_refused: int = 0
    """Tower with an ACL: beacons of authorized keys the ACL names nowhere (not forwarded)."""


def rewrite_beacon(frames: list[bytes], peer_address: str | None) -> list[bytes] | None:
    """The 3 frames a tower forwards for a 4-frame node beacon, or None if it is malformed."""
    if len(frames) != 4 or frames[0] != BEACON_ID or not frames[1]:
        return None
    host, port = frames[2], frames[3]
    if not port.isdigit() or len(port) > 5 or port[:1] == b"0" or port_problem(int(port)):
        return None
    if not host:
        if not peer_address:
            return None
        host = (f"[{peer_address}]" if ":" in peer_address else peer_address).encode()
    try:
        text = host.decode("ascii")
    except UnicodeDecodeError:
        return None
    if host_problem(text) is not None:
        return None
    return [BEACON_ID, frames[1], b"tcp://" + host + b":" + port]


class Tower:
    """A tower running in a background thread; ``start()`` binds, ``stop()`` joins."""

    def __init__(
        self,
        sub_address: str = "tcp://*:5556",
        pub_address: str = "tcp://*:5557",
        *,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
        security: Security | None = None,
    ) -> None:
        self._context = context or zmq.Context.instance()
        self._security = security
        self._gate: Gate | None = None
        self._sub_address = sub_address
        self._pub_address = pub_address
        self._stats = TowerStats()
        self._guard_stats = RunnerStats()
        self._guard = (
            Guard(security, "tower", self._guard_stats)
            if security is not None and security.acl is not None
            else None
        )
        """Given an ACL: forwards only the beacons of keys it names (``Guard.admit_beacon``)."""
        self._thread: threading.Thread | None = None
        self._stop_endpoint = f"inproc://dafka-tower-stop-{id(self)}"
        self._stopper: zmq.Socket[bytes] | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.failure = FailureLatch("tower")
        """Set if the forwarding thread dies (reported to the process's failure board)."""
        self.sub_endpoint = ""
        self.pub_endpoint = ""

    def statistics(self) -> TowerStats:
        stats = TowerStats(**vars(self._stats))
        gate = self._gate
        if gate is not None:
            counts = gate.statistics()
            stats.refused_keys = counts.refused_keys
            stats.failed_handshakes = counts.failed_handshakes
        return stats

    def health(self) -> str | None:
        """None while it forwards; why not once its thread died (the daemons' /healthz)."""
        error = self.failure.error
        return None if error is None else f"failed: {error}"

    def start(self) -> None:
        """Bind both sockets and start forwarding; raises if a bind fails."""
        self._thread = threading.Thread(target=self._main, name="dafka-tower", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """Stop forwarding, close the sockets and join the thread."""
        if self._thread is None:
            return
        if self.failure.error is None:
            stopper = make_socket(
                self._context, zmq.PAIR, linger_ms=0, max_inbound_bytes=CONTROL_MESSAGE_BYTES
            )
            stopper.connect(self._stop_endpoint)
            with contextlib.suppress(zmq.Again):  # it died meanwhile: nothing to tell
                stopper.send(b"STOP", zmq.NOBLOCK)
            self._thread.join()
            stopper.close()
        else:
            self._thread.join()
        self._thread = None

    def _main(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # the thread must report, never die silently
            log.exception("tower crashed; it forwards nothing any more")
            self.failure.fail(exc)
            self._ready.set()

    def _run(self) -> None:
        # Beacons in, subscriptions in: nothing a tower receives is larger than a beacon.
        cap = CONTROL_MESSAGE_BYTES
        hwm = BEACON_HWM
        xsub = make_socket(self._context, zmq.XSUB, linger_ms=0, hwm=hwm, max_inbound_bytes=cap)
        xpub = make_socket(self._context, zmq.XPUB, linger_ms=0, hwm=hwm, max_inbound_bytes=cap)
        control = make_socket(self._context, zmq.PAIR, linger_ms=0, max_inbound_bytes=cap)
        security = self._security
        warn_if_exposed(self._sub_address, security, "tower")
        try:
            if security is not None:
                self._gate = Gate.open(self._context, security, "tower")
                security.server(xsub, self._gate)
                security.server(xpub, self._gate)
            xpub.setsockopt(zmq.XPUB_WELCOME_MSG, WELCOME_ID)
            xsub.bind(self._sub_address)
            xpub.bind(self._pub_address)
            control.bind(self._stop_endpoint)
            self.sub_endpoint = bound_endpoint(xsub)
            self.pub_endpoint = bound_endpoint(xpub)
        except zmq.ZMQError as exc:
            self._error = DafkaError(
                f"tower cannot bind {self._sub_address} / {self._pub_address}: {exc}"
            )
            for sock in (xsub, xpub, control):
                sock.close()
            self._close_gate()
            self._ready.set()
            return
        log.info("tower ready: beacons in on %s, out on %s", self.sub_endpoint, self.pub_endpoint)
        self._ready.set()
        poller = zmq.Poller()
        poller.register(xsub, zmq.POLLIN)
        poller.register(xpub, zmq.POLLIN)
        poller.register(control, zmq.POLLIN)
        window_end = time.monotonic() + _FLOOD_WINDOW
        window_start_count = 0
        last_window = 0
        try:
            while True:
                events = dict(poller.poll(1000))
                if control in events:
                    return
                now = time.monotonic()
                if now >= window_end:  # a flood ended: give its memory back
                    forwarded = self._stats.beacons_forwarded
                    this_window = forwarded - window_start_count
                    if last_window > _FLOOD_BEACONS and this_window * 10 < last_window:
                        release_free_memory("tower: a beacon flood ended")
                    last_window, window_start_count = this_window, forwarded
                    window_end = now + _FLOOD_WINDOW
                if xsub in events:
                    self._forward_beacons(xsub, xpub)
                if xpub in events:
                    self._forward_subscriptions(xpub, xsub)
        finally:
            for sock in (xsub, xpub, control):
                sock.close()
            self._close_gate()

    def _close_gate(self) -> None:
        if self._gate is not None:
            self._gate.close()

    def _forward_beacons(self, xsub: zmq.Socket[bytes], xpub: zmq.Socket[bytes]) -> None:
        while True:
            try:
                parts = xsub.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            peer = _peer_address(parts[0])
            out = rewrite_beacon([p.bytes for p in parts], peer)
            if out is None:
                self._stats.dropped_malformed += 1
                continue
            if self._security is not None:
                key = peer_key(parts[0])
                if not key:
                    self._stats.dropped_unauthenticated += 1
                    continue
                guard = self._guard
                if guard is not None and not guard.admit_beacon(key.encode(), time.monotonic()):
                    self._stats.acl_refused = self._guard_stats.acl_refused
                    continue
                out.append(key.encode())
            xpub.send_multipart(out)
            self._stats.beacons_forwarded += 1

    def _forward_subscriptions(self, xpub: zmq.Socket[bytes], xsub: zmq.Socket[bytes]) -> None:
        while True:
            try:
                frame = xpub.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            if frame[:1] not in (b"\x00", b"\x01"):
                self._stats.dropped_malformed += 1
                continue
            if frame[1:2] == WELCOME_ID:
                continue
            xsub.send(frame)
            self._stats.subscriptions_forwarded += 1


def _peer_address(frame: zmq.Frame) -> str | None:
    try:
        value = frame.get("Peer-Address")
    except zmq.ZMQError:
        return None
    return value if isinstance(value, str) and value else None


__all__ = ["Tower", "TowerStats", "rewrite_beacon"]
