"""Whether the peers found through the towers connect back: a mismatch said, never waited on.

Discovery is symmetric: each node connects its data SUB to every endpoint the towers
announce, and every SUB (ours, the C reference's) subscribes to at least one prefix that
names its own node id (``K``/``F`` + a producer's, ``D``/``E``/``L`` + a consumer's or a
store writer's, ``W`` + a store reader's). Every data PUB of a runner is an XPUB, so the
runner sees those subscriptions arrive: a peer whose id shows up has reached this node. A
peer heard in beacons for ``grace`` seconds whose id never showed up cannot reach the address
this node advertises - a producer whose stores never take its records, a consumer no store
answers, a ``dafka status`` that would print zeros (issue 24). That is said in one WARNING
line naming ``--bind``/``--advertise`` (a later peer that also fails: one more line), and
counted in ``RunnerStats.peers_unreached``; ``peers_awaited`` counts the peers still inside
their grace. A peer that connected once is never suspected again: a later silence is a
partition, not a mismatch (ZeroMQ reconnects by itself).
"""

from __future__ import annotations

import logging

from dafka.config import Listen
from dafka.transport._stats import RunnerStats

log = logging.getLogger("dafka.transport.runner")

_SHOWN = 3
"""Peers named in one warning line (the rest are counted)."""


def reach_grace(beacon_interval: float) -> float:
    """Seconds a peer has to connect back after it was found (a healthy one takes one round
    trip through the tower and a TCP handshake)."""
    return max(3.0, 3 * beacon_interval)


class ReachWatch:
    """Which peers found through the towers have subscribed on this node's data XPUBs."""

    def __init__(
        self,
        name: str,
        listen: Listen,
        ports: list[int],
        grace: float,
        stats: RunnerStats,
        *,
        secured: bool = False,
    ) -> None:
        self._name = name
        self._secured = secured
        self._listen = listen
        self._ports = ports
        self._grace = grace
        self._stats = stats
        self._seen: set[str] = set()
        """Everything that followed a command byte in a subscription (peer ids among it)."""
        self._awaited: dict[str, tuple[str, float]] = {}
        """node id -> (endpoint, when it is overdue)."""
        self._unreached: dict[str, str] = {}
        """node id -> endpoint: overdue and said."""

    def found(self, node_id: str, endpoint: str, now: float) -> None:
        """A peer was connected to (Discovery's ``Connect``)."""
        if node_id in self._seen or node_id in self._unreached:
            return
        self._awaited[node_id] = (endpoint, now + self._grace)
        self._count()

    def lost(self, node_id: str, endpoint: str) -> None:
        """A peer's endpoint expired (``Disconnect``): nothing to wait for there any more
        (another endpoint of the same id - a second live run of a name - is still awaited)."""
        awaited = self._awaited.get(node_id)
        if awaited is not None and awaited[0] == endpoint:
            del self._awaited[node_id]
        elif self._unreached.get(node_id) == endpoint:
            del self._unreached[node_id]
        else:
            return
        self._count()

    def notice(self, prefix: bytes) -> None:
        """A subscription arrived on one of this node's XPUBs."""
        if len(prefix) < 2:
            return
        node_id = prefix[1:].decode("utf-8", "surrogateescape")
        if node_id in self._seen:
            return
        self._seen.add(node_id)
        if self._awaited.pop(node_id, None) is not None:
            self._count()
        elif (endpoint := self._unreached.pop(node_id, None)) is not None:
            log.warning("%s: %s at %s connected back after all", self._name, node_id, endpoint)
            self._count()

    def next_deadline(self) -> float | None:
        if not self._awaited:
            return None
        return min(due for _, due in self._awaited.values())

    def on_timer(self, now: float) -> None:
        overdue = {i: e for i, (e, due) in self._awaited.items() if due <= now}
        if not overdue:
            return
        for node_id in overdue:
            del self._awaited[node_id]
        self._unreached.update(overdue)
        self._count()
        shown = ", ".join(f"{i} at {e}" for i, e in list(overdue.items())[:_SHOWN])
        more = f" and {len(overdue) - _SHOWN} more" if len(overdue) > _SHOWN else ""
        listen = self._listen
        where = ", ".join(f"{listen.bind}:{port}" for port in self._ports)
        told = listen.advertise or "the address the tower sees"
        keys = (
            " (or this node's authorized keys refuse theirs: docs/security.md)"
            if self._secured
            else ""
        )
        log.warning(
            "%s: %d peer(s) found through the towers did not connect back within %gs "
            "(%s%s): they cannot reach this node, which listens on %s (%s) and advertises "
            "%s%s. Give --bind an address they reach (or '*') and --advertise the host they "
            "should use (config bind, beacon/address; bind_host=, advertised_host=); see "
            "docs/deploy.md",
            self._name,
            len(overdue),
            self._grace,
            shown,
            more,
            where,
            listen.why,
            told,
            keys,
        )

    def _count(self) -> None:
        self._stats.peers_awaited = len(self._awaited)
        self._stats.peers_unreached = len(self._unreached)


__all__ = ["ReachWatch", "reach_grace"]
