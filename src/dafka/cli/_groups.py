"""``dafka groups [GROUP]``: consumer groups, their committed offsets and their lag.

What the stores hold (docs/groups.md, "Committed offsets"): the groups are the owners of the
partitions of ``__dafka_offsets``, their committed offsets the fold of each partition's last
commit record (:class:`~dafka.client.CommitReader`), and a partition's lag the messages
after its commit up to its head, as Kafka users read it (``lag``), and the RECORDs
(``lag_records``: ``head + 1 - committed``; the heads as the stores and producers announce
them, asked with a :class:`~dafka.client.HeadWatcher`). A batched RECORD holds many
messages and neither the stores nor the heads know how many, so the messages are counted
by reading those RECORDs (:class:`MessageCounter`: exact, each RECORD read once and its
count kept), at most :data:`MESSAGE_LAG_RECORDS` RECORDs per look; a partition further
behind shows no message lag (None, "?"), only its RECORDs. ``dafka status`` and ``dafka
top`` show the same rows (:func:`group_rows`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dafka.client import (
    CommitReader,
    Consumer,
    ConsumerMetrics,
    ConsumerSettings,
    HeadWatcher,
    MemberWatcher,
)
from dafka.errors import DafkaError
from dafka.protocol import MemberBeat
from dafka.records import CommittedOffset

if TYPE_CHECKING:
    from dafka.metrics import Sample  # prometheus-client is an extra: imported when serving

log = logging.getLogger(__name__)

Key = tuple[str, str]
Group = dict[str, Any]

MESSAGE_LAG_RECORDS = 10_000
"""RECORDs a look reads at most to count the messages of the groups' lag (the partitions
that would need more show their lag in RECORDs only)."""


class MessageCounter:
    """The messages of each partition's RECORDs from the groups' commits to the head, read
    with a bounded :class:`Consumer` and kept (a RECORD's messages never change), so that
    ``dafka top`` reads only the new RECORDs at each frame. Counted as a consumer with
    default settings reads them: a batch its messages, a plain RECORD one, a RECORD a store
    dropped (too large) or a corrupt batch none."""

    def __init__(self, settings: ConsumerSettings, budget: int = MESSAGE_LAG_RECORDS) -> None:
        self._settings = dataclasses.replace(
            settings,
            group_id=None,
            group_instance_id=None,
            isolation_level="read_uncommitted",
            offset_reset="earliest",
            fail_on_data_loss=True,
            enable_auto_commit=False,
        )
        self._budget = budget
        self._counts: dict[Key, tuple[int, list[int]]] = {}
        """Per partition: the first offset counted and the messages of each RECORD from it."""

    def update(self, ranges: Mapping[Key, tuple[int, int]], timeout: float) -> None:
        """Count the RECORDs of ``ranges`` (per partition: first offset, head) not counted
        yet, partitions in order while the budget lasts; forget counts before the firsts."""
        wanted: dict[Key, tuple[int, int]] = {}
        left = self._budget
        for key, (first, head) in sorted(ranges.items()):
            start, counts = self._counts.get(key, (first, []))
            if first < start or first > start + len(counts):
                start, counts = first, []  # not contiguous with what is kept: count afresh
            elif first > start:
                counts = counts[first - start :]
                start = first
            self._counts[key] = (start, counts)
            end = start + len(counts)  # the first RECORD not counted
            if head < end:
                continue
            if head + 1 - end > left:
                continue  # too far behind: its lag in RECORDs only
            left -= head + 1 - end
            wanted[key] = (end, head)
        for key in [k for k in self._counts if k not in ranges]:
            del self._counts[key]
        if not wanted:
            return
        read: Counter[tuple[str, str, int]] = Counter()
        try:
            with Consumer(
                assign={k: a for k, (a, _) in wanted.items()},
                end_offsets={k: h + 1 for k, (_, h) in wanted.items()},
                settings=self._settings,
            ) as reader:
                for columns in reader.read_to_end(timeout):
                    read.update(
                        zip(columns.topics, columns.partitions, columns.offsets, strict=True)
                    )
        except DafkaError as exc:  # not counted this time: "?" where it was needed
            log.warning("groups: the messages of the lag could not be counted: %s", exc)
            return
        for key, (end, head) in wanted.items():
            start, counts = self._counts[key]
            counts.extend(read[(*key, offset)] for offset in range(end, head + 1))

    def lag(self, key: Key, offset: int, index: int, head: int) -> int | None:
        """The messages after ``(offset, index)`` up to ``head`` (None: not counted)."""
        if head < offset:
            return 0
        start, counts = self._counts.get(key, (0, []))
        if offset < start or head >= start + len(counts):
            return None
        return max(0, sum(counts[offset - start : head + 1 - start]) - index)

    def count(
        self,
        committed: Mapping[str, Mapping[Key, CommittedOffset]],
        heads: Mapping[Key, int],
        timeout: float,
    ) -> None:
        """:meth:`update` for the partitions of ``committed`` with a head: from the lowest
        commit of any group."""
        ranges: dict[Key, tuple[int, int]] = {}
        for offsets in committed.values():
            for key, offset in offsets.items():
                head = heads.get(key)
                if head is None or head < offset.offset:
                    continue
                low = ranges.get(key, (offset.offset, head))[0]
                ranges[key] = (min(low, offset.offset), head)
        self.update(ranges, timeout)


class MemberLag:
    """A group member's lag in messages for its ``/metrics`` (``dafka consume -G
    --metrics-port``): ``consumer_group_lag_messages`` (total; absent while a partition's
    messages are not counted) and ``..._by_partition``, over the partitions of its
    ``group_lag`` (those it committed), from the group's committed offsets to the heads it
    knows, counted by a :class:`MessageCounter` as ``dafka groups`` counts them (each
    RECORD read once, at most :data:`MESSAGE_LAG_RECORDS` per scrape). The consumer's own
    ``group_lag`` counts RECORDs: it knows the messages only of the RECORDs it received."""

    def __init__(self, consumer: Consumer, timeout: float) -> None:
        self._consumer = consumer
        self._counter = MessageCounter(consumer.settings)
        self._timeout = timeout

    def samples(self, metrics: ConsumerMetrics) -> list[Sample]:
        """The gauges, read now (a scrape)."""
        from dafka.metrics import Sample

        keys = sorted(metrics.group_lag_by_partition)
        try:
            found = self._consumer.committed(keys, timeout=self._timeout) if keys else {}
            heads = self._consumer.heads()
        except DafkaError as exc:  # counted next time
            log.warning("consumer: the group lag in messages could not be read: %s", exc)
            return []
        committed = {k: c for k, c in found.items() if c is not None}
        self._counter.count({"": committed}, heads, self._timeout)
        help_ = "consumer: messages between the group's commit and the head"
        out: list[Sample] = []
        total: int | None = 0
        for (topic, partition), offset in sorted(committed.items()):
            head = heads.get((topic, partition))
            lag = (
                None
                if head is None
                else self._counter.lag((topic, partition), offset.offset, offset.index, head)
            )
            if lag is None:
                total = None
                continue
            total = None if total is None else total + lag
            labels = (("topic", topic), ("partition", partition))
            out.append(
                Sample(
                    "consumer_group_lag_messages_by_partition", float(lag), help_, "gauge", labels
                )
            )
        if total is not None:
            out.append(Sample("consumer_group_lag_messages", float(total), help_, "gauge"))
        return out


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
    messages: MessageCounter | None = None,
) -> list[Group]:
    """Plain data (JSON-ready): per group its live members (id, static instance id, the
    partitions each reads, and ``pending``: the members it heard that have not heard it
    yet - it counts them alive, and takes anything, only once they have: docs/groups.md),
    its partitions with the committed offset, the head, the lag in
    messages (``lag``: None where no head is known or the messages were not counted -
    ``messages`` counted them) and in RECORDs (``lag_records``: None where no head is
    known), and the totals (``lag`` None if a partition's is)."""
    out: list[Group] = []
    beats = members or {}
    for group in sorted({*committed, *beats}):
        partitions = []
        total_records = 0
        total: int | None = 0
        for (topic, partition), offset in sorted(committed.get(group, {}).items()):
            head = heads.get((topic, partition))
            records = None if head is None else max(0, head + 1 - offset.offset)
            lag = None
            if head is not None and messages is not None:
                lag = messages.lag((topic, partition), offset.offset, offset.index, head)
            total_records += records or 0
            total = None if total is None or lag is None else total + lag
            partitions.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "committed": offset.offset,
                    "index": offset.index,
                    "head": head,
                    "lag": lag,
                    "lag_records": records,
                }
            )
        heard = beats.get(group, [])
        keys = {b.member: b.instance or b.member for b in heard}
        live = [
            {
                "member": b.member,
                "instance": b.instance or None,
                "partitions": [list(c) for c in sorted(b.claims)],
                "pending": _pending(b, keys),
            }
            for b in heard
        ]
        out.append(
            {
                "group": group,
                "members": live,
                "partitions": partitions,
                "lag": total,
                "lag_records": total_records,
            }
        )
    return out


