"""The in-order reader of many partitions: one rule for taking the next record.

Shared by the consumer (which hands what it took to the application, ``Deliver``) and the
store's writer (which persists it, ``Persist``). Every record a reader gets for a partition
(a :class:`~dafka.node._catchup.Cursor`) is one of three things:

* the next one (``last + 1``): taken - appended to the cursor's *pending run*, which the
  machine hands out once per drain of its outbox (:meth:`PartitionReader.take_dirty`). If
  a FETCH is open, records kept ahead that now follow are taken too, and the fetch is told
  of the progress (next window, or caught up);
* ahead of it: kept (within one window) and the gap fetched
  (:meth:`~dafka.node._catchup.FetchScheduler.early`);
* behind it: a duplicate, dropped - but if it came in a FETCH reply while the cursor is
  fetching, it shows the replier working through an earlier FETCH of the partition, and it
  holds the retry off (:meth:`~dafka.node._catchup.FetchScheduler.answered`, bounded: the
  FETCH retry storm of a store starved of CPU).

A run of consecutive records that continues a partition is taken whole
(:meth:`PartitionReader.take_run`): that is what makes the steady state cost a list extend
per run rather than a call per record. The machines keep only their dispatch (which cursor,
whose message) and what is their own (a consumer's end offsets, a store's ACKs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dafka.node._catchup import Cursor, FetchScheduler
from dafka.node.actions import Action, RecordRuns
from dafka.protocol import Record

if TYPE_CHECKING:
    from dafka.protocol import DataMessage


class PartitionReader:
    """Takes records of many partitions in order; see the module docstring."""

    __slots__ = ("_fetcher", "arrived_ahead", "dirty", "duplicates")

    def __init__(self, fetcher: FetchScheduler) -> None:
        self._fetcher = fetcher
        self.dirty: list[Cursor] = []
        """Cursors with a pending run, in the order they got its first record."""
        self.arrived_ahead = 0
        """Records that arrived ahead of their partition's next sequence."""
        self.duplicates = 0
        """Records at or below their partition's last sequence (dropped)."""

    def take(
        self, cursor: Cursor, sequence: int, content: bytes, now: float, out: list[Action]
    ) -> None:
        """Take record ``sequence``, which must be ``cursor.last + 1``."""
        cursor.last = sequence
        pending = cursor.pending
        if not pending:
            cursor.pending_first = sequence
            self.dirty.append(cursor)
        pending.append(content)
        if cursor.fetching:
            self._progress(cursor, now, out)

    def take_run(
        self,
        cursor: Cursor | None,
        first: int,
        contents: Sequence[bytes],
        now: float,
        out: list[Action],
        *,
        while_fetching: bool,
    ) -> bool:
        """Take ``contents`` (at ``first, first + 1, ...``) whole if they continue ``cursor``.

        False (nothing taken) when they do not, when records are kept ahead, when the run
        crosses the cursor's limit, or - unless ``while_fetching`` (a FETCH reply) - while a
        FETCH is open: the caller then feeds the run record by record. A FETCH reply that
        starts behind ``last + 1`` (a replier working through an earlier FETCH) has its
        duplicates dropped at once, and the rest taken whole if it can be. Taking it whole
        ends in the same state as feeding it one by one.
        """
        if cursor is None or not contents:
            return False
        behind = cursor.last + 1 - first
        if behind:
            if behind < 0 or not while_fetching:
                return False
            return self._take_reply_behind(cursor, first, behind, contents, now, out)
        if cursor.ahead or (cursor.fetching and not while_fetching):
            return False
        last = first + len(contents) - 1
        if last > cursor.limit:
            return False
        pending = cursor.pending
        if not pending:
            cursor.pending_first = first
            self.dirty.append(cursor)
        pending.extend(contents)
        cursor.last = last
        if cursor.fetching:
            self._progress(cursor, now, out)
        return True

    def offer(
        self,
        cursor: Cursor,
        sequence: int,
        content: bytes,
        direct: bool,
        now: float,
        out: list[Action],
    ) -> None:
        """Any record of ``cursor``'s partition: take it, keep it ahead, or drop it.

        ``direct``: it came in a FETCH reply (a DIRECT-RECORD), where arriving ahead means a
        hole in the reply rather than a gap in the live stream.
        """
        last = cursor.last
        if sequence == last + 1:
            self.take(cursor, sequence, content, now, out)
        elif sequence > last:
            self.arrived_ahead += 1
            self._fetcher.early(cursor, sequence, content, direct, now, out)
        else:
            self.duplicates += 1
            if direct and cursor.fetching:
                self._fetcher.answered(cursor, now)

    def take_dirty(self) -> list[Cursor]:
        """The cursors with a pending run (the caller hands the runs out and clears them)."""
        dirty, self.dirty = self.dirty, []
        return dirty

    def _take_reply_behind(
        self,
        cursor: Cursor,
        first: int,
        behind: int,
        contents: Sequence[bytes],
        now: float,
        out: list[Action],
    ) -> bool:
        """:meth:`take_run` of a FETCH reply whose first ``behind`` records are duplicates:
        drop them (they hold the retry off) and take the rest whole - or, if the rest cannot
        be taken whole, do nothing and return False (the caller feeds it all one by one)."""
        count = len(contents)
        if behind >= count:
            if first + count - 1 > cursor.limit:
                return False
        elif not self.take_run(
            cursor, first + behind, contents[behind:], now, out, while_fetching=True
        ):
            return False
        self.duplicates += min(behind, count)
        if cursor.fetching:
            self._fetcher.answered(cursor, now)
        return True

    def _progress(self, cursor: Cursor, now: float, out: list[Action]) -> None:
        """A fetching cursor took a record: take what was kept ahead and now follows, then
        let the fetch move on."""
        ahead = cursor.ahead
        if ahead:
            nxt = cursor.last + 1
            content = ahead.pop(nxt, None)
            while content is not None:
                cursor.pending.append(content)
                cursor.last = nxt
                nxt += 1
                content = ahead.pop(nxt, None)
        self._fetcher.progress(cursor, now, out)


