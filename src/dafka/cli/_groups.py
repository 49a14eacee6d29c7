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

from dafka.client import CommitReader, ConsumerSettings, HeadWatcher, MemberWatcher
from dafka.protocol import MemberBeat
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
    committed: Mapping[str, Mapping[Key, CommittedOffset]],
    heads: Mapping[Key, int],
    members: Mapping[str, list[MemberBeat]] | None = None,
) -> list[Group]:
    """Plain data (JSON-ready): per group its live members (id, static instance id, the
    partitions each reads), its partitions with the committed offset, the head and the lag
    (None where no head is known), and the total lag."""
    out: list[Group] = []
    beats = members or {}
    for group in sorted({*committed, *beats}):
        partitions = []
        total = 0
        for (topic, partition), offset in sorted(committed.get(group, {}).items()):
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
        live = [
            {
                "member": b.member,
                "instance": b.instance or None,
                "partitions": [list(c) for c in sorted(b.claims)],
            }
            for b in beats.get(group, [])
        ]
        out.append({"group": group, "members": live, "partitions": partitions, "lag": total})
    return out


def groups_report(settings: ConsumerSettings, group: str | None, timeout: float) -> list[Group]:
    """:func:`group_rows` of ``group`` (None: every group), read now; the members are those
    whose beats were heard while the commits were read (at least ``listen_for``)."""
    with MemberWatcher(
        settings.transport(), group=group, ready_timeout=settings.ready_timeout
    ) as watcher:
        committed = read_groups(settings, group, timeout)
        topics = {t for offsets in committed.values() for t, _ in offsets}
        heads = topic_heads(settings, topics, timeout)
        watcher.listen(listen_for(settings))
        return group_rows(committed, heads, watcher.members())


def listen_for(settings: ConsumerSettings) -> float:
    """How long to listen for members: two of their beats (a member beats every quarter of
    its session timeout, two beacon intervals by default)."""
    return max(1.0, 2 * float(settings.beacon_interval))


def group_lines(groups: list[Group]) -> list[str]:
    """The text form: per group a header with its total lag, then one row per partition."""
    if not groups:
        return ["no consumer group: none committed offsets, no member beats"]
    lines: list[str] = []
    for found in groups:
        members = found.get("members", [])
        lines.append(
            f"group {found['group']}: {len(members)} member(s), lag {found['lag']} (RECORDs)"
        )
        for m in members:
            instance = f" ({m['instance']})" if m["instance"] else ""
            reads = ", ".join(f"{t}/{p}" for t, p in m["partitions"]) or "-"
            lines.append(f"  member {m['member']}{instance}: {reads}")
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


def report_heads(found: Mapping[str, Any]) -> dict[Key, int]:
    """The heads a ``dafka status`` report shows (its topics' partitions)."""
    return {
        (topic, p["partition"]): p["head"]
        for topic, t in found["topics"].items()
        for p in t["partitions"]
    }


def status_groups(
    settings: ConsumerSettings, found: Mapping[str, Any], timeout: float
) -> list[Group]:
    """The groups of a ``dafka status``/``top`` report: their commits read from the stores,
    their lag against the report's heads (heads of topics the report does not show asked
    from the stores). None live store: no group (the commits are on the stores)."""
    if not any(s["live"] for s in found["stores"]):
        return []
    committed = read_groups(settings, None, timeout)
    heads = report_heads(found)
    missing = {t for offsets in committed.values() for t, _ in offsets} - {t for t, _ in heads}
    heads.update(topic_heads(settings, missing, timeout))
    return group_rows(committed, heads)


__all__ = [
    "group_lines",
    "group_rows",
    "groups_report",
    "read_groups",
    "report_heads",
    "status_groups",
    "topic_heads",
]
