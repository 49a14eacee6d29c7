"""The settings of a client of a test cluster: every node on this machine's loopback.

One place for what the integration tests' clients share (each file had its own copy of the
dict): bound and advertised on 127.0.0.1, and beacons fast enough that a client finds the
cluster, and notices a peer gone, within a second."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from dafka.server import free_port_pair
from dafka.transport.config import TransportConfig
from dafka.transport.tower import Tower


def loopback_client(towers: str, ready_timeout: float, **fields: Any) -> dict[str, Any]:
    """Keyword arguments of a client (``Producer``, ``Consumer``, ``TransactionalProducer``,
    ``Admin``...) of the cluster at ``towers``: a beacon every 0.2 s, a peer gone after
    0.8 s; ``fields`` add to these or replace them."""
    return {
        "towers": towers,
        "advertised_host": "127.0.0.1",
        "bind_host": "127.0.0.1",
        "beacon_interval": 0.2,
        "beacon_timeout": 0.8,
        "ready_timeout": ready_timeout,
        **fields,
    }


@contextlib.contextmanager
def loopback_tower() -> Iterator[tuple[str, TransportConfig]]:
    """A tower in this process on two free loopback ports: its address (``127.0.0.1:PORT``)
    and a node's transport config for it, with the beacons of :func:`loopback_client`."""
    port = free_port_pair()
    tower = Tower(f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 1}")
    tower.start()
    try:
        yield (
            f"127.0.0.1:{port}",
            TransportConfig.for_towers(
                f"127.0.0.1:{port}",
                advertised_host="127.0.0.1",
                bind_host="127.0.0.1",
                beacon_interval=0.2,
                beacon_timeout=0.8,
            ),
        )
    finally:
        tower.stop()
