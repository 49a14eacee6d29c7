"""ClusterWatcher: the cluster as it announces itself, kept up to date in a thread.

The runner thread drives a :class:`~dafka.node.ClusterMachine` (its data PUB is an XPUB,
so that it sees who subscribes); after every turn in which the view changed it publishes a
fresh :class:`ClusterSnapshot` (the view plus every peer's endpoint from the beacons), which
:meth:`ClusterWatcher.snapshot` returns without a round-trip to that thread. This is what
``dafka status``, ``dafka topics`` and ``dafka top`` read.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from dafka.client._watcher import Watcher
from dafka.node import ClusterMachine, ClusterView
from dafka.protocol import new_node_id
from dafka.transport.config import TransportConfig
from dafka.transport.runner import DropInbound, Identity, NodeRunner


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """A :class:`ClusterView` with where each peer listens and when it was taken."""

    view: ClusterView
    endpoints: dict[str, str] = field(default_factory=dict)
    """Node id -> ``tcp://host:port`` from its beacon."""
    taken: float = 0.0
    """``time.monotonic()`` when the view last changed."""


def listening_first(transport: TransportConfig) -> TransportConfig:
    """Connect to the nodes already there before they learn of us (``listen_first``): a
    store asks a new peer for the heads of every topic it holds once, at once, and that
    question is how a topic without live producers or consumers is found. Two beacon
    intervals (every node beacons once in that time) and at least 1 s (time for our SUB to
    connect to each of them and subscribe, also on a loaded machine)."""
    if transport.listen_first > 0:
        return transport
    return dataclasses.replace(transport, listen_first=max(1.0, 2 * transport.beacon_interval))


class ClusterWatcher(Watcher[ClusterSnapshot]):
    """``with ClusterWatcher(transport) as w: w.wait_settled(); print(w.snapshot())``

    ``drop_inbound``: the runner's fault injector (tests: lose a store's first answer).
    """

    def __init__(
        self,
        transport: TransportConfig | None = None,
        topics: Iterable[str] = (),
        *,
        refresh: float = 0.5,
        ready_timeout: float | None = 10.0,
        drop_inbound: DropInbound | None = None,
    ) -> None:
        self.node_id = new_node_id()
        self._machine = ClusterMachine(self.node_id, tuple(topics), refresh)
        super().__init__(ClusterSnapshot(self._machine.view(), {}, time.monotonic()))
        self._version = -1
        self._peers = 0
        joining = listening_first(transport or TransportConfig())
        self.listen_first = joining.listen_first
        """Seconds before the first beacon: answers come after it."""
        self._runner = NodeRunner(
            self._machine,
            [Identity(self.node_id, xpub=True)],
            joining,
            after_turn=self._after_turn,
            drop_inbound=drop_inbound,
            name="cluster",
        )
        self._runner.start(ready_timeout)

    def snapshot(self) -> ClusterSnapshot:
        """The latest view (no wait)."""
        return self._snapshot

    def wait_settled(
        self, quiet: float = 0.5, timeout: float = 5.0, at_least: float = 0.0
    ) -> ClusterSnapshot:
        """Wait until the view is complete (every live store asked twice, see
        :attr:`ClusterView.complete`) and did not change for ``quiet`` seconds, at least
        ``at_least`` seconds after start, at most ``timeout`` seconds; returns the latest
        snapshot (at the timeout, complete or not)."""
        return self._wait_quiet(quiet, timeout, at_least, lambda: self._snapshot.view.complete)

    # -- runner thread ---------------------------------------------------------------------

    def _after_turn(self, now: float) -> None:
        del now
        machine = self._machine
        peers = self._runner.discovery.peers()
        if machine.version == self._version and len(peers) == self._peers:
            return
        self._version = machine.version
        self._peers = len(peers)
        snapshot = ClusterSnapshot(machine.view(), peers, time.monotonic())
        self._publish(snapshot, snapshot.taken)


__all__ = ["ClusterSnapshot", "ClusterWatcher"]
