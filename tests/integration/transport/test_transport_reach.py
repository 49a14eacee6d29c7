"""Issue 24: peers that cannot connect back are said, with the figures, never waited on.

On one host a wrong advertised address is easy to make: a producer bound to 127.0.0.1 that
advertises 127.0.0.3 (any 127/8 address is this host's loopback, but nothing listens on
that one). The store finds the producer and cannot connect to it, so the producer's records
would never be stored; the producer's runner says so within the grace, naming --bind and
--advertise, and counts it. A producer that advertises its own address is reached by the
same store. (The same mistake across hosts: tests/hosts/.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from dafka import Producer
from dafka.config import tower_spec
from dafka.errors import ConfigError
from dafka.server import StoreNode
from dafka.transport.config import TransportConfig
from dafka.transport.tower import Tower
from tests.integration.transport.transport_helpers import loopback, wait_for


@pytest.fixture
def store(tower: Tower, tmp_path: Path) -> Iterator[StoreNode]:
    node = StoreNode(tmp_path / "store", loopback(tower))
    node.start()
    yield node
    node.stop()


def _producer(tower: Tower, advertise: str, bind: str = "127.0.0.1") -> Producer:
    return Producer(
        "reach",
        towers=tower_spec(tower.sub_endpoint, tower.pub_endpoint),
        bind_host=bind,
        advertised_host=advertise,
        beacon_interval=0.1,
    )


def test_a_producer_no_store_can_reach_says_so(
    tower: Tower, store: StoreNode, caplog: pytest.LogCaptureFixture
) -> None:
    producer = _producer(tower, "127.0.0.3")
    try:
        with caplog.at_level(logging.WARNING, "dafka"):
            producer.send(b"lost?")
            wait_for(lambda: producer.transport_statistics().peers_unreached >= 2, "the warning")
        assert producer.flush(timeout=0.5) == 1  # nothing was stored: no store hears it
    finally:
        producer.close(timeout=0)
    said = [r.getMessage() for r in caplog.records if "did not connect back" in r.getMessage()]
    assert said, [r.getMessage() for r in caplog.records]
    assert "127.0.0.3" in said[0]
    assert "--bind" in said[0]
    assert "--advertise" in said[0]


def test_a_producer_its_stores_reach_is_not_suspected(tower: Tower, store: StoreNode) -> None:
    with _producer(tower, "") as producer:
        producer.send(b"stored").result(timeout=10)
        stats = producer.transport_statistics()
        wait_for(lambda: producer.transport_statistics().peers_awaited == 0, "both store ids")
        assert producer.transport_statistics().peers_unreached == 0, stats


def test_the_rule_is_checked_before_anything_starts(tower: Tower) -> None:
    config = TransportConfig.for_towers(tower_spec(tower.sub_endpoint, tower.pub_endpoint))
    assert config.listen().bind == "127.0.0.1"
    with pytest.raises(ConfigError, match="loopback only"):
        _producer(tower, "10.1.2.3")


def test_a_default_node_on_loopback_warns_of_nothing(
    tower: Tower, store: StoreNode, caplog: pytest.LogCaptureFixture
) -> None:
    """Listening where the tower is reached (here loopback) is not "beyond loopback": the
    plaintext warning is for nodes that really listen on another interface."""
    with caplog.at_level(logging.WARNING, "dafka"), _producer(tower, "", bind="") as producer:
        producer.send(b"quiet").result(timeout=10)
    assert [r.getMessage() for r in caplog.records] == []
