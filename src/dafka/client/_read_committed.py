"""Read committed for applications: a :class:`Consumer` behind a :class:`CommittedFilter`.

The filter (``dafka.records``) is pure: committed records out of all records, each once, ACKs
hidden. This consumer feeds it what it polls and serves the filter's replays (a span that
left the sequencer's ring) with a bounded ``Consumer(assign=..., end_offsets=...)`` read of
the stores: :func:`replay_from_stores`, public so that any owner of a filter (the Spark
source) composes the same pieces. See docs/exactly-once.md.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from dafka.client._consumer import Consumer
from dafka.client._settings import ConsumerSettings, resolve_settings
from dafka.errors import ConfigError
from dafka.records import CommittedFilter, Record, RecordColumns, ReplayFunc
from dafka.transport.runner import DropInbound

Key = tuple[str, str]
_Out = TypeVar("_Out", RecordColumns, list[Record])


class ReadCommittedConsumer(Consumer):
    """A :class:`Consumer` that delivers only committed messages, each once.

    ``from dafka import ReadCommittedConsumer``. Same arguments as :class:`Consumer`, plus
    ``checkpoint=`` (from :meth:`checkpoint`) to resume, ``buffer`` (the sequencer's ring)
    and ``replay_timeout``. A span that left the ring is replayed from the RECORDs the
    filter saw last (32 MiB of them) when it holds them all, else by a bounded read of the
    stores. ``position()`` / ``positions()`` are those of the records read (committed or
    not); resume with :meth:`checkpoint`, which is exact. Its ``settings.isolation_level``
    is ``"read_committed"`` (whatever a shared ``settings=`` said; an explicit
    ``isolation_level="read_uncommitted"`` is a :class:`ConfigError`).
    """

    def __init__(
        self,
        topics: Iterable[str] | str | None = None,
        *,
        checkpoint: Mapping[str, Any] | None = None,
        settings: ConsumerSettings | None = None,
        assign: Mapping[Key, int] | None = None,
        end_offsets: Mapping[Key, int] | None = None,
        start_positions: Mapping[Key, int] | None = None,
        buffer: int = 8192,
        replay_timeout: float = 30.0,
        drop_inbound: DropInbound | None = None,
        **fields: Any,
    ) -> None:
        if fields.get("isolation_level", "read_committed") != "read_committed":
            raise ConfigError(
                f"ReadCommittedConsumer reads committed messages only, not "
                f"isolation_level={fields['isolation_level']!r}: use Consumer for every message"
            )
        wanted = resolve_settings(ConsumerSettings, settings, fields)
        wanted = dataclasses.replace(wanted, isolation_level="read_committed")
        self._inner_settings = dataclasses.replace(
            wanted, isolation_level="read_uncommitted", control_messages=True
        )
        replay = replay_from_stores(self._inner_settings, replay_timeout)
        self._filter = CommittedFilter(checkpoint, replay=replay, buffer=buffer)
        starts = dict(start_positions or {})
        starts.update(self._filter.start_positions())
        assigned = dict(assign or {})
        for key, offset in starts.items():
            if key in assigned:
                assigned[key] = max(assigned[key], offset)
        super().__init__(
            topics,
            settings=self._inner_settings,
            assign=assigned or None,
            end_offsets=end_offsets,
            start_positions=starts or None,
            drop_inbound=drop_inbound,
        )
        self.settings = wanted

    def poll(self, timeout: float | None = 1.0, max_records: int = 10_000) -> list[Record]:
        """Committed messages received so far; waits up to ``timeout`` for some.

        :meth:`poll_columns` as Records, built under the filter's collector pause
        (:meth:`CommittedFilter.feed_columns_records`, as ``Consumer.poll`` builds its
        Records paused): the filter sees the poll's RECORDs, so a span that left its ring
        is replayed from the recent RECORDs it holds rather than from the stores."""
        return self._polled(self._filter.feed_columns_records, timeout, max_records)

    def poll_columns(self, timeout: float | None = 1.0, max_records: int = 10_000) -> RecordColumns:
        """The committed messages received so far, as columns (:meth:`poll` is these as
        Records): the filter takes the poll's RECORDs and releases a commit as slices of
        them (:meth:`CommittedFilter.feed_columns`)."""
        return self._polled(self._filter.feed_columns, timeout, max_records)

    def _polled(
        self, feed: Callable[[RecordColumns], _Out], timeout: float | None, max_records: int
    ) -> _Out:
        """``feed`` of the consumer's polls until it releases something, the consumer
        closes or ``timeout`` passes (the filter may hold a whole poll: a span not yet
        committed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            out = feed(super().poll_columns(remaining, max_records))
            if out or self._closed or (deadline is not None and time.monotonic() >= deadline):
                return out

    def _poll_now(self, max_records: int) -> list[Record]:
        """Committed messages of what is queued, without waiting (the asyncio flavour)."""
        return self._filter.feed_columns_records(super()._poll_columns_now(max_records))

    def _poll_columns_now(self, max_records: int) -> RecordColumns:
        return self._filter.feed_columns(super()._poll_columns_now(max_records))

    def checkpoint(self) -> dict[str, Any]:
        """Positions and producer states (JSON-able): store it atomically with your output."""
        return self._filter.checkpoint()

    def last_stable_position(self, topic: str, partition: str) -> int:
        """The offset below which every message of the partition read so far is decided."""
        return self._filter.last_stable_position(topic, partition)

    def last_stable_positions(self) -> dict[Key, int]:
        return self._filter.last_stable_positions()

    @property
    def replays(self) -> int:
        """Spans served by a bounded read of the stores."""
        return self._filter.replays

    @property
    def replays_recent(self) -> int:
        """Spans served from the RECORDs the filter saw last (no read of the stores)."""
        return self._filter.replays_recent


def replay_from_stores(settings: ConsumerSettings, idle_timeout: float = 30.0) -> ReplayFunc:
    """The ``replay`` a :class:`CommittedFilter` calls for a span that left its ring, served
    by a bounded read of the stores: ``Consumer(assign={key: first}, end_offsets={key: last
    + 1})`` with ``settings`` (read_uncommitted), read to its end. Records that are gone, or
    that do not come within ``idle_timeout`` seconds, raise :class:`DataLossError` (the
    filter keeps what it holds, and its next ``feed`` retries the replay). The RECORDs come
    back as one :class:`RecordColumns` (the polls' parts joined): the filter replays a
    batched RECORD's run as one item and releases it as slices, no Record per message."""
    inner = dataclasses.replace(
        settings,
        isolation_level="read_uncommitted",
        latest_settle=0.0,
        fail_on_data_loss=True,
        control_messages=True,
    )

    def replay(topic: str, partition: str, first: int, last: int) -> RecordColumns:
        key = (topic, partition)
        with Consumer(settings=inner, assign={key: first}, end_offsets={key: last + 1}) as reader:
            return RecordColumns.concat(list(reader.read_to_end(idle_timeout)))

    return replay


__all__ = ["ReadCommittedConsumer", "replay_from_stores"]
