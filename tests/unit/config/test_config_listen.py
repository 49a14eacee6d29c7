"""Issue 24: one rule for where a node listens and what it advertises.

A producer bound to 127.0.0.1 (the command line's default) was announced at the address
its tower saw (10.9.0.2), where nothing listened: no store on another host could connect,
and nothing said so. The rule (``dafka.config.listen_addresses``): unless told, a node
listens on the local address of its route to the towers and advertises that address; a
node listening on loopback only never advertises another address. Routes are given here by
a table (``route=``), as a host with those interfaces would find them.
"""

from __future__ import annotations

import pytest

from dafka.config import listen_addresses, route_address
from dafka.errors import ConfigError
from dafka.transport.config import TransportConfig


def _routes(table: dict[str, str]):  # type: ignore[no-untyped-def]
    def route(host: str, _port: int) -> str:
        if host not in table:
            raise ConfigError(f"no route to tower host {host!r}: unreachable")
        return table[host]

    return route


def test_a_tower_on_loopback_keeps_the_node_on_loopback() -> None:
    listen = listen_addresses([("127.0.0.1", 5556)])  # the real route of this host
    assert (listen.bind, listen.advertise, listen.warnings) == ("127.0.0.1", "127.0.0.1", ())
    assert listen.loopback_only


def test_a_remote_tower_makes_the_node_listen_where_it_reaches_the_tower() -> None:
    route = _routes({"10.9.0.1": "10.9.0.2"})
    listen = listen_addresses([("10.9.0.1", 5556)], route=route)
    assert (listen.bind, listen.advertise, listen.warnings) == ("10.9.0.2", "10.9.0.2", ())
    assert "10.9.0.1:5556" in listen.why


def test_a_loopback_bind_is_advertised_as_loopback_not_as_what_the_tower_sees() -> None:
    """The issue's producer: --bind 127.0.0.1 with a tower on another host. It used to
    advertise "" (the tower then announced 10.9.0.2, where nothing listened)."""
    route = _routes({"10.9.0.1": "10.9.0.2"})
    listen = listen_addresses([("10.9.0.1", 5556)], "127.0.0.1", route=route)
    assert (listen.bind, listen.advertise) == ("127.0.0.1", "127.0.0.1")
    (warning,) = listen.warnings
    assert "loopback only" in warning
    assert "--bind 10.9.0.2" in warning


def test_every_interface_lets_each_tower_announce_what_it_sees() -> None:
    listen = listen_addresses([("10.9.0.1", 5556)], "*", route=_routes({"10.9.0.1": "10.9.0.2"}))
    assert (listen.bind, listen.advertise, listen.warnings) == ("*", "", ())
    assert not listen.loopback_only


def test_towers_reached_from_two_addresses_make_the_node_listen_on_both() -> None:
    route = _routes({"10.9.0.1": "10.9.0.2", "192.168.5.1": "192.168.5.7"})
    listen = listen_addresses([("10.9.0.1", 5556), ("192.168.5.1", 5556)], route=route)
    assert (listen.bind, listen.advertise) == ("*", "")
    assert "10.9.0.1:5556 from 10.9.0.2" in listen.why


def test_advertise_given_is_kept_and_a_loopback_one_to_a_remote_tower_is_said() -> None:
    route = _routes({"10.9.0.1": "10.9.0.2"})
    named = listen_addresses([("10.9.0.1", 5556)], "*", "dafka-1.example", route=route)
    assert (named.bind, named.advertise, named.warnings) == ("*", "dafka-1.example", ())
    kept = listen_addresses([("10.9.0.1", 5556)], "*", "203.0.113.9", route=route)
    assert (kept.bind, kept.advertise, kept.warnings) == ("*", "203.0.113.9", ())
    loop = listen_addresses([("10.9.0.1", 5556)], "*", "127.0.0.1", route=route)
    (warning,) = loop.warnings
    assert "would connect to themselves" in warning
    assert "--advertise 10.9.0.2" in warning


def test_loopback_only_never_advertises_another_address() -> None:
    with pytest.raises(ConfigError, match=r"loopback only \(--bind 127.0.0.1\).*--advertise"):
        listen_addresses([("127.0.0.1", 5556)], "127.0.0.1", "10.0.0.5")
    with pytest.raises(ConfigError, match=r"--bind 10\.0\.0\.5"):
        TransportConfig.for_towers(
            "10.0.0.1:5556", bind_host="localhost", advertised_host="10.0.0.5"
        )


def test_no_route_to_the_tower_is_an_error_naming_bind_unless_bind_is_given() -> None:
    with pytest.raises(ConfigError, match=r"no route to tower host '10.9.0.1'.*--bind"):
        listen_addresses([("10.9.0.1", 5556)], route=_routes({}))
    given = listen_addresses([("10.9.0.1", 5556)], "10.9.0.2", route=_routes({}))
    assert (given.bind, given.advertise) == ("10.9.0.2", "10.9.0.2")


def test_route_address_finds_loopback_for_loopback() -> None:
    assert route_address("127.0.0.1", 5556) == "127.0.0.1"
    assert route_address("localhost", 5556) in ("127.0.0.1", "[::1]")


def test_the_transport_applies_the_rule() -> None:
    transport = TransportConfig.for_towers("127.0.0.1:5556")
    assert (transport.bind_host, transport.advertised_host) == ("", "")
    listen = transport.listen()
    assert (listen.bind, listen.advertise) == ("127.0.0.1", "127.0.0.1")
