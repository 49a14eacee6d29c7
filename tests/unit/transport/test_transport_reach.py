"""Issue 24: a node whose peers cannot connect back says so, naming --bind/--advertise.

Every peer's data SUB subscribes to a prefix naming its own id; the runner's XPUBs see those
subscriptions arrive (``ReachWatch.notice``). A peer found through the towers
(``found``) whose id never shows up within the grace cannot reach this node: one WARNING
line, ``peers_unreached`` counted. Driven here with explicit times, as the runner's loop
drives it.
"""

from __future__ import annotations

import logging

import pytest

from dafka.config import Listen
from dafka.transport._reach import ReachWatch, reach_grace
from dafka.transport._stats import RunnerStats

LISTEN = Listen("127.0.0.1", "127.0.0.1", "--bind")


def _watch(stats: RunnerStats) -> ReachWatch:
    return ReachWatch("producer-t", LISTEN, [40000], 3.0, stats)


def test_a_peer_that_subscribes_is_reached() -> None:
    stats = RunnerStats()
    watch = _watch(stats)
    watch.found("STORE-W", "tcp://10.9.0.1:5000", now=0.0)
    assert (stats.peers_awaited, watch.next_deadline()) == (1, 3.0)
    watch.notice(b"DSTORE-W")
    assert (stats.peers_awaited, stats.peers_unreached, watch.next_deadline()) == (0, 0, None)


def test_a_peer_silent_past_its_grace_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    stats = RunnerStats()
    watch = _watch(stats)
    watch.found("STORE-W", "tcp://10.9.0.1:5000", now=0.0)
    watch.found("STORE-R", "tcp://10.9.0.1:5001", now=1.0)
    with caplog.at_level(logging.WARNING):
        watch.on_timer(2.9)
        assert caplog.records == []
        watch.on_timer(3.0)
        watch.on_timer(4.0)
    assert (stats.peers_awaited, stats.peers_unreached) == (0, 2)
    first, second = (r.getMessage() for r in caplog.records)
    assert "1 peer(s)" in first
    assert "STORE-W at tcp://10.9.0.1:5000" in first
    assert "--bind" in first
    assert "--advertise" in first
    assert "127.0.0.1:40000" in first
    assert "STORE-R" in second
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        watch.found("STORE-W", "tcp://10.9.0.1:5000", now=10.0)  # found again: said already
        watch.on_timer(20.0)
        watch.notice(b"WSTORE-R")
    assert [r.getMessage() for r in caplog.records] == [
        "producer-t: STORE-R at tcp://10.9.0.1:5001 connected back after all"
    ]
    assert stats.peers_unreached == 1


def test_a_subscription_before_the_beacon_counts_and_a_lost_peer_is_forgotten() -> None:
    stats = RunnerStats()
    watch = _watch(stats)
    watch.notice(b"KSTORE-W")
    watch.found("STORE-W", "tcp://10.9.0.1:5000", now=0.0)
    watch.found("GONE", "tcp://10.9.0.1:5002", now=0.0)
    watch.lost("GONE", "tcp://10.9.0.1:5003")  # another endpoint of the id: still awaited
    watch.on_timer(1.0)
    assert stats.peers_awaited == 1
    watch.lost("GONE", "tcp://10.9.0.1:5002")
    watch.on_timer(10.0)
    assert (stats.peers_awaited, stats.peers_unreached) == (0, 0)


def test_the_grace_grows_with_the_beacon_interval() -> None:
    assert reach_grace(0.1) == 3.0
    assert reach_grace(5.0) == 15.0
