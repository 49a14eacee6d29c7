"""What a peer may tell us to connect to: one rule for hosts and ``tcp://host:port`` endpoints.

A beacon's host and a forwarded endpoint come from other machines, and ZeroMQ raises (in the
thread that calls ``connect``) for anything it cannot parse: ``my host``, ``*``, ``ipc://x``,
non-ASCII bytes, port 0 or 70000. One such beacon used to kill the runner of every node in
the cluster. The rule here is applied where a peer's word enters (the tower rewriting a
beacon, :class:`~dafka.node.Discovery` taking a forwarded endpoint) and where a user
advertises a host (``TransportConfig.advertised_host``), so that all three agree.

Accepted hosts: an IPv4 dotted quad, an IPv6 literal in brackets, or a DNS name (letters,
digits, ``-`` and ``.``, labels of 1-63 characters, 253 at most). Ports: 1..65535.
"""

from __future__ import annotations

import ipaddress
import re

MAX_HOST = 253
_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)\Z")


def host_problem(host: str) -> str | None:
    """Why ``host`` cannot be connected to over TCP, or ``None`` if it can."""
    if not host:
        return "is empty"
    if len(host) > MAX_HOST:
        return f"is {len(host)} characters long (at most {MAX_HOST})"
    if host.startswith("["):
        if not host.endswith("]"):
            return "is an IPv6 literal without its closing ]"
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return "is not an IPv6 address"
        return None
    if not host.isascii():
        return "is not ASCII"
    labels = host.split(".")
    if all(label.isdigit() for label in labels):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return "is not an IPv4 address"
        return None
    if not all(_LABEL.match(label) for label in labels):
        return "is not an IP address or a DNS name"
    return None


def port_problem(port: int) -> str | None:
    """Why ``port`` cannot be connected to, or ``None``."""
    return None if 0 < port < 65536 else f"port {port} is outside 1..65535"


def endpoint_problem(endpoint: str) -> str | None:
    """Why ``endpoint`` is not a ``tcp://host:port`` we may connect to, or ``None``."""
    if not endpoint.startswith("tcp://"):
        return "is not a tcp:// endpoint"
    host, colon, port = endpoint[6:].rpartition(":")
    if not colon:
        return "has no port"
    if not port.isascii() or not port.isdigit() or len(port) > 5:  # "²" is a digit, not int
        return f"port {port[:16]!r} is not a number"
    problem = port_problem(int(port))
    if problem is not None:
        return problem
    problem = host_problem(host)
    return None if problem is None else f"host {host[:64]!r} {problem}"


__all__ = ["endpoint_problem", "host_problem", "port_problem"]
