"""What each daemon exposes: snapshots of its counters as :class:`Sample` lists.

Store: the runner's counters (messages in/out, undecodable, peers), the store machine's
(records stored, ACKs sent, FETCHes sent/answered, records served, drops by reason,
partitions, holes in its logs and what filled them), its persistence's (records persisted,
failed appends, damage found and records it cost; histograms of append, fsync and
write-to-durable (ACK) seconds), its background scrub's (rate, bytes checked, passes, how far
the current pass is, damage found) and the size of its data directory. Tower:
beacons and subscriptions forwarded, malformed messages dropped.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING

from dafka.client import ConsumerMetrics, ProducerMetrics
from dafka.metrics._server import Kind, Sample
from dafka.node import LatencySnapshot

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
_STORE_GAUGES = {
    "partitions",
    "fetches_in_flight",
    "fetch_replies_pending",
    "partitions_blocked",
    "holes",
    "hole_records",
}
_SCRUB_HELP: dict[str, tuple[Kind, str]] = {
    "bytes_per_s": ("gauge", "scrub: the rate it checks the logs at, bytes/s (0: off)"),
    "bytes_checked": ("counter", "scrub: bytes of records checked (CRC-32C, offset, length)"),
    "bytes_unchanged": (
        "counter",
        "scrub: of those, stretches read whole and found unchanged since a check (by digest)",
    ),
    "passes": ("counter", "scrub: complete passes over every partition"),
    "pass_progress": ("gauge", "scrub: how far the current pass is, 0 to 1"),
    "damage": ("counter", "scrub: damaged stretches found (each salvaged, refetched)"),
    "records_lost": ("counter", "scrub: records those cost (holes the store refetches)"),
}


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
        scrubber = node.scrubber
        if scrubber is not None:
            scrub = runner.call(lambda _now: scrubber.statistics())
            for name, value in dataclasses.asdict(scrub).items():
                kind, text = _SCRUB_HELP[name]
                out.append(Sample(f"store_scrub_{name}", float(value), text, kind))
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


def client_samples(client: str, metrics: ProducerMetrics | ConsumerMetrics) -> list[Sample]:
    """``dafka_<client>_<field>`` for every field of a client's metrics snapshot: counts as
    counters (levels as gauges), ``ack_latency`` as a histogram in seconds, ``dropped`` as
    ``..._dropped_total{reason=...}``, ``lag_by_partition`` as a gauge per partition."""
    out: list[Sample] = []
    for f in dataclasses.fields(metrics):
        value = getattr(metrics, f.name)
        name = f"{client}_{f.name}"
        if isinstance(value, LatencySnapshot):
            out.append(
                Sample(
                    f"{name}_seconds",
                    value.sum,
                    f"{client}: {f.name.replace('_', ' ')} in seconds",
                    "histogram",
                    buckets=value.buckets,
                    count=value.count,
                )
            )
        elif f.name == "dropped":
            out += [
                Sample(name, float(n), f"{client}: dropped, by reason", labels=(("reason", r),))
                for r, n in value.items()
            ]
        elif f.name in ("lag_by_partition", "group_lag_by_partition"):
            what = "records known and not received"
            if f.name == "group_lag_by_partition":
                what = "records between the group's last commit and the head"
            out += [
                Sample(
                    name,
                    float(n),
                    f"{client}: {what}",
                    "gauge",
                    labels=(("topic", t), ("partition", p)),
                )
                for (t, p), n in value.items()
            ]
        else:
            kind: Kind = "gauge" if f.name in _CLIENT_GAUGES else "counter"
            out.append(Sample(name, float(value), f"{client}: {f.name.replace('_', ' ')}", kind))
    return out


_CLIENT_GAUGES = {
    "in_flight",
    "in_flight_bytes",
    "queued_records",
    "partitions",
    "lag",
    "group_lag",
    "fetches_in_flight",
    "stores_known",
}


def tower_samples(tower: Tower) -> list[Sample]:
    return [
        Sample(f"tower_{name}", float(value), f"tower: {name.replace('_', ' ')}")
        for name, value in dataclasses.asdict(tower.statistics()).items()
    ]


__all__ = ["client_samples", "directory_bytes", "runner_samples", "store_samples", "tower_samples"]
