"""The table of peers a node has discovered through the towers' beacons.

Pure: ``seen`` and ``expire`` take ``now`` from the caller. A peer is a node id and the
endpoint of its data PUB; each beacon refreshes it, and one not heard of for
``beacon/timeout`` is expired so that the driver disconnects from it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Peer:
    endpoint: str
    expires: float


class PeerTable:
    """Known peers with their endpoints and expiry times."""

    def __init__(self, own_ids: set[str], timeout: float) -> None:
        self._own = own_ids
        self._timeout = timeout
        self._peers: dict[str, _Peer] = {}

    def seen(self, node_id: str, endpoint: str, now: float) -> tuple[str | None, str | None]:
        """Record a beacon; returns ``(endpoint to connect, endpoint to disconnect)``.

        A new peer gives an endpoint to connect; a known peer that moved (a restarted node
        with a new port) gives both; a refresh gives neither. Our own beacons are ignored.
        """
        if node_id in self._own:
            return None, None
        peer = self._peers.get(node_id)
        if peer is None:
            self._peers[node_id] = _Peer(endpoint, now + self._timeout)
            return endpoint, None
        peer.expires = now + self._timeout
        if peer.endpoint == endpoint:
            return None, None
        old, peer.endpoint = peer.endpoint, endpoint
        return endpoint, old

    def expire(self, now: float) -> list[str]:
        """Forget peers whose beacon timed out; returns their endpoints."""
        gone = [nid for nid, p in self._peers.items() if p.expires <= now]
        return [self._peers.pop(nid).endpoint for nid in gone]

    def next_expiry(self) -> float | None:
        return min((p.expires for p in self._peers.values()), default=None)

    def endpoints(self) -> dict[str, str]:
        return {nid: p.endpoint for nid, p in self._peers.items()}


__all__ = ["PeerTable"]
