"""``dafka status``, ``dafka topics``: the cluster as it announces itself, as a report.

A :class:`~dafka.client.ClusterWatcher` joins through the towers, listens until the view has
been quiet for a while (at most ``--wait`` seconds), and :func:`report` turns its snapshot
into plain data: the stores with the partitions each holds, every topic's partitions with
their head per store and how far each store is behind (*lag*: the highest sequence anyone
announced minus what the store holds), the live producers with the head they announce, and
the live consumers. What the protocol does not announce (a consumer's position, a store's
size on disk) is not shown; see docs/cli.md.
"""

from __future__ import annotations

from typing import Any

from dafka.client import ClusterSnapshot, ClusterWatcher
from dafka.transport.config import TransportConfig

Report = dict[str, Any]


def default_wait(beacon_interval: float) -> float:
    """``--wait``'s default: 6 beacon intervals, at least 6 s (a bound: the wait ends once
    the view is complete and quiet, 3-4 s with 1 s beacons)."""
    return max(6.0, 6 * beacon_interval)


def refresh_of(beacon_interval: float) -> float:
    """How often the watcher asks the heads again."""
    return min(0.5, beacon_interval)


def settle(watcher: ClusterWatcher, beacon_interval: float, wait: float) -> ClusterSnapshot:
    """The first view worth reporting (``status``, ``topics`` and ``top``'s first frame):
    every live store asked twice (a first answer may be lost), nothing new heard for two
    refresh rounds, at least the answers to our first beacon and a HEAD (producers send one
    a second) in; at most ``wait`` seconds."""
    at_least = max(1.5, watcher.listen_first + 0.5, 3 * beacon_interval)
    return watcher.wait_settled(
        quiet=max(0.5, 2 * refresh_of(beacon_interval)),
        timeout=wait,
        at_least=min(wait, at_least),
    )


def watch(topics: tuple[str, ...], transport: TransportConfig, wait: float) -> ClusterSnapshot:
    """Listen to the cluster for up to ``wait`` seconds (less once the view settled)."""
    interval = transport.beacon_interval
    with ClusterWatcher(transport, topics, refresh=refresh_of(interval)) as watcher:
        return settle(watcher, interval, wait)


def _lag(head: int, held: int | None) -> int:
    return head - (-1 if held is None else held)


def report(snapshot: ClusterSnapshot, towers: list[str], only: tuple[str, ...] = ()) -> Report:
    """Plain data (JSON-ready) from a snapshot; ``only`` limits the topics shown."""
    view = snapshot.view
    where = snapshot.endpoints
    live_stores = [s for s in view.stores if s.live]
    topics: dict[str, Any] = {}
    for topic in only or view.topics:
        partitions: list[dict[str, Any]] = []
        for partition in view.partitions(topic):
            key = (topic, partition)
            head = view.heads[key]
            held = {s.reader_id: s.heads.get(key) for s in live_stores}
            lag = {rid: _lag(head, h) for rid, h in held.items()}
            partitions.append(
                {
                    "partition": partition,
                    "head": head,
                    "producer_head": view.announced.get(key),
                    "stores": held,
                    "lag": max(lag.values(), default=0),
                }
            )
        entry = {
            "partitions": partitions,
            "records": sum(p["head"] + 1 for p in partitions),
            "producers": sorted(p for p, t in view.producers.items() if t == topic),
            "consumers": sorted(c for c, ts in view.consumers.items() if topic in ts),
            "consumed": topic in view.consumed_topics,
        }
        if only or partitions or entry["producers"] or entry["consumed"]:
            topics[topic] = entry
        # else: a name only heard in a GET-HEADS (someone once tried to consume it, and the
        # stores keep asking for its heads): no partition, no producer, no live consumer
    stores = []
    for store in view.stores:
        mine = {k: h for k, h in store.heads.items() if k[0] in topics}
        stores.append(
            {
                "id": store.reader_id,
                "address": where.get(store.reader_id),
                "live": store.live,
                "partitions": len(mine),
                "records": sum(h + 1 for h in mine.values()),
                "lag": sum(
                    _lag(view.heads[k], store.heads.get(k)) for k in view.heads if k[0] in topics
                ),
            }
        )
    producers = [
        {
            "id": pid,
            "topic": topic,
            "address": where.get(pid),
            "head": None if topic is None else view.announced.get((topic, pid)),
        }
        for pid, topic in sorted(view.producers.items())
    ]
    consumers = [
        {"id": cid, "address": where.get(cid), "topics": list(ts)}
        for cid, ts in view.consumers.items()
    ]
    return {
        "towers": towers,
        "peers_connected": len(where),
        "stores": stores,
        "topics": topics,
        "producers": producers,
        "consumers": consumers,
    }


