"""Socket construction with the options every dafka socket needs.

Every socket gets an explicit LINGER (so closing never hangs the process: a PUB that still
has queued frames when its peer vanished would otherwise block ``Context.term`` forever) and
explicit high-water marks (ZeroMQ's default of 1000 messages drops records under load on PUB
sockets, which the protocol would recover with FETCH but at a high price), and an explicit cap
on the size of any frame it accepts from a peer (``ZMQ_MAXMSGSIZE``): a peer that sends a
larger frame is disconnected by ZeroMQ before the frame is allocated. Without it one stranger's
256 KiB subscription on the tower's beacon port crashed the tower inside libzmq, and a 1 MB
subscription on a store's PUB cost the store ~50 MB it never gave back (issue 19). Two caps:

* :data:`CONTROL_MESSAGE_BYTES` for sockets that only ever receive beacons, welcomes or
  subscriptions (the tower's sockets, a node's beacon sockets, every data PUB/XPUB, whose
  inbound traffic is subscriptions);
* :data:`DATA_MESSAGE_BYTES` for data SUBs, which receive RECORDs: the protocol's largest
  RECORD content (:data:`dafka.protocol.MAX_MESSAGE_BYTES`) plus room for its header frame.
  Not the configured ``max_message_bytes``: a store keeps a *drop notice* for a foreign
  producer's RECORD over its limit, so that the partition goes on; a socket that disconnected
  on such a RECORD would see it again on every FETCH and never get past it.

And a dead-connection rule kept by the kernel, with a connect timeout, so that a connection
across a network partition is replaced soon after the network heals: a TCP connection whose
packets vanish retransmits with the kernel's back-off (a 30 s cut between hosts healed, and
the records went on ~27 s later, at the next retransmission; tests/hosts). A connection on
which nothing arrived for :data:`DEAD_CONNECTION_MS` while keepalive probes went unanswered
(``ZMQ_TCP_KEEPALIVE*``: a probe after :data:`KEEPALIVE_IDLE_S` of silence, then every
:data:`KEEPALIVE_INTERVAL_S`), or whose sent bytes stayed unacknowledged that long
(``ZMQ_TCP_MAXRT``, Linux's ``TCP_USER_TIMEOUT``), is closed by the kernel and the connecting
side reconnects, each attempt given up after :data:`CONNECT_TIMEOUT_MS` (a SYN lost in the
cut is retried by the kernel after 1, 3, 7, 15, 31 s otherwise): the same cut heals a second
or two after the link (docs/deploy.md). The peer's kernel answers the probes, not its Python
nor its ZeroMQ thread: a busy node still answers. What was published while disconnected is
fetched again, as after any loss. The timeout is generous so that a slow link with a deep
queue is not mistaken for a dead one; a cut shorter than it heals by TCP retransmission
alone. A node that reads nothing from a peer for that long (its queue from the peer full,
the kernel's window closed) has the connection closed and re-made by the sender's kernel,
as the heartbeat timeout did (what was in flight is fetched again).

Not ZMTP heartbeats (``ZMQ_HEARTBEAT_IVL``), which this used until 2026-11: in libzmq 4.3.5
(pyzmq 27's) the heartbeat timer writes a PING on a connection whose reading had stopped
(the socket's queue from that peer full: a node lagging behind it) and then failed (the peer
closed or reset it), and that write aborts the whole process (``Assertion failed: !_io_error
(src/stream_engine_base.cpp:310)``), most likely how a store died in CI while its peers
left as it caught up; ``scripts/zmq_abort.py lag --heartbeats`` reproduces it every time
(docs/nodes.md, "Limits against strangers").
"""

from __future__ import annotations

from typing import TypeAlias

import zmq

from dafka.protocol import MAX_MESSAGE_BYTES

ZmqContext: TypeAlias = zmq.Context[zmq.Socket[bytes]]
"""The ZeroMQ context a node may be given (``context=``): other packages name the type
from here, never from zmq (only ``dafka.transport`` imports zmq)."""

