"""``dafka top``: the cluster's partitions, heads, rates and stores, refreshed in place.

One :class:`~dafka.client.ClusterWatcher` runs for the whole session; every ``interval``
its snapshot becomes a :func:`~dafka.cli._status.report` and a rich table. Rates are RECORDs
per second from the change of each partition's head between two frames (a batching producer
sends one RECORD per batch, so this counts batches, not messages). On a terminal the table
is redrawn in place (rich ``Live``); in a pipe each frame is printed after the last.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from dafka.cli._groups import MessageCounter, group_rows, report_heads
from dafka.cli._status import Report, default_wait, refresh_of, report, settle, towers_of
from dafka.client import ClusterWatcher, CommitError, CommitReader, ConsumerSettings
from dafka.transport.config import TransportConfig


def _short(node_id: str | None) -> str:
    return "?" if node_id is None else node_id if len(node_id) <= 12 else node_id[:8] + ".."


def _held(head: int | None) -> str:
    return "-" if head is None else str(head)


def frame(found: Report, rates: dict[tuple[str, str], float]) -> Group:
    """One screen: a summary line, the partitions table, the stores table and (when
    ``found["groups"]`` has any) the consumer groups' committed offsets and lag."""
    live = [s for s in found["stores"] if s["live"]]
    summary = Text(
        f"towers {', '.join(found['towers'])}   stores {len(live)}   "
        f"producers {len(found['producers'])}   consumers {len(found['consumers'])}   "
        f"peers {found['peers_connected']}"
    )
    parts = Table(title="partitions", expand=False)
    for column in ("topic", "partition", "head", "rec/s", "producer"):
        parts.add_column(column, justify="right" if column in ("head", "rec/s") else "left")
    for s in live:
        parts.add_column(f"store {_short(s['id'])}", justify="right")
    parts.add_column("lag", justify="right")
    for topic, t in found["topics"].items():
        for p in t["partitions"]:
            rate = rates.get((topic, p["partition"]), 0.0)
            held = [
                "-" if p["stores"].get(s["id"]) is None else str(p["stores"][s["id"]]) for s in live
            ]
            announced = "" if p["producer_head"] is None else str(p["producer_head"])
            parts.add_row(
                topic,
                p["partition"],
                str(p["head"]),
                f"{rate:.0f}",
                announced,
                *held,
                str(p["lag"]),
            )
    stores = Table(title="stores", expand=False)
    for column in ("store", "address", "partitions", "records", "lag"):
        stores.add_column(
            column, justify="right" if column in ("partitions", "records", "lag") else "left"
        )
    for s in live:
        stores.add_row(
            s["id"], s["address"] or "?", str(s["partitions"]), str(s["records"]), str(s["lag"])
        )
    tables: list[Any] = [summary, parts, stores]
    if found.get("groups"):
        groups = Table(title="consumer groups", expand=False)
        for column in ("group", "topic", "partition", "committed", "head", "lag", "lag records"):
            groups.add_column(
                column, justify="left" if column in ("group", "topic", "partition") else "right"
            )
        for g in found["groups"]:
            for p in g["partitions"]:
                groups.add_row(
                    g["group"],
                    p["topic"],
                    p["partition"],
                    str(p["committed"]) + (f"+{p['index']}" if p["index"] else ""),
                    _held(p["head"]),
                    "?" if p["lag"] is None else str(p["lag"]),
                    "?" if p["lag_records"] is None else str(p["lag_records"]),
                )
            groups.add_row(
                g["group"],
                "",
                "(total)",
                "",
                "",
                "?" if g["lag"] is None else str(g["lag"]),
                str(g["lag_records"]),
            )
        tables.append(groups)
    return Group(*tables)


def _heads(found: Report) -> dict[tuple[str, str], int]:
    return {
        (topic, p["partition"]): p["head"]
        for topic, t in found["topics"].items()
        for p in t["partitions"]
    }


class _Rates:
    """RECORDs per second per partition between two frames."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], int] = {}
        self._at = 0.0

    def update(self, found: Report, now: float) -> dict[tuple[str, str], float]:
        heads = _heads(found)
        elapsed = now - self._at
        rates = {}
        if self._last and elapsed > 0:
            for key, head in heads.items():
                rates[key] = max(0, head - self._last.get(key, head)) / elapsed
        self._last, self._at = heads, now
        return rates


def top(
    topics: tuple[str, ...],
    transport: TransportConfig,
    interval: float,
    iterations: int | None,
    console: Console | None = None,
    *,
    settings: ConsumerSettings | None = None,
) -> None:
    """Show frames until ``iterations`` were shown (None: until Ctrl-C). ``settings``: how
    to reach the stores for the groups' commits (None: no groups table)."""
    console = console or Console()
    towers = towers_of(transport)
    rates = _Rates()
    stop = threading.Event()
    beacon = transport.beacon_interval
    with ClusterWatcher(transport, topics, refresh=refresh_of(min(interval, beacon))) as watcher:
        settle(watcher, beacon, default_wait(beacon))  # the first frame is a complete view

        reader = None if settings is None else CommitReader(settings)
        messages = None if settings is None else MessageCounter(settings)

        def render() -> Any:
            found = report(watcher.snapshot(), towers, topics)
            if reader is not None and any(s["live"] for s in found["stores"]):
                try:
                    committed = reader.read(None, default_wait(beacon))
                except CommitError:
                    committed = {}
                heads = report_heads(found)
                assert messages is not None
                messages.count(committed, heads, default_wait(beacon))
                found["groups"] = group_rows(committed, heads, messages=messages)
            return frame(found, rates.update(found, time.monotonic()))

        try:
            _show(console, render, iterations, interval, stop)
        finally:
            if reader is not None:
                reader.close()


def _show(
    console: Console,
    render: Any,
    iterations: int | None,
    interval: float,
    stop: threading.Event,
) -> None:
    """Print frames: redrawn in place on a terminal, one after another in a pipe."""
    shown = 0
    if console.is_terminal:
        with Live(render(), console=console, auto_refresh=False) as live:
            shown = 1
            while iterations is None or shown < iterations:
                stop.wait(interval)
                live.update(render(), refresh=True)
                shown += 1
    else:
        while iterations is None or shown < iterations:
            if shown:
                stop.wait(interval)
            console.print(render())
            console.file.flush()
            shown += 1


__all__ = ["frame", "top"]
