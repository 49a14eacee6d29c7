"""Where a node listens and what host it advertises: one rule, right on one host and on many.

A node binds its data sockets on one address (``bind``, ``--bind``) and its beacons tell
every peer one host to connect to (``beacon/address``, ``--advertise``). The two must agree
with the network, or peers learn an address they cannot reach and wait in silence: a
producer bound to 127.0.0.1 whose tower saw it at 10.9.0.2 was announced at 10.9.0.2, where
nothing listened (issue 24). The rule, for daemons, commands, Python clients and the Spark
connector alike (all build their transport with ``TransportConfig.for_towers``, which
applies it when the node opens its sockets):

* **bind**, when not given: the local address of this host's route to its towers - the
  source address the kernel picks for a datagram to the tower (a UDP ``connect`` and
  ``getsockname``; no packet is sent). A tower on 127.0.0.1 gives 127.0.0.1 (one host: the
  node stays on loopback); a tower at 10.9.0.1 reached from 10.9.0.2 gives 10.9.0.2, the
  address every host that reaches the tower through that network reaches this node at.
  Towers reached from different local addresses give ``*`` (every interface).
* **advertise**, when not given: the bound address when it is one address; with ``*`` (or
  ``0.0.0.0``) nothing, so that each tower announces the address it sees the node at.
* A node that listens on loopback only never advertises a non-loopback address: that is a
  :class:`ConfigError` at start (``--bind 127.0.0.1 --advertise 10.0.0.5``).
* Loud lines (``Listen.warnings``) for what may be meant but cannot reach other hosts: a
  node bound to loopback, or advertising loopback, while its tower is reached off loopback
  (the tower, and so its other nodes, may be on another host).

``--bind``/``--advertise`` (config ``bind``, ``beacon/address``; client ``bind_host=``,
``advertised_host=``; Spark options ``bind``, ``advertise``) override the defaults; see
docs/deploy.md. A node that listens beyond loopback is reachable by anyone who reaches that
address: the transport says so once per process (the security issue's rule).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dafka.errors import ConfigError

Route = Callable[[str, int], str]
"""``route(host, port)``: the local address this host would send from to ``host``."""

_EVERY_INTERFACE = frozenset({"*", "0.0.0.0", "::", "[::]"})


def route_address(host: str, port: int) -> str:
    """The local address of this host's route to ``host`` (an IP or a DNS name), found by
    connecting a UDP socket (no packet is sent) and reading its name. IPv6 addresses are
    returned in brackets, as endpoints write them. Raises :class:`ConfigError` when the name
    does not resolve or no route leads there."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        infos = socket.getaddrinfo(bare, port, type=socket.SOCK_DGRAM)
    except (OSError, UnicodeError) as exc:
        raise ConfigError(f"cannot resolve tower host {host!r}: {exc}") from None
    problem: OSError | None = None
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as probe:
            try:
                probe.connect(address)
            except OSError as exc:
                problem = exc
                continue
            local = str(probe.getsockname()[0])
        return f"[{local}]" if ":" in local else local
    raise ConfigError(f"no route to tower host {host!r}: {problem}")


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this host's loopback (127.0.0.0/8, ::1, ``localhost``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def every_interface(bind: str) -> bool:
    """Whether ``bind`` listens on every interface (``*``, ``0.0.0.0``, ``::``)."""
    return bind in _EVERY_INTERFACE


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Listen:
    """Where a node's data sockets bind and what host its beacons carry."""

    bind: str
    """The address the data sockets bind (``*`` for every interface)."""
    advertise: str
    """The host beacons carry ("": each tower announces the address it sees)."""
    why: str
    """How ``bind`` was chosen, for the log line that says where the node listens."""
    warnings: tuple[str, ...] = ()
    """What cannot reach other hosts though the node may start (one loud line each)."""

    @property
    def loopback_only(self) -> bool:
        """Whether only this host can connect (bound to a loopback address)."""
        return is_loopback(self.bind)


def check_listen(bind: str, advertise: str) -> None:
    """The part of the rule that needs no network: a node bound to loopback only may not
    advertise a non-loopback IP address (peers would connect where nothing listens).
    Raises :class:`ConfigError` naming ``--bind``/``--advertise``."""
    if bind and is_loopback(bind) and advertise and _ip(advertise) and not is_loopback(advertise):
        raise ConfigError(
            f"this node would listen on loopback only (--bind {bind}) but advertise "
            f"{advertise} (--advertise): no peer could connect to it; bind an address peers "
            f"reach (--bind {advertise} or --bind '*'), or leave --advertise out"
        )


def listen_addresses(
    towers: Sequence[tuple[str, int]],
    bind: str = "",
    advertise: str = "",
    *,
    route: Route = route_address,
) -> Listen:
    """The rule of this module for a node whose towers are ``towers`` (``(host, port)`` of
    each tower's beacon-in socket), ``bind``/``advertise`` as given ("" when not).

    Raises :class:`ConfigError` when a node bound to loopback would advertise another
    address, or when ``bind`` is not given and a tower has no route (the node could not
    choose where to listen: ``--bind`` says)."""
    check_listen(bind, advertise)
    sources: dict[str, str] = {}
    problems: list[str] = []
    for host, port in towers:
        try:
            sources[f"{host}:{port}"] = route(host, port)
        except ConfigError as exc:
            problems.append(str(exc))
    if bind:
        chosen = "127.0.0.1" if bind.lower() == "localhost" else bind
        why = "--bind"
    elif problems:
        raise ConfigError(
            f"{problems[0]}; cannot choose where to listen (the address this host reaches "
            "its tower from): give --bind ADDRESS (bind, bind_host=)"
        )
    elif len(set(sources.values())) == 1:
        chosen = next(iter(sources.values()))
        why = f"the address this host reaches tower {', '.join(sources)} from"
    else:
        chosen = "*"
        why = "towers reached from several addresses: " + ", ".join(
            f"{tower} from {source}" for tower, source in sources.items()
        )
    shown = advertise or ("" if every_interface(chosen) else chosen)
    off_loopback = {t: s for t, s in sources.items() if not is_loopback(s)}
    warnings: list[str] = []
    if off_loopback and is_loopback(chosen):
        tower, source = next(iter(off_loopback.items()))
        warnings.append(
            f"this node listens on loopback only ({chosen}) while it reaches tower {tower} "
            f"from {source}: nodes on other hosts cannot connect to it (--bind {source} or "
            "leave --bind out)"
        )
    elif off_loopback and shown and is_loopback(shown):
        tower, source = next(iter(off_loopback.items()))
        warnings.append(
            f"this node advertises {shown} (--advertise) while it reaches tower {tower} from "
            f"{source}: nodes on other hosts would connect to themselves (--advertise {source} "
            "or leave --advertise out)"
        )
    return Listen(chosen, shown, why, tuple(warnings))


__all__ = [
    "Listen",
    "Route",
    "check_listen",
    "every_interface",
    "is_loopback",
    "listen_addresses",
    "route_address",
]
