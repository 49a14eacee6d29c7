"""Discovery: the table of peers heard through the towers, as a pure machine.

Theory (PROTOCOL.md section 3). A node beacons once it got the tower's welcome, then every
``beacon/interval``, and again at once when it discovers a new peer (so the newcomer learns
about us without waiting a whole interval). The tower forwards every beacon as
``B | node id | tcp://host:port``; a new endpoint means: connect the data SUB to it. Each
beacon refreshes its endpoint's expiry (``beacon/timeout``); an expired endpoint is
disconnected. Our own ids (a store has two) are ignored. Two ids sharing an endpoint share one
connection (ZeroMQ would deliver twice over two).

*One id, several endpoints.* Two live runs of one producer name share their node ids (a zombie
and its successor, docs/guarantees.md "A fenced producer"; two instances of one transactional
id). Each endpoint of an id is connected, and each expires on its own when its beacons stop: a
table that followed whichever endpoint beaconed last moved the data SUB back and forth every
beacon, and the successor's records and HEADs, sent while the SUB was on the zombie's side or
re-subscribing, were lost for as long as both lived (a transactional start's log record waited
past its 5 s delivery timeout, 1 run in 36 at load 12). A node restarted on another port is
connected at once; its old endpoint is dropped when it expires. At most
``MAX_ENDPOINTS_PER_ID`` endpoints per id are kept (a stranger beaconing one id from many
endpoints): a new one beyond replaces the one heard least recently. ``max_peers`` bounds the
endpoints tracked (connections), not the ids: at that bound a known id's new endpoint
replaces its own least recently heard one, as before ids had several.

*The tower is for discovery, not for data.* Expiry means "this peer stopped beaconing", which
we can only know while the towers are alive: when every tower is gone, beacons stop for
everyone at once, and expiring peers then would cut producers, stores and consumers apart
although they still talk. So a peer is expired only if a tower was heard (our own beacon's
echo, any peer's, the welcome) more than an interval after the peer's last beacon; otherwise
its expiry is re-armed. While the towers are down, connected peers keep their connections
(ZeroMQ reconnects by itself if one restarts on the same port); once a tower is back, a
peer that really left is expired within about two timeouts.

An endpoint that is not a ``tcp://host:port`` ZeroMQ can connect to (see
:mod:`dafka.node._endpoint`) is a peer's mistake or malice: it is counted (``rejected``) and
ignored, never turned into a ``Connect`` that would raise in the runner.

*Strangers* (issue 19): anyone who reaches a tower can beacon any number of made-up ids, and
every node would connect to each. Three bounds, each counted:

* at most ``max_peers`` peer endpoints are tracked (and connected) at once: a new id beyond
  is refused (``refused``) until a tracked one expires, and a known id's new endpoint
  replaces its own least recently heard one (a stranger beaconing the ids it hears from
  several endpoints each would otherwise take ``MAX_ENDPOINTS_PER_ID`` times as many
  connections, none of them through the admission below);
* at most ``new_peers_per_interval`` new ids per beacon interval are admitted at their first
  beacon; beyond (a flood of fresh ids, 15,000 a second in the scenario that stalled a
  cluster), a new id waits *on probation* for its second beacon within two intervals - a real
  node beacons every interval, a flood's one-shot ids never come back (``on_probation``);
* at most ``max_probation`` ids wait on probation; more are dropped (``refused``), and the
  table is rebuilt when it empties so that its memory returns after a flood.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dafka.node._config import DiscoveryConfig
from dafka.node._endpoint import endpoint_problem
from dafka.node.actions import Action, Connect, Disconnect, SendBeacon
from dafka.protocol import Beacon, DiscoveryMessage, PeerEndpoint, Welcome

MAX_ENDPOINTS_PER_ID = 4
"""Endpoints kept per node id (the module docstring: live runs of one name share ids)."""


@dataclass(frozen=True, slots=True)
class DiscoveryStatistics:
    """Counters of a :class:`Discovery` (a snapshot)."""

    peers: int
    discovered: int
    expired: int
    beacons_sent: int
    ignored: int
    rejected: int = 0
    """Forwarded endpoints refused because nobody can connect to them."""
    kept: int = 0
    """Times a silent peer was kept because the towers were silent too."""
    refused: int = 0
    """New ids refused: ``max_peers`` tracked already, or the probation table full."""
    on_probation: int = 0
    """New ids heard once during a flood of new ids, not (yet) admitted."""


class Discovery:
    """Pure peer table: beacons and the welcome in, Connect/Disconnect/SendBeacon out."""

    def __init__(self, own_ids: Iterable[str], config: DiscoveryConfig | None = None) -> None:
        self.config = config or DiscoveryConfig()
        self._own = frozenset(own_ids)
        self._out: list[Action] = []
        self._peers: dict[str, dict[str, float]] = {}
        """node id -> its endpoints -> expiry, the one heard last at the end."""
        self._tracked = 0
        """Endpoints in ``_peers`` (of every id): what ``max_peers`` bounds."""
        self._users: dict[str, int] = {}
        self._beacon_due: float | None = None
        self._beacon_queued = False
        self._discovered = 0
        self._expired = 0
        self._beacons = 0
        self._ignored = 0
        self._rejected = 0
        self._tower_heard = float("-inf")
        self._kept = 0
        self._silent_until = float("-inf")
        self._probation: dict[str, float] = {}
        self._probation_peak = 0
        self._probation_sweep = float("-inf")
        self._flood_ended = False
        self._flood_settles: float | None = None  # when the peers a flood let in are gone
        self._window_end = float("-inf")
        self._window_admitted = 0
        self._refused = 0
        self._on_probation = 0
        self.last_rejection = ""
        """Why the last endpoint was refused (for the runner's rate-limited log line)."""

    @property
    def started(self) -> bool:
        """Whether the tower's welcome arrived (or :meth:`start` was called)."""
        return self._beacon_due is not None

    def start(self, now: float) -> None:
        """Begin beaconing: once now, then every interval. Idempotent."""
        if self._beacon_due is None:
            delay = self.config.listen_first
            if delay > 0:  # silent until then: on_timer sends the first beacon
                self._silent_until = now + delay
                self._beacon_due = now + delay
                return
            self._beacon()
            self._beacon_due = now + self.config.interval

    @property
    def rejected(self) -> int:
        """How many forwarded endpoints were refused so far."""
        return self._rejected

    def peers(self) -> dict[str, str]:
        """Known peers: node id -> the endpoint it beaconed from last."""
        return {node_id: next(reversed(endpoints)) for node_id, endpoints in self._peers.items()}

    def on_message(self, message: DiscoveryMessage, now: float) -> None:
        """A message from the beacon SUB (the tower's XPUB)."""
        self._tower_heard = now
        if isinstance(message, Welcome):
            self.start(now)
        elif isinstance(message, PeerEndpoint):
            problem = endpoint_problem(message.endpoint)
            if problem is not None:
                self._rejected += 1
                self.last_rejection = f"{message.node_id[:64]!r}: endpoint {problem}"
                return
            self._seen(message.node_id, message.endpoint, now)
        else:  # a raw Beacon is what nodes send, not what towers forward
            assert isinstance(message, Beacon)
            self._ignored += 1

    def on_timer(self, now: float) -> None:
        timeout = self.config.timeout
        heard_after = self._tower_heard - self.config.interval  # a beacon older is stale
        expired = []
        for node_id, endpoints in self._peers.items():
            for endpoint, expiry in endpoints.items():
                if expiry > now:
                    continue
                if expiry - timeout < heard_after:
                    expired.append((node_id, endpoint))
                else:  # the towers went quiet too: no proof that this peer left
                    endpoints[endpoint] = now + timeout
                    self._kept += 1
        for node_id, endpoint in expired:
            endpoints = self._peers[node_id]
            del endpoints[endpoint]
            self._tracked -= 1
            if not endpoints:
                del self._peers[node_id]
            self._expired += 1
            self._release(node_id, endpoint)
        self._expire_probation(now)
        if self._flood_settles is not None and now >= self._flood_settles:
            self._flood_settles = None
            self._flood_ended = True  # the flood's admitted peers have expired too
        due = self._beacon_due
        if due is not None and due <= now:
            self._beacon()
            due += self.config.interval
            self._beacon_due = due if due > now else now + self.config.interval

    def next_deadline(self) -> float | None:
        deadlines = [min(endpoints.values()) for endpoints in self._peers.values()]
        if self._beacon_due is not None:
            deadlines.append(self._beacon_due)
        return min(deadlines, default=None)

    def take_actions(self) -> list[Action]:
        out = self._out
        self._out = []
        self._beacon_queued = False
        return out

    def statistics(self) -> DiscoveryStatistics:
        return DiscoveryStatistics(
            peers=len(self._peers),
            discovered=self._discovered,
            expired=self._expired,
            beacons_sent=self._beacons,
            ignored=self._ignored,
            rejected=self._rejected,
            kept=self._kept,
            refused=self._refused,
            on_probation=self._on_probation,
        )

    @property
    def refused(self) -> int:
        """How many new ids were refused so far (a bound reached)."""
        return self._refused

    def _admit(self, node_id: str, now: float) -> bool:
        """Whether a new id becomes a peer now (the bounds of the module docstring)."""
        if self._tracked >= self.config.max_peers:
            self._refused += 1
            self.last_rejection = f"{node_id[:64]!r}: {self.config.max_peers} peers tracked"
            return False
        if now >= self._window_end:
            self._window_end = now + self.config.interval
            self._window_admitted = 0
        heard = self._probation.pop(node_id, None)
        if heard is not None and heard > now:
            return True
        if self._window_admitted < self.config.new_peers_per_interval:
            self._window_admitted += 1
            return True
        if len(self._probation) >= self.config.max_probation:
            self._refused += 1
            self.last_rejection = f"{node_id[:64]!r}: {self.config.max_probation} ids on probation"
            return False
        config = self.config
        self._probation[node_id] = now + min(config.timeout, 2 * config.interval)
        self._probation_peak = max(self._probation_peak, len(self._probation))
        self._on_probation += 1
        return False

    def _expire_probation(self, now: float) -> None:
        if not self._probation or now < self._probation_sweep:
            return
        self._probation_sweep = now + self.config.interval
        for node_id in [n for n, until in self._probation.items() if until <= now]:
            del self._probation[node_id]
        if self._probation_peak > 1024 and len(self._probation) < self._probation_peak // 4:
            self._probation = dict(self._probation)  # a dict never shrinks by deleting
            self._probation_peak = len(self._probation)
            if not self._probation:
                self._flood_ended = True
                self._flood_settles = now + 2 * self.config.timeout + self.config.interval

    def take_flood_ended(self) -> bool:
        """True once after a flood of new ids ended (its probation table emptied), and once
        more two timeouts later, when the few ids it let in have expired and their
        connections are closed: the moments for the runner to give memory back
        (``dafka.transport.memory``; with the first trim only, a producer stayed ~35 %
        above its RSS before a 30 s flood, with the second within 12 %)."""
        ended, self._flood_ended = self._flood_ended, False
        return ended

    def _seen(self, node_id: str, endpoint: str, now: float) -> None:
        if node_id in self._own:
            return
        expiry = now + self.config.timeout
        endpoints = self._peers.get(node_id)
        if endpoints is None:
            if not self._admit(node_id, now):
                return
            endpoints = self._peers[node_id] = {}
        elif endpoint in endpoints:
            del endpoints[endpoint]  # re-inserted last: the one heard last
            endpoints[endpoint] = expiry
            return
        elif len(endpoints) >= MAX_ENDPOINTS_PER_ID or self._tracked >= self.config.max_peers:
            oldest = next(iter(endpoints))
            del endpoints[oldest]
            self._tracked -= 1
            self._release(node_id, oldest)
        endpoints[endpoint] = expiry
        self._tracked += 1
        self._discovered += 1
        users = self._users.get(endpoint, 0)
        self._users[endpoint] = users + 1
        if users == 0:
            self._out.append(Connect(node_id, endpoint))
        if self._beacon_due is not None and now >= self._silent_until:
            self._beacon()

    def _release(self, node_id: str, endpoint: str) -> None:
        users = self._users[endpoint] - 1
        if users:
            self._users[endpoint] = users
        else:
            del self._users[endpoint]
            self._out.append(Disconnect(node_id, endpoint))

    def _beacon(self) -> None:
        if not self._beacon_queued:  # one beacon per drained batch is enough
            self._beacon_queued = True
            self._beacons += 1
            self._out.append(SendBeacon())


__all__ = ["MAX_ENDPOINTS_PER_ID", "Discovery", "DiscoveryStatistics"]
