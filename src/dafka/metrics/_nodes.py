"""What each daemon exposes: snapshots of its counters as :class:`Sample` lists.

Store: the runner's counters (messages in/out, undecodable, peers), the store machine's
(records stored, ACKs sent, FETCHes sent/answered, records served, drops by reason,
partitions), its persistence's (records persisted, failed appends; histograms of append,
fsync and write-to-durable (ACK) seconds) and the size of its data directory. Tower:
beacons and subscriptions forwarded, malformed messages dropped.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING

from dafka.metrics._server import Sample

if TYPE_CHECKING:
    from dafka.server import StoreNode
    from dafka.transport.runner import RunnerStats
    from dafka.transport.tower import Tower

_LATENCY_HELP = {
    "append_seconds": "persistence: seconds per append (with fsync=batch, its fsync)",
    "sync_seconds": "persistence: seconds per timed fsync round",
    "durable_seconds": "persistence: seconds from a partition's first write not yet durable "
    "to its durability (its ACK leaves then)",
}
_STORE_GAUGES = {"partitions", "fetches_in_flight", "fetch_replies_pending"}


def directory_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:  # removed by retention while we walked
                continue
    return total


def store_samples(node: StoreNode) -> list[Sample]:
    runner, machine = node.runner, node.machine
    if runner is None or machine is None:
        return []
    out = [
        Sample(
            f"store_{name}",
            float(value),
            f"store machine: {name.replace('_', ' ')}",
            "gauge" if name in _STORE_GAUGES else "counter",
        )
        for name, value in dataclasses.asdict(
            runner.call(lambda _now: machine.statistics())
        ).items()
    ]
    out += runner_samples("store", runner.statistics())
    persistence = node.persistence
    if persistence is not None:
        out += [
            Sample(f"store_{name}", float(value), f"persistence: {name.replace('_', ' ')}")
            for name, value in dataclasses.asdict(
                runner.call(lambda _now: persistence.statistics())
            ).items()
        ]
        for name, latency in runner.call(lambda _now: persistence.latencies()).items():
            out.append(
                Sample(
                    f"store_{name}",
                    latency.sum,
                    _LATENCY_HELP[name],
                    "histogram",
                    buckets=latency.buckets,
                    count=latency.count,
                )
            )
    out.append(
        Sample("store_data_bytes", float(directory_bytes(node.data_dir)), "bytes on disk", "gauge")
    )
    return out


def runner_samples(node: str, stats: RunnerStats) -> list[Sample]:
    return [
        Sample(
            f"{node}_messages_{name}" if name in ("received", "sent") else f"{node}_{name}",
            float(value),
            f"transport: {name.replace('_', ' ')}",
            "counter",
        )
        for name, value in dataclasses.asdict(stats).items()
    ]


def tower_samples(tower: Tower) -> list[Sample]:
    return [
        Sample(f"tower_{name}", float(value), f"tower: {name.replace('_', ' ')}")
        for name, value in dataclasses.asdict(tower.statistics()).items()
    ]


__all__ = ["directory_bytes", "runner_samples", "store_samples", "tower_samples"]
