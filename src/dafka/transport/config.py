"""Transport settings of a node: where the towers are, how it beacons, where it binds.

Key names follow the C reference (``../shared/PROTOCOL.md`` section 6) where it has them:
``beacon/sub_address`` is the tower's XSUB that the node's beacon PUB connects to,
``beacon/pub_address`` the tower's XPUB that its beacon SUB connects to. Several towers are
given as several addresses.

Where the node listens and what it advertises follow one rule (:mod:`dafka.config._listen`,
``dafka.config.listen_addresses``): unless told, a node binds the local address of its route
to the towers (loopback when they are on loopback) and advertises that address;
:meth:`TransportConfig.listen` applies it when the node opens its sockets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dafka.config import Listen, check_listen, listen_addresses, tower_endpoints, tower_spec
from dafka.errors import ConfigError
from dafka.node import host_problem
from dafka.transport.security import Security


@dataclass(frozen=True, slots=True)
class TransportConfig:
    """How a node finds its peers and exposes itself."""

    tower_sub_addresses: tuple[str, ...] = ("tcp://127.0.0.1:5556",)
    """``beacon/sub_address``: tower XSUBs that receive this node's beacons."""
    tower_pub_addresses: tuple[str, ...] = ("tcp://127.0.0.1:5557",)
    """``beacon/pub_address``: tower XPUBs that send beacons and the welcome to this node."""
    beacon_interval: float = 1.0
    """``beacon/interval`` in seconds."""
    beacon_timeout: float = 4.0
    """``beacon/timeout`` in seconds: a peer not heard of for this long is disconnected."""
    advertised_host: str = ""
    """``beacon/address``: the host peers connect to; "": the bound address when it is one,
    else (``*``) the address each tower sees (:meth:`listen`)."""
    bind_host: str = ""
    """Interface the data sockets bind to (on an ephemeral port); "": the local address of
    this host's route to the towers, loopback when they are on loopback (:meth:`listen`)."""
    high_watermark: int = 1_000_000
    receive_watermark: int | None = None
    """RCVHWM of the SUBs a node reads its peers' data on: messages queued per peer before
    TCP holds the rest back in the sender (whose PUB queues up to ``high_watermark``);
    None: ``high_watermark``. Stores set it (``store/receive_watermark``): what a lagging
    store holds in memory is then about this many messages per peer, not a million."""
    linger_ms: int = 500
    receive_batch: int = 1024
    """Messages read from one socket before the machine's outbox is executed."""
    listen_first: float = 0.0
    """Seconds to connect to the peers already there before beaconing (``DiscoveryConfig``)."""
    security: Security | None = None
    """CURVE on every TCP socket (``--key``, ``--authorized-keys``); None: plaintext, as C."""

    def __post_init__(self) -> None:
        if not self.tower_sub_addresses or not self.tower_pub_addresses:
            raise ConfigError("at least one tower address is needed for each beacon socket")
        if len(self.tower_sub_addresses) != len(self.tower_pub_addresses):
            raise ConfigError("give as many tower XSUB addresses as tower XPUB addresses")
        if self.receive_watermark is not None and self.receive_watermark < 1:
            raise ConfigError(f"receive watermark {self.receive_watermark}: at least 1")
        if self.beacon_interval <= 0 or self.beacon_timeout <= self.beacon_interval:
            raise ConfigError("beacon/timeout must be larger than beacon/interval, both > 0")
        if self.advertised_host:
            problem = host_problem(self.advertised_host)
            if problem is not None:
                raise ConfigError(
                    f"advertised host {self.advertised_host!r} {problem}: peers could not "
                    "connect to it (give an IP address or a DNS name)"
                )
        if self.bind_host and self.bind_host != "*":
            problem = host_problem(self.bind_host)
            if problem is not None:
                raise ConfigError(
                    f"bind host {self.bind_host!r} {problem} (give '*', an IP address or "
                    "an interface name)"
                )
        check_listen(self.bind_host, self.advertised_host)

    def listen(self) -> Listen:
        """Where this node binds and what host it advertises (the one rule,
        :func:`dafka.config.listen_addresses`, applied to the towers' beacon-in hosts).
        Raises :class:`ConfigError` when it cannot be chosen or cannot work."""
        towers = []
        for address in self.tower_sub_addresses:
            host, _, port = address.removeprefix("tcp://").rpartition(":")
            towers.append((host, int(port) if port.isascii() and port.isdigit() else 0))
        return listen_addresses(towers, self.bind_host, self.advertised_host)

    @classmethod
    def for_towers(
        cls,
        towers: str | Sequence[str],
        *,
        beacon_interval: float = 1.0,
        beacon_timeout: float | None = None,
        **rest: Any,
    ) -> TransportConfig:
        """The one builder of a node's transport, for the commands, the clients' settings,
        the daemons, the local clusters and the Spark options: ``towers`` in the one grammar
        (:func:`dafka.config.tower_endpoints`: ``host:port`` or ``host:subport:pubport``,
        comma-separated or a list), ``beacon_timeout`` 4 beacon intervals unless given, the
        other fields as named. A bad value raises :class:`ConfigError`."""
        pairs = tower_endpoints(list(towers) if not isinstance(towers, str) else towers)
        return cls(
            tower_sub_addresses=tuple(sub for sub, _ in pairs),
            tower_pub_addresses=tuple(pub for _, pub in pairs),
            beacon_interval=beacon_interval,
            beacon_timeout=4 * beacon_interval if beacon_timeout is None else beacon_timeout,
            **rest,
        )

    @property
    def towers(self) -> str:
        """The towers as ``for_towers`` and ``--tower`` take them (comma-separated)."""
        return ",".join(
            tower_spec(sub, pub)
            for sub, pub in zip(self.tower_sub_addresses, self.tower_pub_addresses, strict=True)
        )


__all__ = ["TransportConfig"]
