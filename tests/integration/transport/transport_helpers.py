"""Helpers of the transport tests: a loopback node configuration, a deadline wait, a runner
held in mid-turn, and the records a producer's runner sent."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from dafka.node import ProducerMachine
from dafka.transport.config import TransportConfig
from dafka.transport.runner import NodeRunner
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


@contextlib.contextmanager
def held_turn(runner: NodeRunner) -> Iterator[None]:
    """Hold ``runner`` in mid-turn for the block (posted work that waits for its end): what
    a caller does meanwhile finds the runner busy, as an ACK's turn would."""
    inside = threading.Event()
    release = threading.Event()

    def busy(_now: float) -> None:
        inside.set()
        release.wait(10)

    runner.post(busy)
    try:
        assert inside.wait(10), "the runner never ran the posted work"
        yield
    finally:
        release.set()


def records_sent(runner: NodeRunner, machines: Sequence[ProducerMachine]) -> int:
    """Messages a producer's runner sent but the HEADs (one a second may fall due in a turn
    a test holds open: counted, it made ``sent + 2``)."""
    return runner.statistics().sent - sum(m.statistics().heads_sent for m in machines)
