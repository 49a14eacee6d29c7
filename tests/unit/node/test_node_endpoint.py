"""Issue 8 item 2: one rule for what a peer may tell us to connect to.

Each case that used to kill the runner of every node in a cluster (``my host``, ``*``,
``ipc://x``, non-UTF-8, port 0 or 70000) is refused by the rule, by the tower, by the
discovery machine and by ``TransportConfig``.
"""

from __future__ import annotations

import pytest

from dafka.config import tower_endpoints
from dafka.errors import ConfigError
from dafka.node import Discovery, DiscoveryConfig, endpoint_problem, host_problem
from dafka.node.actions import Connect
from dafka.protocol import PeerEndpoint, Welcome
from dafka.transport.config import TransportConfig
from dafka.transport.tower import rewrite_beacon

BAD_HOSTS = ["my host", "*", "ipc://x", "\udcff\udcfe", "", "a" * 300, "1.2.3", "999.1.1.1", "-a"]
GOOD_HOSTS = ["127.0.0.1", "localhost", "node-1.example.org", "[::1]", "10.0.0.255"]


@pytest.mark.parametrize("host", BAD_HOSTS)
def test_bad_hosts_are_refused(host: str) -> None:
    assert host_problem(host) is not None
    assert endpoint_problem(f"tcp://{host}:5000") is not None


@pytest.mark.parametrize("host", GOOD_HOSTS)
def test_good_hosts_pass(host: str) -> None:
    assert host_problem(host) is None
    assert endpoint_problem(f"tcp://{host}:5000") is None


@pytest.mark.parametrize(
    "endpoint", ["ipc://x", "tcp://h:0", "tcp://h:70000", "tcp://h", "tcp://h:-1", "tcp://h:x"]
)
def test_bad_endpoints_are_refused(endpoint: str) -> None:
    assert endpoint_problem(endpoint) is not None


@pytest.mark.parametrize(
    "host", [b"my host", b"*", b"ipc://x", b"\xff\xfe", b"a" * 300, b"tcp://1.2.3.4"]
)
def test_the_tower_forwards_no_bad_host(host: bytes) -> None:
    assert rewrite_beacon([b"B", b"id", host, b"5000"], "10.0.0.1") is None


@pytest.mark.parametrize("port", [b"0", b"70000", b"-1", b"", b"00080", b"9" * 30])
def test_the_tower_forwards_no_bad_port(port: bytes) -> None:
    assert rewrite_beacon([b"B", b"id", b"127.0.0.1", port], None) is None


def test_the_tower_brackets_an_ipv6_peer_address() -> None:
    assert rewrite_beacon([b"B", b"id", b"", b"5000"], "::1") == [
        b"B",
        b"id",
        b"tcp://[::1]:5000",
    ]


def test_discovery_counts_and_ignores_a_bad_endpoint() -> None:
    discovery = Discovery(["me"], DiscoveryConfig(interval=1.0, timeout=4.0))
    discovery.on_message(Welcome(), 0.0)
    discovery.take_actions()
    for endpoint in ["tcp://my host:5000", "tcp://*:1", "ipc://x", "tcp://a:0", "tcp://a:70000"]:
        discovery.on_message(PeerEndpoint("peer", endpoint), 0.1)
    assert discovery.take_actions() == []
    assert discovery.statistics().rejected == 5
    assert "peer" in discovery.last_rejection
    discovery.on_message(PeerEndpoint("peer", "tcp://127.0.0.1:5000"), 0.2)
    assert Connect("peer", "tcp://127.0.0.1:5000") in discovery.take_actions()


@pytest.mark.parametrize("host", ["my host", "*", "ipc://x"])
def test_an_unreachable_advertised_host_is_a_config_error(host: str) -> None:
    with pytest.raises(ConfigError, match="advertised host"):
        TransportConfig(advertised_host=host)


def test_bind_host_is_checked_too() -> None:
    with pytest.raises(ConfigError, match="bind host"):
        TransportConfig(bind_host="not an ip")
    assert TransportConfig(bind_host="*").bind_host == "*"
    assert TransportConfig(advertised_host="127.0.0.1", bind_host="127.0.0.1")


@pytest.mark.parametrize("port", ["²", "٣", "5000²"])
def test_a_port_of_non_ascii_digits_is_refused_not_raised(port: str) -> None:
    """``str.isdigit`` takes "²" and "٣", ``int`` raises on the first: a tower's forwarded
    endpoint with such a port raised ValueError in the node's runner thread, a typed tower
    address a traceback."""
    assert endpoint_problem(f"tcp://127.0.0.1:{port}") is not None
    discovery = Discovery(["me"], DiscoveryConfig(interval=1.0, timeout=4.0))
    discovery.on_message(Welcome(), 0.0)
    discovery.take_actions()
    discovery.on_message(PeerEndpoint("peer", f"tcp://127.0.0.1:{port}"), 0.1)
    assert discovery.statistics().rejected == 1
    for towers in [f"h:{port}", f"h:{port}:5000", f"h:5000:{port}"]:
        with pytest.raises(ConfigError, match="expected host:port"):
            tower_endpoints(towers)
    config = TransportConfig(tower_sub_addresses=(f"tcp://127.0.0.1:{port}",))
    assert config.listen() is not None
