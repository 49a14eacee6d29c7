"""Helpers of the transport tests: a loopback node configuration and a deadline wait."""

from __future__ import annotations

import time
from collections.abc import Callable

from dafka.transport.config import TransportConfig
from dafka.transport.tower import Tower


def loopback(tower: Tower) -> TransportConfig:
    """A node on 127.0.0.1 beaconing fast through ``tower``."""
    return TransportConfig(
        tower_sub_addresses=(tower.sub_endpoint,),
        tower_pub_addresses=(tower.pub_endpoint,),
        advertised_host="127.0.0.1",
        bind_host="127.0.0.1",
        beacon_interval=0.1,
        beacon_timeout=0.4,
    )


def wait_for(condition: Callable[[], bool], what: str, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)