def _pending(beat: MemberBeat, keys: Mapping[str, str]) -> list[str]:
    """The members ``beat``'s sender heard and does not count alive yet: it acknowledges
    every member it heard (``acks``, by member id) and counts alive those of its view (by
    key: the static instance id, else the member id)."""
    view = set(beat.view)
    return sorted({keys.get(m, m) for m, _ in beat.acks} - view)


def groups_report(settings: ConsumerSettings, group: str | None, timeout: float) -> list[Group]:
    """:func:`group_rows` of ``group`` (None: every group), read now; the members are those
    whose beats were heard while the commits were read (at least ``listen_for``)."""
    with MemberWatcher(
        settings.transport(), group=group, ready_timeout=settings.ready_timeout
    ) as watcher:
        committed = read_groups(settings, group, timeout)
        topics = {t for offsets in committed.values() for t, _ in offsets}
        heads = topic_heads(settings, topics, timeout)
        messages = MessageCounter(settings)
        messages.count(committed, heads, timeout)
        watcher.listen(listen_for(settings))
        return group_rows(committed, heads, watcher.members(), messages)


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
        messages = "?" if found["lag"] is None else found["lag"]
        lines.append(
            f"group {found['group']}: {len(members)} member(s), lag {messages} messages "
            f"({found['lag_records']} RECORDs)"
        )
        for m in members:
            instance = f" ({m['instance']})" if m["instance"] else ""
            reads = ", ".join(f"{t}/{p}" for t, p in m["partitions"]) or "-"
            pending = m.get("pending") or []
            waits = f" (pending: {', '.join(pending)})" if pending else ""
            lines.append(f"  member {m['member']}{instance}: {reads}{waits}")
        rows = [("TOPIC", "PARTITION", "COMMITTED", "HEAD", "LAG", "LAG-RECORDS")]
        for p in found["partitions"]:
            committed = str(p["committed"]) + (f"+{p['index']}" if p["index"] else "")
            head = "?" if p["head"] is None else str(p["head"])
            lag = "?" if p["lag"] is None else str(p["lag"])
            records = "?" if p["lag_records"] is None else str(p["lag_records"])
            rows.append((p["topic"], p["partition"], committed, head, lag, records))
        widths = [max(len(r[i]) for r in rows) for i in range(6)]
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
    messages = MessageCounter(settings)
    messages.count(committed, heads, timeout)
    return group_rows(committed, heads, messages=messages)


__all__ = [
    "MESSAGE_LAG_RECORDS",
    "MemberLag",
    "MessageCounter",
    "group_lines",
    "group_rows",
    "groups_report",
    "read_groups",
    "report_heads",
    "status_groups",
    "topic_heads",
]
