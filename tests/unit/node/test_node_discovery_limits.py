"""Discovery's bounds against strangers (issue 19): a flood of made-up ids beaconed through
a tower must not make a node track or connect to thousands of peers, must not keep real
newcomers out, and its memory must go once the flood ends."""

from __future__ import annotations

import pytest

from dafka.errors import ConfigError
from dafka.node import Connect, Disconnect, Discovery, DiscoveryConfig
from dafka.protocol import PeerEndpoint


def _connects(discovery: Discovery) -> list[Connect]:
    return [a for a in discovery.take_actions() if isinstance(a, Connect)]


def test_a_flood_of_fresh_ids_is_held_on_probation_and_real_newcomers_get_in() -> None:
    config = DiscoveryConfig(interval=1.0, timeout=4.0, new_peers_per_interval=10)
    discovery = Discovery({"ME"}, config)
    discovery.start(0.0)
    discovery.take_actions()
    now = 0.0
    connected = 0
    for second in range(5):  # 15,000 fresh ids a second, each on its own port
        for k in range(15_000):
            now = second + k / 15_000
            fake = f"FAKE-{second}-{k}"
            discovery.on_message(PeerEndpoint(fake, f"tcp://10.9.0.1:{1 + k % 60000}"), now)
            if k == 7_000:  # a real producer joins mid-flood, beaconing every interval
                discovery.on_message(PeerEndpoint("REAL", "tcp://10.0.0.2:4000"), now)
        discovery.on_timer(now)
        connected += len(_connects(discovery))
    stats = discovery.statistics()
    assert "REAL" in discovery.peers()  # admitted at its second beacon
    assert connected <= 5 * 10 + 1, connected  # a few fakes a second, never thousands
    assert stats.peers <= 5 * 10 + 1
    assert stats.on_probation > 70_000, stats
    assert stats.refused == 0, stats  # the probation table held 2 intervals of the flood
    for t in range(6, 12):  # the flood ends; REAL keeps beaconing
        discovery.on_message(PeerEndpoint("REAL", "tcp://10.0.0.2:4000"), float(t))
        discovery.on_timer(float(t))
    assert discovery.peers() == {"REAL": "tcp://10.0.0.2:4000"}
    assert not discovery._probation  # what the flood left is gone


def test_a_flood_ends_with_two_moments_to_give_memory_back() -> None:
    """When probation empties, and again once the ids it let in have expired (their
    connections closed): old code said the first only, so the memory of those connections
    stayed with the node."""
    config = DiscoveryConfig(interval=1.0, timeout=4.0, new_peers_per_interval=10)
    discovery = Discovery({"ME"}, config)
    discovery.start(0.0)
    for k in range(5_000):
        discovery.on_message(PeerEndpoint(f"FAKE-{k}", f"tcp://10.9.0.1:{1 + k}"), k / 5_000)
    moments = []
    for t in range(1, 30):  # the tower goes on: a real peer beacons every interval
        discovery.on_message(PeerEndpoint("REAL", "tcp://10.0.0.2:4000"), float(t))
        discovery.on_timer(float(t))
        if discovery.take_flood_ended():
            moments.append((t, len(discovery.peers())))
    assert len(moments) == 2, moments
    (first, admitted), (second, left) = moments
    assert admitted > 1
    assert left == 1  # the second comes once the admitted fakes are gone
    assert second - first >= 2 * config.timeout


def test_at_max_peers_a_new_id_is_refused_and_counted() -> None:
    config = DiscoveryConfig(interval=1.0, timeout=4.0, max_peers=3)
    discovery = Discovery({"ME"}, config)
    for k in range(5):
        discovery.on_message(PeerEndpoint(f"P{k}", f"tcp://10.0.0.{k + 1}:4000"), 0.0)
    assert sorted(discovery.peers()) == ["P0", "P1", "P2"]
    assert discovery.statistics().refused == 2
    assert discovery.refused == 2
    discovery.on_message(PeerEndpoint("P0", "tcp://10.0.0.1:4000"), 0.5)  # known: refreshed
    assert discovery.statistics().refused == 2


def test_a_small_cluster_is_admitted_at_the_first_beacon() -> None:
    discovery = Discovery({"ME"}, DiscoveryConfig())
    for k in range(20):
        discovery.on_message(PeerEndpoint(f"P{k}", f"tcp://10.0.0.{k + 1}:4000"), 0.0)
    assert len(_connects(discovery)) == 20


@pytest.mark.parametrize("key", ["max_peers", "new_peers_per_interval", "max_probation"])
def test_the_bounds_are_validated(key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        DiscoveryConfig(**{key: 0})


def test_known_ids_beaconed_from_more_endpoints_take_no_connections_beyond_max_peers() -> None:
    """Since a node id may have several live endpoints (af850cf), a stranger who beacons the
    ids it hears from new endpoints got up to MAX_ENDPOINTS_PER_ID connections per id, none
    through the admission of new ids: 4 x max_peers. ``max_peers`` bounds the connections."""
    config = DiscoveryConfig(interval=1.0, timeout=4.0, max_peers=3)
    discovery = Discovery({"ME"}, config)
    connected: set[str] = set()

    def follow() -> None:
        for action in discovery.take_actions():
            if isinstance(action, Connect):
                connected.add(action.endpoint)
            elif isinstance(action, Disconnect):
                connected.discard(action.endpoint)

    for k in range(3):
        discovery.on_message(PeerEndpoint(f"P{k}", f"tcp://10.0.0.{k + 1}:4000"), 0.0)
    follow()
    for k in range(3):  # the stranger: each known id from three more endpoints
        for port in range(1, 4):
            discovery.on_message(PeerEndpoint(f"P{k}", f"tcp://10.9.0.1:{10 * k + port}"), 0.1)
            follow()
            assert len(connected) <= config.max_peers, connected
    assert sorted(discovery.peers()) == ["P0", "P1", "P2"]
    # at the bound a restart on another port is still connected at once (its old port goes)
    discovery.on_message(PeerEndpoint("P0", "tcp://10.0.0.1:4001"), 0.2)
    follow()
    assert "tcp://10.0.0.1:4001" in connected
    assert len(connected) == config.max_peers
