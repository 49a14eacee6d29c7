"""The sockets of one runner: set up in its thread, closed when it ends.

* one data XPUB and one data SUB per identity, the XPUB bound on an ephemeral port of the
  address :meth:`TransportConfig.listen` chose (the subscriptions every XPUB sees tell the
  runner which peers connected back, ``_reach.py``; an identity with ``xpub`` hands them to
  its machine too);
* the beacon PUB and SUB, connected to every tower (the SUB takes welcomes ``W`` and
  beacons ``B``);
* the wake-up PAIR of the runner's mailbox;
* with sender attribution (``PeerSockets``, a producer), one more SUB per peer, created as
  peers appear.
"""

from __future__ import annotations

from dataclasses import dataclass

import zmq

from dafka.config import Listen
from dafka.errors import DafkaError
from dafka.protocol import BEACON_ID, WELCOME_ID
from dafka.transport._poll import DescriptorPoll
from dafka.transport.config import TransportConfig
from dafka.transport.security import Gate, warn_if_exposed
from dafka.transport.sockets import (
    BEACON_HWM,
    CONTROL_MESSAGE_BYTES,
    DATA_MESSAGE_BYTES,
    bound_port,
    make_socket,
)


@dataclass(frozen=True, slots=True)
class Identity:
    """One node id with its own data sockets; ``xpub``: its machine sees the subscription
    notices of its PUB (every PUB is an XPUB; only these reach the machine)."""

    node_id: str
    xpub: bool = False
    topic: str = ""
    """The one topic this identity's PUB publishes (a producer's partition), "" if several:
    with an ACL, that PUB serves only keys that may consume it (``_guard.py``)."""
    held: bool = False
    """Its SUB carries what the node's persistence appends (a store's writer): the runner
    leaves it unread while the persistence holds (``Persistence.hold_until``)."""


class Endpoint:
    """The data sockets of one identity, and the port its PUB is bound to."""

    __slots__ = ("identity", "port", "pub", "sub")

    def __init__(
        self, identity: Identity, pub: zmq.Socket[bytes], sub: zmq.Socket[bytes], port: int
    ) -> None:
        self.identity = identity
        self.pub = pub
        self.sub = sub
        self.port = port


class SocketSet:
    """Every socket the runner thread opens at start; ``close()`` closes them all."""

    def __init__(
        self,
        endpoints: list[Endpoint],
        beacon_pub: zmq.Socket[bytes],
        beacon_sub: zmq.Socket[bytes],
        wake: zmq.Socket[bytes],
        owned: list[zmq.Socket[bytes]],
        listen: Listen,
        gate: Gate | None = None,
    ) -> None:
        self.endpoints = endpoints
        self.listen = listen
        """Where the data sockets are bound and what host the beacons carry."""
        self.beacon_pub = beacon_pub
        self.beacon_sub = beacon_sub
        self.wake = wake
        self._owned = owned
        self.gate = gate
        """The ZAP gate of a secured node (its data PUBs are CURVE servers); None: plaintext."""

    @classmethod
    def open(
        cls,
        context: zmq.Context[zmq.Socket[bytes]],
        identities: list[Identity],
        config: TransportConfig,
        wake_endpoint: str,
        name: str,
    ) -> SocketSet:
        """Create, bind and connect; raises :class:`DafkaError` (nothing left open) on failure
        (a :class:`~dafka.errors.ConfigError` when the listening rule refuses).

        A secured node (``config.security``) binds CURVE servers checked by its own ZAP gate
        and connects to the towers as a CURVE client of their key.
        """
        listen = config.listen()
        owned: list[zmq.Socket[bytes]] = []
        security = config.security
        warn_if_exposed(listen.bind, security, name)
        gate = Gate.open(context, security, name) if security is not None else None
        try:
            endpoints = []
            for identity in identities:
                pub = make_socket(
                    context,
                    zmq.XPUB,
                    linger_ms=config.linger_ms,
                    hwm=config.high_watermark,
                    max_inbound_bytes=CONTROL_MESSAGE_BYTES,  # it receives subscriptions
                )
                if security is not None and security.acl is not None:
                    # The subscriptions are the runner's to grant (the ACL, _guard.py).
                    pub.setsockopt(zmq.XPUB_MANUAL, 1)
                if identity.xpub:
                    # Every subscribe, not only a prefix's first: a producer restarted
                    # under the same id subscribes while its old connection may linger,
                    # and must still be greeted (STORE-HELLO) to have its ACKs counted.
                    pub.setsockopt(zmq.XPUB_VERBOSE, 1)
                sub = make_socket(
                    context,
                    zmq.SUB,
                    linger_ms=0,
                    hwm=receive_watermark(config),
                    max_inbound_bytes=DATA_MESSAGE_BYTES,
                )
                owned += [pub, sub]
                if security is not None and gate is not None:
                    security.server(pub, gate)
                try:
                    pub.bind(f"tcp://{listen.bind}:*")
                except zmq.ZMQError as exc:
                    raise DafkaError(
                        f"{name}: cannot listen on {listen.bind} ({listen.why}): {exc}; "
                        "give --bind an address of this host (or '*')"
                    ) from exc
                endpoints.append(Endpoint(identity, pub, sub, bound_port(pub)))
            control = CONTROL_MESSAGE_BYTES
            beacon_pub, beacon_sub = (
                make_socket(context, kind, linger_ms=0, hwm=BEACON_HWM, max_inbound_bytes=control)
                for kind in (zmq.PUB, zmq.SUB)
            )
            wake = make_socket(context, zmq.PAIR, linger_ms=0, max_inbound_bytes=control)
            owned += [beacon_pub, beacon_sub, wake]
            wake.bind(wake_endpoint)
            beacon_sub.setsockopt(zmq.SUBSCRIBE, WELCOME_ID)
            beacon_sub.setsockopt(zmq.SUBSCRIBE, BEACON_ID)
            if security is not None:
                security.client(beacon_pub, security.tower_key)
                security.client(beacon_sub, security.tower_key)
            for address in config.tower_sub_addresses:
                beacon_pub.connect(address)
            for address in config.tower_pub_addresses:
                beacon_sub.connect(address)
        except (zmq.ZMQError, DafkaError) as exc:
            for sock in owned:
                sock.close()
            if gate is not None:
                gate.close()
            if isinstance(exc, DafkaError):
                raise
            raise DafkaError(f"{name}: cannot set up sockets: {exc}") from exc
        return cls(endpoints, beacon_pub, beacon_sub, wake, owned, listen, gate)

    def close(self) -> None:
        for sock in self._owned:
            sock.close()
        if self.gate is not None:
            self.gate.close()


