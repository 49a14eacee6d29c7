"""Socket construction with the options every dafka socket needs.

Every socket gets an explicit LINGER (so closing never hangs the process: a PUB that still
has queued frames when its peer vanished would otherwise block ``Context.term`` forever) and
explicit high-water marks (ZeroMQ's default of 1000 messages drops records under load on PUB
sockets, which the protocol would recover with FETCH but at a high price).
"""

from __future__ import annotations

from typing import TypeAlias

import zmq

ZmqContext: TypeAlias = zmq.Context[zmq.Socket[bytes]]
"""The ZeroMQ context a node may be given (``context=``): other packages name the type
from here, never from zmq (only ``dafka.transport`` imports zmq)."""

DEFAULT_LINGER_MS = 500
DEFAULT_HWM = 1_000_000


def make_socket(
    context: zmq.Context[zmq.Socket[bytes]],
    kind: int,
    *,
    linger_ms: int = DEFAULT_LINGER_MS,
    hwm: int = DEFAULT_HWM,
) -> zmq.Socket[bytes]:
    """A new socket of ``kind`` with LINGER and both high-water marks set."""
    sock = context.socket(kind)
    sock.setsockopt(zmq.LINGER, linger_ms)
    sock.setsockopt(zmq.SNDHWM, hwm)
    sock.setsockopt(zmq.RCVHWM, hwm)
    return sock


def bound_endpoint(sock: zmq.Socket[bytes]) -> str:
    """The endpoint a socket is bound to, with the real port of a ``:*`` binding."""
    endpoint = sock.getsockopt(zmq.LAST_ENDPOINT)
    assert isinstance(endpoint, bytes)
    return endpoint.decode()


def bound_port(sock: zmq.Socket[bytes]) -> int:
    """The TCP port of a socket bound with ``tcp://host:*``."""
    return int(bound_endpoint(sock).rsplit(":", 1)[1])


__all__ = [
    "DEFAULT_HWM",
    "DEFAULT_LINGER_MS",
    "ZmqContext",
    "bound_endpoint",
    "bound_port",
    "make_socket",
]