DEAD_CONNECTION_MS = 10_000
"""A connection silent for 10 s while keepalive probes went unanswered, or whose sent bytes
stayed unacknowledged for 10 s, is closed by the kernel, then re-made by its connecting side
(``ZMQ_TCP_MAXRT``; it also bounds the keepalive probing)."""
KEEPALIVE_IDLE_S = 2
"""Seconds of silence on a connection before the kernel's first keepalive probe
(``ZMQ_TCP_KEEPALIVE_IDLE``)."""
KEEPALIVE_INTERVAL_S = 2
"""Seconds between keepalive probes (``ZMQ_TCP_KEEPALIVE_INTVL``)."""
KEEPALIVE_PROBES = 5
"""Unanswered probes before the kernel gives the connection up when no ``TCP_MAXRT`` applies
(``ZMQ_TCP_KEEPALIVE_CNT``)."""
CONNECT_TIMEOUT_MS = 2000
"""A connection attempt unanswered for 2 s is given up and tried again (``ZMQ_CONNECT_TIMEOUT``;
a lost SYN would otherwise wait for the kernel's back-off)."""
DEFAULT_LINGER_MS = 500
DEFAULT_HWM = 1_000_000

CONTROL_MESSAGE_BYTES = 4096
"""The largest frame a beacon, welcome or subscription socket accepts: a beacon frame is at
most a 255-byte node id or an endpoint (``tcp://`` + a 255-byte host + ``:port``) or a
40-byte key, a subscription 1 + 1 + 255 bytes, a CURVE handshake command under 1 KiB."""

BEACON_HWM = 10_000
"""The high-water mark of beacon sockets (a node's beacon PUB and SUB, the tower's two): far
more than a cluster's beacons per interval, and a bound on what a flood of made-up beacons
can queue in memory (a million queued beacons cost a store tens of MB; a dropped beacon is
sent again next interval, while a queued one only arrives late).
"""

DATA_MESSAGE_BYTES = MAX_MESSAGE_BYTES + 64 * 1024
"""The largest frame a data SUB accepts: the protocol's largest RECORD content and the 64 KiB
more than any header frame or CURVE box needs."""


def make_socket(
    context: zmq.Context[zmq.Socket[bytes]],
    kind: int,
    *,
    linger_ms: int = DEFAULT_LINGER_MS,
    hwm: int = DEFAULT_HWM,
    max_inbound_bytes: int,
) -> zmq.Socket[bytes]:
    """A new socket of ``kind`` with LINGER, both high-water marks, the inbound frame cap
    (no default: every socket says which of the two caps it needs) and the kernel's
    dead-connection rule set; never ZMTP heartbeats (the module's docstring says why)."""
    sock = context.socket(kind)
    sock.setsockopt(zmq.LINGER, linger_ms)
    sock.setsockopt(zmq.SNDHWM, hwm)
    sock.setsockopt(zmq.RCVHWM, hwm)
    sock.setsockopt(zmq.MAXMSGSIZE, max_inbound_bytes)
    sock.setsockopt(zmq.TCP_KEEPALIVE, 1)
    sock.setsockopt(zmq.TCP_KEEPALIVE_IDLE, KEEPALIVE_IDLE_S)
    sock.setsockopt(zmq.TCP_KEEPALIVE_INTVL, KEEPALIVE_INTERVAL_S)
    sock.setsockopt(zmq.TCP_KEEPALIVE_CNT, KEEPALIVE_PROBES)
    sock.setsockopt(zmq.TCP_MAXRT, DEAD_CONNECTION_MS)
    sock.setsockopt(zmq.CONNECT_TIMEOUT, CONNECT_TIMEOUT_MS)
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
    "BEACON_HWM",
    "CONTROL_MESSAGE_BYTES",
    "DATA_MESSAGE_BYTES",
    "DEAD_CONNECTION_MS",
    "DEFAULT_HWM",
    "DEFAULT_LINGER_MS",
    "ZmqContext",
    "bound_endpoint",
    "bound_port",
    "make_socket",
]
