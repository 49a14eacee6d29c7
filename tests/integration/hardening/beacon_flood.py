"""The beacon-flood scenario, shared by its test (a few seconds) and
``scripts/beacon_flood.py`` (30 s): a tower, a store, a producer and a consumer; a flooder
beacons ``seconds * rate`` fresh made-up ids through the tower (taking longer where the
machine cannot keep the rate); a second producer starts mid-flood.

What it measures: every node stays up; the records the consumer got during the flood
(the figure printed); whether the mid-flood producer got its records stored; each node's
RSS before the flood and once it ended (waiting up to ``settle`` seconds for it to come
back within 20 %). The tower and the store are ``dafka`` daemons, which choose their
allocator themselves (``dafka.transport.memory.COMPACT_ALLOCATOR``); the producer is a client
process, run with those variables as docs/nodes.md advises for long-running clients.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from dafka.client import Consumer
from dafka.node import ConsumerConfig
from dafka.transport.memory import COMPACT_ALLOCATOR
from tests.integration.cluster.cluster_client import transport
from tests.integration.cluster.cluster_procs import DEADLINE, Proc, Processes

FLOODER = Path(__file__).with_name("flooder.py")
TOPIC = "flood"


@dataclass
class FloodResult:
    sent: int = 0
    delivered_during: int = 0
    delivered_total: int = 0
    late_producer_acked: int = 0
    rss_before: dict[str, int] = field(default_factory=dict)
    rss_peak: dict[str, int] = field(default_factory=dict)
    rss_after: dict[str, int] = field(default_factory=dict)
    down: list[str] = field(default_factory=list)

    def returned(self, within: float = 0.2, nodes: tuple[str, ...] | None = None) -> bool:
        """Whether ``nodes`` (default: all) are back within ``within`` of their RSS before."""
        names = self.rss_before if nodes is None else nodes
        return all(self.rss_after[n] <= self.rss_before[n] * (1 + within) for n in names)

    def describe(self) -> str:
        return (
            f"flood: {self.sent:,} beacons; consumer got {self.delivered_during:,} records "
            f"during it ({self.delivered_total:,} in all); the producer started mid-flood had "
            f"{self.late_producer_acked} acked; RSS KiB before {self.rss_before}, peak "
            f"{self.rss_peak}, after {self.rss_after}; down: {self.down or 'none'}"
        )


def run_flood(
    procs: Processes, data: Path, *, seconds: float, rate: float, settle: float = 30.0
) -> FloodResult:
    result = FloodResult()
    tower = procs.tower()
    store = procs.store(data / "store", [tower])
    records = int(500 * (seconds + settle + 60))  # it runs until the end
    producer = procs.client(
        "producer",
        "produce",
        [tower],
        TOPIC,
        "--records",
        str(records),
        "--rate",
        "500",
        env=COMPACT_ALLOCATOR,
    )
    config = ConsumerConfig(offset_reset="earliest")
    with Consumer(
        TOPIC, transport=transport([tower.spec], 0.2), config=config, ready_timeout=DEADLINE
    ) as consumer:
        producer.wait_event("ready")
        got = 0
        deadline = time.monotonic() + DEADLINE
        while got < 100 and time.monotonic() < deadline:  # traffic flows before the flood
            got += len(consumer.poll(timeout=0.2))
        nodes: dict[str, Proc] = {"tower": tower.proc, "store": store.proc, "producer": producer}
        result.rss_before = {n: p.rss_kb() for n, p in nodes.items()}
        result.rss_peak = dict(result.rss_before)
        flooder = procs.spawn(
            "flooder",
            [
                sys.executable,
                str(FLOODER),
                "--tower-sub",
                tower.sub_endpoint,
                "--rate",
                str(rate),
                "--beacons",
                str(int(seconds * rate)),
            ],
        )
        late: Proc | None = None
        started = time.monotonic()
        while flooder.running():
            result.delivered_during += len(consumer.poll(timeout=0.2))
            if late is None and time.monotonic() - started > seconds / 2:
                late = procs.client("late", "produce", [tower], TOPIC, "--records", "100")
            for n, p in nodes.items():
                if p.running():
                    result.rss_peak[n] = max(result.rss_peak[n], p.rss_kb())
        result.sent = flooder.require("done")["sent"]
        result.delivered_total = got + result.delivered_during
        if late is not None and late.wait_exit(DEADLINE) == 0:
            result.late_producer_acked = late.require("done")["acked"]
        settle_end = time.monotonic() + settle
        while True:
            result.delivered_total += len(consumer.poll(timeout=0.2))
            result.rss_after = {n: p.rss_kb() for n, p in nodes.items() if p.running()}
            done = len(result.rss_after) == len(nodes) and result.returned(nodes=_DAEMONS)
            if done or time.monotonic() > settle_end:
                break
        result.down = [n for n, p in nodes.items() if not p.running()]
        consumer.positions()  # the in-process consumer still answers
    return result


_DAEMONS = ("tower", "store")
"""The nodes whose memory must come back (see test_beacon_flood.py's docstring)."""

__all__ = ["FloodResult", "run_flood"]