class PeerSockets:
    """One SUB per peer endpoint, so that an ACK read from it names its store (and, on a
    node with an ACL, every message its sender's key).

    ZeroMQ does not say who sent a message, but it delivers on the socket connected to
    the sender: a socket per peer is how a producer knows which store sent an ACK (whose
    ACKs count, ``min_stores``; docs/nodes.md).
    Every peer socket carries every subscription (the identities' SUBs then stay idle).
    ``poller``, set by the poll loop, gets each new socket registered and each closed one
    unregistered.
    """

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], config: TransportConfig) -> None:
        self._context = context
        self._hwm = receive_watermark(config)
        self._security = config.security
        self._by_endpoint: dict[str, tuple[str, zmq.Socket[bytes]]] = {}
        self.senders: dict[zmq.Socket[bytes], str] = {}
        """Socket -> the node id of the peer it is connected to."""
        self.keys: dict[zmq.Socket[bytes], bytes] = {}
        """Socket -> the Z85 key its peer authenticated with (secured nodes)."""
        self._prefixes: set[bytes] = set()
        self.poller: DescriptorPoll | None = None

    def __contains__(self, endpoint: str) -> bool:
        return endpoint in self._by_endpoint

    def subscribe(self, prefix: bytes, on: bool) -> None:
        if on:
            self._prefixes.add(prefix)
        else:
            self._prefixes.discard(prefix)
        option = zmq.SUBSCRIBE if on else zmq.UNSUBSCRIBE
        for _, sock in self._by_endpoint.values():
            sock.setsockopt(option, prefix)
            if self.poller is not None:
                self.poller.used(sock)

    def add(self, node_id: str, endpoint: str, server_key: bytes | None = None) -> None:
        """Open a SUB to ``endpoint`` (a CURVE client of ``server_key`` on a secured node);
        raises ``zmq.ZMQError`` (nothing left open) if refused."""
        sock = make_socket(
            self._context,
            zmq.SUB,
            linger_ms=0,
            hwm=self._hwm,
            max_inbound_bytes=DATA_MESSAGE_BYTES,
        )
        try:
            for prefix in self._prefixes:
                sock.setsockopt(zmq.SUBSCRIBE, prefix)
            if self._security is not None and server_key is not None:
                self._security.client(sock, server_key)
            sock.connect(endpoint)
        except zmq.ZMQError:
            sock.close()
            raise
        self._by_endpoint[endpoint] = (node_id, sock)
        self.senders[sock] = node_id
        if server_key is not None:
            self.keys[sock] = server_key
        if self.poller is not None:
            self.poller.register(sock)

    def remove(self, endpoint: str) -> None:
        found = self._by_endpoint.pop(endpoint, None)
        if found is None:
            return
        sock = found[1]
        self.senders.pop(sock, None)
        self.keys.pop(sock, None)
        if self.poller is not None:
            self.poller.unregister(sock)
        sock.close()

    def close(self) -> None:
        for _, sock in self._by_endpoint.values():
            sock.close()
        self._by_endpoint.clear()
        self.senders.clear()
        self.keys.clear()


def receive_watermark(config: TransportConfig) -> int:
    """The high-water mark of a data SUB (only its RCVHWM counts: a SUB sends nothing)."""
    if config.receive_watermark is not None:
        return config.receive_watermark
    return config.high_watermark


__all__ = ["Endpoint", "Identity", "PeerSockets", "SocketSet"]
