"""Discovery: welcome, beacons, new peers, moves, expiry, shared endpoints."""

from __future__ import annotations

import pytest

from dafka.errors import ConfigError
from dafka.node import Connect, Disconnect, Discovery, DiscoveryConfig, SendBeacon
from dafka.node._discovery import MAX_ENDPOINTS_PER_ID
from dafka.protocol import Beacon, PeerEndpoint, Welcome
from dafka.testing import ManualClock


def make() -> tuple[Discovery, ManualClock]:
    return Discovery({"ME", "MY-READER"}, DiscoveryConfig(interval=1.0, timeout=4.0)), ManualClock()


def test_beacons_start_with_the_welcome_then_every_interval() -> None:
    discovery, clock = make()
    assert not discovery.started
    assert discovery.next_deadline() is None
    discovery.on_message(Welcome(), clock.now)
    discovery.on_message(Welcome(), clock.now)  # idempotent
    assert discovery.take_actions() == [SendBeacon()]
    assert clock.jump([discovery])
    assert (clock.now, discovery.take_actions()) == (1.0, [SendBeacon()])
    clock.advance(5.5)  # a late driver: one beacon, then back on a regular period
    discovery.on_timer(clock.now)
    assert discovery.take_actions() == [SendBeacon()]
    assert discovery.next_deadline() == 7.5
    assert discovery.statistics().beacons_sent == 3


def test_new_peer_is_connected_and_answered_with_a_beacon_at_once() -> None:
    discovery, clock = make()
    discovery.start(clock.now)
    discovery.take_actions()
    discovery.on_message(PeerEndpoint("A", "tcp://10.0.0.1:4000"), clock.now)
    discovery.on_message(PeerEndpoint("B", "tcp://10.0.0.2:4000"), clock.now)
    discovery.on_message(PeerEndpoint("ME", "tcp://10.0.0.9:4000"), clock.now)  # ourselves
    assert discovery.take_actions() == [
        Connect("A", "tcp://10.0.0.1:4000"),
        SendBeacon(),  # one beacon for the whole batch
        Connect("B", "tcp://10.0.0.2:4000"),
    ]
    discovery.on_message(PeerEndpoint("A", "tcp://10.0.0.1:4000"), clock.now)  # refresh
    assert discovery.take_actions() == []
    assert discovery.peers() == {"A": "tcp://10.0.0.1:4000", "B": "tcp://10.0.0.2:4000"}


def test_peers_expire_unless_refreshed() -> None:
    discovery, clock = make()
    discovery.on_message(PeerEndpoint("A", "tcp://a:1"), clock.now)
    discovery.on_message(PeerEndpoint("B", "tcp://b:1"), clock.now)
    discovery.take_actions()
    clock.advance(3.0)
    discovery.on_message(PeerEndpoint("B", "tcp://b:1"), clock.now)
    clock.advance(1.0)
    discovery.on_timer(clock.now)
    assert discovery.take_actions() == [Disconnect("A", "tcp://a:1")]
    assert discovery.peers() == {"B": "tcp://b:1"}
    assert discovery.next_deadline() == 7.0
    clock.advance(2.5)
    discovery.on_message(PeerEndpoint("ME", "tcp://me:1"), clock.now)  # the tower is alive
    assert clock.jump([discovery])
    assert discovery.take_actions() == [Disconnect("B", "tcp://b:1")]
    assert discovery.statistics().expired == 2


def test_peers_are_kept_while_the_towers_are_silent_and_expire_once_one_is_back() -> None:
    """Issue 8 item 5: beacons stopping for everyone (the towers died) proves nothing."""
    discovery, clock = make()
    discovery.on_message(Welcome(), clock.now)
    discovery.on_message(PeerEndpoint("A", "tcp://a:1"), clock.now)
    discovery.take_actions()
    for _ in range(20):  # 20 s of silence: every tower is down
        clock.advance(1.0)
        discovery.on_timer(clock.now)
    assert not any(isinstance(a, Disconnect) for a in discovery.take_actions())
    assert discovery.peers() == {"A": "tcp://a:1"}
    assert discovery.statistics().kept > 0
    deadline = discovery.next_deadline()
    assert deadline is not None
    assert deadline > clock.now  # re-armed: no busy loop
    # A tower is back: we hear our own beacon, A does not beacon: A is expired.
    for _ in range(10):
        clock.advance(1.0)
        discovery.on_message(PeerEndpoint("ME", "tcp://me:1"), clock.now)
        discovery.on_timer(clock.now)
    assert Disconnect("A", "tcp://a:1") in discovery.take_actions()
    assert discovery.peers() == {}