def status_lines(found: Report) -> list[str]:
    """``dafka status`` as text: one section per kind of thing, one line per thing."""
    out = [f"towers: {', '.join(found['towers'])} (reached)"]
    out.append(f"peers connected: {found['peers_connected']}")
    live = [s for s in found["stores"] if s["live"]]
    out.append(f"stores: {len(live)} live")
    for s in found["stores"]:
        state = "" if s["live"] else "  (gone)"
        out.append(
            f"  {s['id']}  {s['address'] or '?'}  {s['partitions']} partition(s)"
            f"  {s['records']} record(s)  lag {s['lag']}{state}"
        )
    out.append(f"producers: {len(found['producers'])} live")
    for p in found["producers"]:
        head = "-" if p["head"] is None else p["head"]
        out.append(f"  {p['id']}  topic {p['topic'] or '?'}  head {head}  {p['address'] or '?'}")
    out.append(f"consumers: {len(found['consumers'])} live")
    for c in found["consumers"]:
        topics = ",".join(c["topics"]) or "?"
        out.append(f"  {c['id']}  topics {topics}  {c['address'] or '?'}")
    for topic, t in found["topics"].items():
        out.append(
            f"topic {topic}: {len(t['partitions'])} partition(s), {t['records']} record(s),"
            f" {len(t['producers'])} producer(s)"
        )
        width = max((len(p["partition"]) for p in t["partitions"]), default=0)
        for p in t["partitions"]:
            held = " ".join("-" if h is None else str(h) for h in p["stores"].values())
            announced = "" if p["producer_head"] is None else f"  producer {p['producer_head']}"
            out.append(
                f"  {p['partition']:<{width}}  head {p['head']}{announced}"
                f"  stores [{held}]  lag {p['lag']}"
            )
    return out


def topics_rows(found: Report) -> list[dict[str, Any]]:
    """``dafka topics``: one row per topic."""
    return [
        {
            "topic": topic,
            "partitions": len(t["partitions"]),
            "records": t["records"],
            "producers": len(t["producers"]),
            "consumed": t["consumed"],
            "lag": max((p["lag"] for p in t["partitions"]), default=0),
        }
        for topic, t in found["topics"].items()
    ]


def topics_lines(rows: list[dict[str, Any]]) -> list[str]:
    width = max((len(r["topic"]) for r in rows), default=5)
    out = [f"{'TOPIC':<{width}}  PARTITIONS  RECORDS  PRODUCERS  CONSUMED  LAG"]
    for r in rows:
        out.append(
            f"{r['topic']:<{width}}  {r['partitions']:>10}  {r['records']:>7}"
            f"  {r['producers']:>9}  {'yes' if r['consumed'] else 'no':>8}  {r['lag']:>3}"
        )
    return out


def describe_lines(partitions: list[dict[str, Any]]) -> list[str]:
    """``dafka topics describe``: the partitions' table, each column as wide as its widest
    cell (before, only PARTITION was padded and the other columns drifted off their
    headers). STORES: the head each live store holds, ``-`` for none."""
    header = ["PARTITION", "HEAD", "PRODUCER", "STORES", "LAG"]
    rows = [
        [
            p["partition"],
            str(p["head"]),
            "-" if p["producer_head"] is None else str(p["producer_head"]),
            "[" + " ".join("-" if h is None else str(h) for h in p["stores"].values()) + "]",
            str(p["lag"]),
        ]
        for p in partitions
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]


def towers_of(transport: TransportConfig) -> list[str]:
    """The towers as ``--tower`` takes them, one per tower."""
    return transport.towers.split(",")


__all__ = [
    "default_wait",
    "describe_lines",
    "refresh_of",
    "report",
    "settle",
    "status_lines",
    "topics_lines",
    "topics_rows",
    "towers_of",
    "watch",
]
