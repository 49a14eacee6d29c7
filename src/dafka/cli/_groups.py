"""``dafka groups [GROUP]``: consumer groups, their committed offsets and their lag.

What the stores hold (docs/groups.md, "Committed offsets"): the groups are the owners of the
partitions of ``__dafka_offsets``, their committed offsets the fold of each partition's last
commit record (:class:`~dafka.client.CommitReader`), and a partition's lag the RECORDs
between its commit and its head (``head + 1 - committed``; the heads as the stores and
producers announce them, asked with a :class:`~dafka.client.HeadWatcher`). Lag counts
RECORDs, not messages: a batched RECORD holds many, and counting them would mean reading
them. ``dafka status`` and ``dafka top`` show the same rows (:func:`group_rows`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dafka.client import CommitReader, ConsumerSettings, HeadWatcher
from dafka.records import CommittedOffset

Key = tuple[str, str]
Group = dict[str, Any]


def read_groups(
    settings: ConsumerSettings, group: str | None, timeout: float
) -> dict[str, dict[Key, CommittedOffset]]:
    """The committed offsets of ``group`` (None: of every group) as the stores hold them."""
    with CommitReader(settings) as reader:
        return reader.read(None if group is None else [group], timeout)


def topic_heads(settings: ConsumerSettings, topics: set[str], timeout: float) -> dict[Key, int]:
    """The heads of ``topics`` once every store answered (or ``timeout``)."""
    if not topics:
        return {}
    with HeadWatcher(
        sorted(topics), settings.transport(), ready_timeout=settings.ready_timeout
    ) as watcher:
        return watcher.wait_quiet(0.3, timeout, min_stores=1)


def group_rows(
    committed: Mapping[str, Mapping[Key, CommittedOffset]], heads: Mapping[Key, int]
) -> list[Group]:
    """Plain data (JSON-ready): per group its partitions with the committed offset, the
    head and the lag (None where no head is known), and the total lag."""
    out: list[Group] = []
    for group in sorted(committed):
        partitions = []
        total = 0
        for (topic, partition), offset in sorted(committed[group].items()):
            head = heads.get((topic, partition))
            lag = None if head is None else max(0, head + 1 - offset.offset)
            total += lag or 0
            partitions.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "committed": offset.offset,
                    "index": offset.index,
                    "head": head,
                    "lag": lag,
                }
            )
        out.append({"group": group, "partitions": partitions, "lag": total})
    return out


def groups_report(settings: ConsumerSettings, group: str | None, timeout: float) -> list[Group]:
    """:func:`group_rows` of ``group`` (None: every group), read now."""
    committed = read_groups(settings, group, timeout)
    topics = {t for offsets in committed.values() for t, _ in offsets}
    return group_rows(committed, topic_heads(settings, topics, timeout))


def group_lines(groups: list[Group]) -> list[str]:
    """The text form: per group a header with its total lag, then one row per partition."""
    if not groups:
        return ["no consumer group has committed offsets"]
    lines: list[str] = []
    for found in groups:
        lines.append(f"group {found['group']}: lag {found['lag']} (RECORDs)")
        rows = [("TOPIC", "PARTITION", "COMMITTED", "HEAD", "LAG")]
        for p in found["partitions"]:
            committed = str(p["committed"]) + (f"+{p['index']}" if p["index"] else "")
            head = "?" if p["head"] is None else str(p["head"])
            lag = "?" if p["lag"] is None else str(p["lag"])
            rows.append((p["topic"], p["partition"], committed, head, lag))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for row in rows:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    return lines


__all__ = ["group_lines", "group_rows", "groups_report", "read_groups", "topic_heads"]
