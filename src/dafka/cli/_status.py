"""``dafka status TOPIC...``: what the cluster announces about topics, seen as a consumer.

It joins through the towers as a consumer of TOPICS that reads nothing (``latest``), waits
a few beacon intervals for stores and producers to announce themselves and their heads, and
reports the towers it reached, how many peers it connected to, and each partition with its
head (the highest offset stored or announced). Per-store heads, lag per consumer group and
the list of every topic are not announced by the protocol today (see docs/cli.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from dafka.transport.config import TransportConfig


@dataclass
class Status:
    towers: list[str]
    peers: int
    topics: dict[str, dict[str, int]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "towers": self.towers,
            "peers_connected": self.peers,
            "topics": {
                t: {"partitions": [{"partition": p, "head": h} for p, h in sorted(parts.items())]}
                for t, parts in self.topics.items()
            },
        }

    def lines(self) -> list[str]:
        out = [f"towers: {', '.join(self.towers)} (reached)", f"peers connected: {self.peers}"]
        for topic, parts in self.topics.items():
            out.append(f"topic {topic}: {len(parts)} partition(s)")
            width = max((len(p) for p in parts), default=0)
            for partition, head in sorted(parts.items()):
                shown = "empty" if head < 0 else f"head {head}"
                out.append(f"  {partition:<{width}}  {shown}")
        return out


def status(topics: tuple[str, ...], transport: TransportConfig, settle: float) -> Status:
    from dafka.client import Consumer

    with Consumer(topics, transport=transport, offset_reset="latest") as consumer:
        deadline = time.monotonic() + settle
        heads: dict[tuple[str, str], int] = {}
        while time.monotonic() < deadline:
            consumer.poll(timeout=0.1)  # keeps the queue empty; nothing is printed
            heads = consumer.heads()
        peers = consumer.transport_statistics().peers_connected
    towers = [sub.removeprefix("tcp://") for sub in transport.tower_sub_addresses]
    result = Status(towers, peers, {t: {} for t in topics})
    for (topic, partition), head in heads.items():
        result.topics.setdefault(topic, {})[partition] = head
    return result


__all__ = ["Status", "status"]