class ReaderRuns(RecordRuns):
    """:meth:`on_records` of a machine that reads partitions with a :class:`PartitionReader`
    (the consumer and the store's writer): the run grouping is the reader's, not theirs."""

    _cursors: dict[tuple[str, str], Cursor]
    _in_order: PartitionReader
    _out: list[Action]

    if TYPE_CHECKING:

        def on_message(self, message: DataMessage, now: float) -> None: ...

    def on_records(
        self, topic: str, producer: str, first_sequence: int, contents: Sequence[bytes], now: float
    ) -> None:
        """A run of RECORDs of one partition: ``contents[i]`` at ``first_sequence + i``.

        Exactly what ``on_message(Record(topic, producer, first_sequence + i, contents[i]),
        now)`` for each ``i`` in order does, for a driver that receives a burst of one
        partition: the in-order case (the steady state) takes the whole run at once instead
        of building and dispatching one ``Record`` per record; anything else goes record by
        record through ``on_message``.
        """
        cursor = self._cursors.get((topic, producer))
        if self._in_order.take_run(
            cursor, first_sequence, contents, now, self._out, while_fetching=False
        ):
            return
        if cursor is None and self._unread_run(topic, producer, first_sequence, contents):
            return
        on_message = self.on_message
        for offset, content in enumerate(contents):
            on_message(Record(topic, producer, first_sequence + offset, content), now)

    def _unread_run(self, topic: str, producer: str, first: int, contents: Sequence[bytes]) -> bool:
        """A run of a partition the machine has no cursor for: True if the machine took it
        whole (a consumer's group partition it does not own), False to feed it record by
        record. A hook rather than an override of :meth:`on_records`, so that the steady
        state (a cursor that takes the run) pays no second call."""
        return False


__all__ = ["PartitionReader", "ReaderRuns"]
