"""A stranger on the network: raw ZMTP 3.0 over a plain TCP socket, no libzmq.

A hostile peer need not run libzmq (and libzmq itself crashes on the sending side when a peer
drops it for an oversized frame), so the resource-limit tests speak the wire protocol by
hand: the 64-byte greeting with the NULL mechanism, a READY naming a socket type, then
message frames of any size.
"""

from __future__ import annotations

import socket
import struct
import time

GREETING = b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00")
GREETING += b"\x00" + b"\x00" * 31


def _frame(body: bytes, *, more: bool = False, command: bool = False) -> bytes:
    flags = (0x01 if more else 0) | (0x04 if command else 0)
    if len(body) > 255:
        return bytes([flags | 0x02]) + struct.pack(">Q", len(body)) + body
    return bytes([flags, len(body)]) + body


def _ready(socket_type: bytes) -> bytes:
    name = b"Socket-Type"
    body = b"\x05READY" + bytes([len(name)]) + name + struct.pack(">I", len(socket_type))
    return _frame(body + socket_type, command=True)


def endpoint_address(endpoint: str) -> tuple[str, int]:
    host, port = endpoint.removeprefix("tcp://").rsplit(":", 1)
    return host.strip("[]"), int(port)


def send_frames(endpoint: str, socket_type: bytes, frames: list[bytes], wait: float) -> bool:
    """Connect as ``socket_type``, send one multipart message; True if the node hung up on
    us within ``wait`` seconds (what ZMQ_MAXMSGSIZE does to an oversized frame)."""
    with socket.create_connection(endpoint_address(endpoint), timeout=wait) as conn:
        conn.sendall(GREETING)
        message = b"".join(_frame(body, more=i < len(frames) - 1) for i, body in enumerate(frames))
        try:
            conn.sendall(_ready(socket_type) + message)
        except OSError:
            return True  # it hung up while we were still sending
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                if not conn.recv(65536):
                    return True
            except TimeoutError:
                continue
            except OSError:
                return True
        return False


def subscribe(endpoint: str, prefix: bytes, wait: float = 5.0) -> bool:
    """Send one subscription (``0x01 + prefix``) to a PUB/XPUB as a SUB."""
    return send_frames(endpoint, b"SUB", [b"\x01" + prefix], wait)


def publish(endpoint: str, frames: list[bytes], wait: float = 5.0) -> bool:
    """Send one message to a SUB/XSUB that listens (a tower's beacon input) as a PUB."""
    return send_frames(endpoint, b"PUB", frames, wait)


__all__ = ["publish", "send_frames", "subscribe"]
