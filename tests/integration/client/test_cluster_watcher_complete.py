"""A watcher's settled view is complete: a store's first answer lost is asked again.

``dafka top --once`` printed a healthy store holding 0 partitions in 2 of 7 runs: the first
CONSUMER-HELLO to a store races the watcher's subscription to the probe id it answers to,
and a settle that ended before the next refresh round showed the lost answer as "holds
nothing". Here the store's first answer to each probe is dropped on purpose (the runner's
fault injector) and the refresh is slower than the quiet time, so the old settle returned
the incomplete view every time; now it waits until every live store was asked twice.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

from dafka import LocalCluster, Producer
from dafka.client import ClusterWatcher

_PROBE_ANSWER = re.compile(rb"E([0-9A-F]{32}\.\d+)")
"""A DIRECT-HEAD to a probe id (watcher id + ``.N``): its frame starts with ``E`` + the id."""


class _LoseEarlyAnswers:
    """Drops every answer to a probe id until ``until`` (monotonic): the answers to the
    first hello (sent when the store is discovered, about ``listen_first`` = 1 s in), never
    those to the refresh round at ``REFRESH`` s. The race itself loses that first answer
    most of the time (measured: the first probe answer came at the refresh round); the hook
    makes it every time."""

    def __init__(self, until: float) -> None:
        self.until = until
        self.dropped = 0

    def __call__(self, frames: Sequence[bytes]) -> bool:
        if _PROBE_ANSWER.match(frames[0]) is None or time.monotonic() >= self.until:
            return False
        self.dropped += 1
        return True


REFRESH = 3.0


def test_a_lost_first_answer_is_asked_again_before_the_view_settles(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, stores=1, beacon_interval=0.2) as cluster:
        with Producer("t", towers=cluster.towers, name="w", beacon_interval=0.2) as producer:
            producer.send(b"x").result(30)
        lose = _LoseEarlyAnswers(time.monotonic() + REFRESH - 0.5)
        with ClusterWatcher(
            cluster.transport, ["t"], refresh=REFRESH, drop_inbound=lose
        ) as watcher:
            snapshot = watcher.wait_settled(
                quiet=0.5, timeout=20.0, at_least=watcher.listen_first + 0.5
            )
        (store,) = [s for s in snapshot.view.stores if s.live]
        assert store.heads == {("t", "w.0"): 0}
        assert snapshot.view.complete
