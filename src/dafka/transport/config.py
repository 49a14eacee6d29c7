"""Transport settings of a node: where the towers are, how it beacons, where it binds.

Key names follow the C reference (``../shared/PROTOCOL.md`` section 6) where it has them:
``beacon/sub_address`` is the tower's XSUB that the node's beacon PUB connects to,
``beacon/pub_address`` the tower's XPUB that its beacon SUB connects to. Several towers are
given as several addresses.
"""

from __future__ import annotations

from dataclasses import dataclass

from dafka.errors import ConfigError
from dafka.node import host_problem


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
    """``beacon/address``: the host peers should connect to; "" lets the tower use the peer IP."""
    bind_host: str = "*"
    """Interface the data sockets bind to (on an ephemeral port)."""
    high_watermark: int = 1_000_000
    linger_ms: int = 500
    receive_batch: int = 1024
    """Messages read from one socket before the machine's outbox is executed."""
    listen_first: float = 0.0
    """Seconds to connect to the peers already there before beaconing (``DiscoveryConfig``)."""

    def __post_init__(self) -> None:
        if not self.tower_sub_addresses or not self.tower_pub_addresses:
            raise ConfigError("at least one tower address is needed for each beacon socket")
        if len(self.tower_sub_addresses) != len(self.tower_pub_addresses):
            raise ConfigError("give as many tower XSUB addresses as tower XPUB addresses")
        if self.beacon_interval <= 0 or self.beacon_timeout <= self.beacon_interval:
            raise ConfigError("beacon/timeout must be larger than beacon/interval, both > 0")
        if self.advertised_host:
            problem = host_problem(self.advertised_host)
            if problem is not None:
                raise ConfigError(
                    f"advertised host {self.advertised_host!r} {problem}: peers could not "
                    "connect to it (give an IP address or a DNS name)"
                )
        if self.bind_host != "*":
            problem = host_problem(self.bind_host)
            if problem is not None:
                raise ConfigError(
                    f"bind host {self.bind_host!r} {problem} (give '*', an IP address or "
                    "an interface name)"
                )

    @classmethod
    def for_towers(cls, towers: list[tuple[str, str]], **kwargs: object) -> TransportConfig:
        """Config for towers given as ``(xsub_endpoint, xpub_endpoint)`` pairs."""
        return cls(
            tower_sub_addresses=tuple(t[0] for t in towers),
            tower_pub_addresses=tuple(t[1] for t in towers),
            **kwargs,  # type: ignore[arg-type]
        )


__all__ = ["TransportConfig"]
