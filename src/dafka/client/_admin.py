"""The admin handle: list and describe topics, delete a topic's data on every store.

``with Admin(towers="10.0.0.1:5556") as admin:`` - each call joins the cluster for its
duration with the node it needs and leaves (no thread in between calls):

* :meth:`Admin.topics` / :meth:`Admin.describe` read what the cluster announces, through a
  :class:`ClusterWatcher` (the view of ``dafka status`` / ``dafka topics``): every topic's
  partitions with their heads, the head each live store holds, the live producers.
* :meth:`Admin.delete_topic` deletes a topic's records on every store with a *tombstone*
  (``dafka.records.TopicDelete``): a RECORD of the control topic ``DELETE_TOPIC`` naming,
  per partition, the last sequence to delete - the head the admin saw (the *cut*). Stores
  store, replicate and ACK it like any record, and apply it when they store it
  (``dafka.server``: the records up to the cut leave the log, the writer moves past them
  and ACKs through the cut), so the call returns once every live store ACKed it, i.e.
  applied it. A store that was down fetches the tombstone from the others when it comes
  back (every store asks for the control topic's heads) and applies it then. A producer
  still writing is safe: its records after the cut are kept (they are not part of the
  delete) and those up to the cut that were still in flight are ACKed and dropped. The
  protocol is unchanged: a C store stores the tombstone and ignores it.
* :meth:`Admin.offsets_for_times`: the timestamp search of :class:`Consumer`, without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dafka.client._cluster import ClusterSnapshot, ClusterWatcher
from dafka.client._errors import DeliveryError, NoStoreError
from dafka.client._producer import Producer
from dafka.client._settings import ConsumerSettings, common_fields, resolve_settings
from dafka.client._timestamps import TimestampSearch, checked_times
from dafka.errors import ConfigError
from dafka.lifecycle import Closing
from dafka.node import check_name
from dafka.records import DELETE_TOPIC, TopicDelete, encode_delete

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition as the cluster announces it."""

    partition: str
    head: int
    """The highest sequence anyone announced (-1: none)."""
    producer_head: int | None
    """What its live producer announces (None: no live producer)."""
    stores: Mapping[str, int | None]
    """Each live store's reader id -> the head it holds (None: nothing of it)."""

    @property
    def lag(self) -> int:
        """How far the furthest-behind live store is from :attr:`head`."""
        return max((self.head - (-1 if h is None else h) for h in self.stores.values()), default=0)


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic as the cluster announces it (:meth:`Admin.describe`)."""

    topic: str
    partitions: Mapping[str, PartitionInfo]
    producers: tuple[str, ...]
    """Live producers (partition ids) of the topic."""
    consumed: bool
    """A live consumer subscribes to it."""

    @property
    def heads(self) -> dict[str, int]:
        return {p: info.head for p, info in self.partitions.items()}

    @property
    def records(self) -> int:
        """RECORDs up to the heads (retention and deletes may have removed the first)."""
        return sum(info.head + 1 for info in self.partitions.values())


INTERNAL_PREFIX = "__dafka_"
"""Dafka's own topics (``__dafka_offsets``: group commits, ``__dafka_txn``: transaction
logs, ``__dafka_deletes``: the deletes themselves, ``__dafka_spark``: the Spark sink's
control topic) start with it. :meth:`Admin.delete_topic` refuses them, as Kafka refuses
its internal topics: deleting ``__dafka_offsets`` wiped every group's commits, and a group
member then waited for them forever."""


class Admin(Closing):
    """``Admin(towers=..., **fields)``: the joining fields of :class:`ConsumerSettings`
    (``towers``, ``beacon_interval``, ``advertised_host``, ``bind_host``, security...)."""

    def __init__(self, *, settings: ConsumerSettings | None = None, **fields: Any) -> None:
        self.settings = resolve_settings(ConsumerSettings, settings, fields)
        self._transport = self.settings.transport()

    def topics(self, wait: float | None = None) -> dict[str, TopicInfo]:
        """Every topic the cluster announces (listens up to ``wait`` seconds, less once the
        view settled; default: 6 beacon intervals, at least 6 s)."""
        snapshot = self._watch((), wait)
        return {t: _topic(snapshot, t) for t in snapshot.view.topics if _listed(snapshot, t)}

    def describe(self, topic: str, wait: float | None = None) -> TopicInfo:
        """One topic: partitions, heads, each store's head, live producers (a topic nobody
        knows has no partitions)."""
        check_name("topic", topic)
        return _topic(self._watch((topic,), wait), topic)

    def delete_topic(self, topic: str, timeout: float = 30.0) -> dict[str, int]:
        """Delete ``topic``'s records on every store, up to the heads seen now (see the
        module docstring); returns the cut of each partition ({} if nobody knows the
        topic). Returns once every live store applied it; :class:`NoStoreError` if no
        store is live, :class:`DeliveryError` if not every live store ACKed the
        tombstone within ``timeout`` (those that did applied it; the others apply it
        when they get it)."""
        check_name("topic", topic)
        if topic.startswith(INTERNAL_PREFIX):
            raise ConfigError(
                f"{topic!r} is an internal topic (every {INTERNAL_PREFIX}* topic is dafka's: "
                "group offsets, transaction logs, the deletes themselves): it is not deleted "
                "(store retention trims it)"
            )
        snapshot = self._watch((topic,), None)
        view = snapshot.view
        cuts = {p: view.heads[(topic, p)] for p in view.partitions(topic)}
        cuts = {p: h for p, h in cuts.items() if h >= 0}
        live = [s for s in view.stores if s.live]
        if not live:
            raise NoStoreError("no live store: a delete is applied by the stores")
        if not cuts:
            return {}
        common = common_fields(self.settings)
        with Producer(
            DELETE_TOPIC,
            batching=False,
            partitions=1,
            min_stores=len(live),
            delivery_timeout=timeout,
            **common,
        ) as producer:
            producer.send(encode_delete(TopicDelete(topic, cuts)))
            if producer.flush(timeout) != 0:
                raise DeliveryError(
                    f"the delete of {topic!r} was not ACKed by all {len(live)} live stores "
                    f"within {timeout} s (those that ACKed applied it; the others apply it "
                    "when they get it)"
                )
        return cuts

    def offsets_for_times(
        self, times: Mapping[Key, int], timeout: float = 10.0
    ) -> dict[Key, int | None]:
        """:meth:`Consumer.offsets_for_times`, without a consumer."""
        wanted = checked_times(times)
        with TimestampSearch(self._transport, ready_timeout=self.settings.ready_timeout) as s:
            return s.offsets_for_times(wanted, timeout=timeout)

    def _watch(self, topics: tuple[str, ...], wait: float | None) -> ClusterSnapshot:
        interval = self._transport.beacon_interval
        wait = wait if wait is not None else max(6.0, 6 * interval)
        refresh = min(0.5, interval)
        with ClusterWatcher(
            self._transport, topics, refresh=refresh, ready_timeout=self.settings.ready_timeout
        ) as watcher:
            at_least = max(1.5, watcher.listen_first + 0.5, 3 * interval)
            return watcher.wait_settled(
                quiet=max(0.5, 2 * refresh), timeout=wait, at_least=min(wait, at_least)
            )

    def close(self) -> None:
        """Nothing to release: every call leaves the cluster before it returns."""


def _listed(snapshot: ClusterSnapshot, topic: str) -> bool:
    view = snapshot.view
    return bool(
        view.partitions(topic) or topic in view.producers.values() or topic in view.consumed_topics
    )


def _topic(snapshot: ClusterSnapshot, topic: str) -> TopicInfo:
    view = snapshot.view
    live = [s for s in view.stores if s.live]
    partitions = {
        p: PartitionInfo(
            p,
            view.heads[(topic, p)],
            view.announced.get((topic, p)),
            {s.reader_id: s.heads.get((topic, p)) for s in live},
        )
        for p in view.partitions(topic)
    }
    producers = tuple(sorted(p for p, t in view.producers.items() if t == topic))
    return TopicInfo(topic, partitions, producers, topic in view.consumed_topics)


__all__ = ["Admin", "PartitionInfo", "TopicInfo"]