def test_a_restarted_peer_on_a_new_port_is_connected_at_once_and_its_old_port_expires() -> None:
    discovery, clock = make()
    discovery.on_message(PeerEndpoint("ME", "tcp://me:1"), clock.now)  # the tower is alive
    discovery.on_message(PeerEndpoint("A", "tcp://a:1"), clock.now)
    discovery.take_actions()
    clock.advance(1.0)
    discovery.on_message(PeerEndpoint("A", "tcp://a:2"), clock.now)
    assert discovery.take_actions() == [Connect("A", "tcp://a:2")]
    assert discovery.peers() == {"A": "tcp://a:2"}
    for _ in range(4):  # only the new port beacons
        clock.advance(1.0)
        discovery.on_message(PeerEndpoint("ME", "tcp://me:1"), clock.now)
        discovery.on_message(PeerEndpoint("A", "tcp://a:2"), clock.now)
        discovery.on_timer(clock.now)
    assert discovery.take_actions() == [Disconnect("A", "tcp://a:1")]
    assert discovery.peers() == {"A": "tcp://a:2"}


def test_two_live_runs_of_one_id_are_both_connected_and_never_flap() -> None:
    """Two runs of one producer name (a zombie and its successor) share node ids. Before,
    each beacon moved the SUB to the endpoint heard last: a Disconnect and a Connect every
    beacon, and the successor's records sent meanwhile were lost."""
    discovery, clock = make()
    for _ in range(10):
        discovery.on_message(PeerEndpoint("ME", "tcp://me:1"), clock.now)
        discovery.on_message(PeerEndpoint("A", "tcp://old:1"), clock.now)
        discovery.on_message(PeerEndpoint("A", "tcp://new:1"), clock.now + 0.5)
        clock.advance(1.0)
        discovery.on_timer(clock.now)
    assert [a for a in discovery.take_actions() if not isinstance(a, SendBeacon)] == [
        Connect("A", "tcp://old:1"),
        Connect("A", "tcp://new:1"),
    ]
    assert discovery.statistics().discovered == 2


def test_an_id_keeps_at_most_a_few_endpoints_the_least_recently_heard_goes() -> None:
    discovery, clock = make()
    for port in range(1, MAX_ENDPOINTS_PER_ID + 1):
        discovery.on_message(PeerEndpoint("A", f"tcp://a:{port}"), clock.now)
    discovery.on_message(PeerEndpoint("A", "tcp://a:1"), clock.now)  # heard again: kept
    assert len(discovery.take_actions()) == MAX_ENDPOINTS_PER_ID
    discovery.on_message(PeerEndpoint("A", "tcp://a:99"), clock.now)
    assert discovery.take_actions() == [Disconnect("A", "tcp://a:2"), Connect("A", "tcp://a:99")]
    assert discovery.statistics().peers == 1


def test_ids_sharing_an_endpoint_share_one_connection() -> None:
    discovery, clock = make()
    discovery.on_message(PeerEndpoint("A", "tcp://x:1"), clock.now)
    discovery.on_message(PeerEndpoint("B", "tcp://x:1"), 2.0)
    assert discovery.take_actions() == [Connect("A", "tcp://x:1")]
    discovery.on_timer(4.0)  # A expires; B still uses the endpoint
    assert discovery.take_actions() == []
    discovery.on_message(PeerEndpoint("ME", "tcp://me:1"), 5.0)  # the tower is alive
    discovery.on_timer(6.0)
    assert discovery.take_actions() == [Disconnect("B", "tcp://x:1")]


def test_raw_beacons_are_ignored_and_config_is_validated() -> None:
    discovery, clock = make()
    discovery.on_message(Beacon("A", "", 4000), clock.now)
    assert discovery.take_actions() == []
    assert discovery.statistics().ignored == 1
    with pytest.raises(ConfigError):
        DiscoveryConfig(interval=0)
