"""What :meth:`Consumer.poll_columns` returns: the messages of one poll, column by column.

``poll`` hands out one :class:`Record` tuple per message; at a million messages a second
that tuple (and the collector's attention to it) is most of the consumer's cost. A
:class:`RecordColumns` holds the same messages, in the same order, as the *parts* the poll
took from the queue - a run of plain RECORDs (its contents list), a batched RECORD or a
slice of one (its bytes, checked when taken, decoded when a column is first read), or
Records (what a read-committed consumer delivers) - and builds a column only when it is
read: ``values`` of a plain run is the contents list itself, a batched RECORD's come from
its decoded columns, and no per-message tuple is made. Columns are built once and cached
(the same list is returned each time: copy it before changing it).

``to_arrow()`` builds a ``pyarrow.Table`` of :data:`dafka.records.arrow.SCHEMA` (the Spark
source's columns) with the Spark source's builders: a batched RECORD's ``key`` and
``value`` arrays are laid over the RECORD's own bytes. pyarrow is optional: without it
``to_arrow`` raises ``ImportError`` naming the extra (``pip install 'dafka[arrow]'``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol

from dafka.records._batch import BatchColumns, BatchLayout, decode_checked
from dafka.records._record import Record

if TYPE_CHECKING:
    import pyarrow as pa

    from dafka.records.arrow import Chunk

_new_record = tuple.__new__
"""``tuple.__new__(Record, fields)``: what ``Record._make`` does, without its Python frame."""

ARROW_EXTRA = "pip install 'dafka[arrow]'"

TOPIC, PARTITION, OFFSET, INDEX, KEY, VALUE, HEADERS, TIMESTAMP, UUID = range(9)
"""Field numbers of a :class:`Record` (and of the columns)."""

_FIELDS = [itemgetter(field) for field in range(UUID + 1)]


class CheckedBatch:
    """A batched RECORD that passed its checks; decoded once, when first read."""

    __slots__ = ("_columns", "content", "count", "layout", "offset", "partition", "topic")

    def __init__(
        self,
        topic: str,
        partition: str,
        offset: int,
        content: bytes,
        layout: BatchLayout,
        columns: BatchColumns | None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.content = content
        self.layout = layout
        self.count = layout.messages
        self._columns = columns

    def columns(self) -> BatchColumns:
        found = self._columns
        if found is None:
            found = self._columns = decode_checked(self.content, self.layout)
        return found


class Part(Protocol):
    """Some consecutive messages of one poll."""

    @property
    def size(self) -> int: ...

    def column(self, field: int) -> list[Any]:
        """Field ``field`` (a :class:`Record` field number) of every message."""

    def records(self) -> list[Record]: ...

    def partition_key(self) -> tuple[str, str] | None:
        """``(topic, partition)`` when every message is of one partition (Arrow chunks)."""

    def chunk(self) -> Chunk: ...


class PlainRun:
    """Consecutive plain RECORDs of one partition: one message each, value = content."""

    __slots__ = ("contents", "first", "partition", "size", "topic")

    def __init__(self, topic: str, partition: str, first: int, contents: Sequence[bytes]) -> None:
        self.topic = topic
        self.partition = partition
        self.first = first
        self.contents = contents
        self.size = len(contents)

    def column(self, field: int) -> list[Any]:
        n = self.size
        if field == VALUE:
            contents = self.contents
            return contents if type(contents) is list else list(contents)
        if field == OFFSET:
            return list(range(self.first, self.first + n))
        if field == TOPIC:
            return [self.topic] * n
        if field == PARTITION:
            return [self.partition] * n
        if field == INDEX:
            return [0] * n
        if field == HEADERS:
            return [()] * n
        return [None] * n

    def records(self) -> list[Record]:
        return list(
            map(
                _new_record,
                repeat(Record),
                zip(
                    repeat(self.topic),
                    repeat(self.partition),
                    range(self.first, 1 << 64),
                    repeat(0),
                    repeat(None),
                    self.contents,
                    repeat(()),
                    repeat(None),
                    repeat(None),
                ),
            )
        )

    def partition_key(self) -> tuple[str, str]:
        return self.topic, self.partition

    def chunk(self) -> Chunk:
        from dafka.records.arrow import plain_chunk

        return plain_chunk(self.first, self.contents)


class BatchSlice:
    """Messages ``[start, stop)`` of one batched RECORD."""

    __slots__ = ("batch", "size", "start", "stop")

    def __init__(self, batch: CheckedBatch, start: int, stop: int) -> None:
        self.batch = batch
        self.start = start
        self.stop = stop
        self.size = stop - start

    def column(self, field: int) -> list[Any]:
        batch = self.batch
        if field >= KEY:  # BatchColumns: keys, values, headers, timestamps, uuids
            found: list[Any] = batch.columns()[field - KEY]
            if self.size == batch.count:
                return found
            return found[self.start : self.stop]
        if field == INDEX:
            return list(range(self.start, self.stop))
        return [(batch.topic, batch.partition, batch.offset)[field]] * self.size

    def records(self) -> list[Record]:
        batch = self.batch
        cols = batch.columns()
        start, stop = self.start, self.stop
        whole = self.size == batch.count
        return list(
            map(
                _new_record,
                repeat(Record),
                zip(
                    repeat(batch.topic),
                    repeat(batch.partition),
                    repeat(batch.offset),
                    range(start, stop),
                    *(c if whole else c[start:stop] for c in cols),
                ),
            )
        )

    def partition_key(self) -> tuple[str, str]:
        return self.batch.topic, self.batch.partition

    def chunk(self) -> Chunk:
        from dafka.records.arrow import batch_chunk

        batch = self.batch
        return batch_chunk(batch.offset, batch.content, self.start, self.stop, checked=True)


class RecordRun:
    """Records already built (what a read-committed consumer delivers; any partitions)."""

    __slots__ = ("records_", "size")

    def __init__(self, records: list[Record]) -> None:
        self.records_ = records
        self.size = len(records)

    def column(self, field: int) -> list[Any]:
        # One field at a time: reading ``values`` alone does not transpose all nine.
        return list(map(_FIELDS[field], self.records_))

    def records(self) -> list[Record]:
        return self.records_

    def partition_key(self) -> None:
        return None

    def chunk(self) -> Chunk:
        from dafka.records.arrow import python_chunk

        return python_chunk(*(self.column(f) for f in range(OFFSET, UUID + 1)))


def _arrow() -> Any:
    try:  # by name: the package attribute of an earlier import must not hide a failing one
        return importlib.import_module("dafka.records.arrow")
    except ImportError as exc:
        raise ImportError(
            f"RecordColumns.to_arrow() needs pyarrow, which is not installed: {ARROW_EXTRA}"
        ) from exc


class RecordColumns:
    """The messages of one :meth:`Consumer.poll_columns`, as columns (see the module doc).

    ``len(c)``; ``c.topics``, ``partitions``, ``offsets``, ``indexes``, ``keys``, ``values``,
    ``headers``, ``timestamps``, ``uuids``: lists, one entry per message, in ``poll`` order
    (built on first read, then cached: do not change them); ``iter(c)``: the same messages
    as :class:`Record`; ``c.to_arrow()``: a ``pyarrow.Table`` with those columns.
    """

    __slots__ = ("_cache", "_parts", "_size")

    def __init__(self, parts: Sequence[Part] = ()) -> None:
        self._parts = list(parts)
        self._size = sum(p.size for p in self._parts)
        self._cache: dict[int, list[Any]] = {}

    @classmethod
    def from_records(cls, records: list[Record]) -> RecordColumns:
        return cls([RecordRun(records)] if records else [])

    @classmethod
    def concat(cls, many: Sequence[RecordColumns]) -> RecordColumns:
        """The messages of ``many``, in order, as one :class:`RecordColumns` (their parts
        joined: nothing is decoded or copied, and ``to_arrow()`` of the result builds one
        batch per run of a partition where each would have built its own)."""
        if len(many) == 1:
            return many[0]
        return cls([part for columns in many for part in columns._parts])

    @property
    def parts(self) -> list[Part]:
        """The runs of messages it holds, in order (do not change them)."""
        return self._parts

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def __iter__(self) -> Iterator[Record]:
        for part in self._parts:
            yield from part.records()

    def __repr__(self) -> str:
        return f"<RecordColumns of {self._size} messages in {len(self._parts)} parts>"

    def records(self) -> list[Record]:
        """Every message as a :class:`Record` (what ``poll`` would have returned)."""
        out: list[Record] = []
        for part in self._parts:
            out += part.records()
        return out

    def _column(self, field: int) -> list[Any]:
        found = self._cache.get(field)
        if found is None:
            parts = self._parts
            if len(parts) == 1:
                found = parts[0].column(field)
            else:
                found = []
                for part in parts:
                    found += part.column(field)
            self._cache[field] = found
        return found

    @property
    def topics(self) -> list[str]:
        return self._column(TOPIC)

    @property
    def partitions(self) -> list[str]:
        return self._column(PARTITION)

    @property
    def offsets(self) -> list[int]:
        """The sequence of the RECORD that carried each message."""
        return self._column(OFFSET)

    @property
    def indexes(self) -> list[int]:
        """Each message's position inside its batched RECORD (0 for a plain one)."""
        return self._column(INDEX)

    @property
    def keys(self) -> list[bytes | None]:
        return self._column(KEY)

    @property
    def values(self) -> list[bytes]:
        return self._column(VALUE)

    @property
    def headers(self) -> list[tuple[tuple[str, bytes], ...]]:
        return self._column(HEADERS)

    @property
    def timestamps(self) -> list[int | None]:
        """ms since the epoch, as the producer set them (None: none)."""
        return self._column(TIMESTAMP)

    @property
    def uuids(self) -> list[bytes | None]:
        return self._column(UUID)

    def to_arrow(self) -> pa.Table:
        """A ``pyarrow.Table`` of :data:`dafka.records.arrow.SCHEMA`: ``topic``,
        ``partition`` (string), ``offset`` (int64), ``index`` (int32), ``key``, ``value``
        (binary), ``headers`` (list of struct key: string, value: binary), ``timestamp``
        (timestamp[us, UTC]), ``uuid`` (binary) - the Spark source's columns. One chunk per
        run of a partition's messages. Raises ``ImportError`` without pyarrow."""
        arrow = _arrow()
        batches = []
        run: list[Part] = []
        run_key: tuple[str, str] | None = None
        for part in self._parts:
            key = part.partition_key()
            if run and key != run_key:
                assert run_key is not None
                batches.append(arrow.record_batch(*run_key, _chunks(run)))
                run = []
            if key is None:
                batches.append(arrow.records_batch(part.records()))
                continue
            run_key = key
            run.append(part)
        if run:
            assert run_key is not None
            batches.append(arrow.record_batch(*run_key, _chunks(run)))
        table: pa.Table = arrow.table(batches)
        return table


SMALL_SLICE = 32
"""A batched RECORD's slice of fewer messages becomes Arrow from its decoded columns,
gathered with the small slices next to it into one chunk (``python_chunk``): laying arrays
over a RECORD's bytes costs a dozen pyarrow calls of microseconds each, ~90 us a RECORD
whatever it holds, where a producer sending slowly (``linger_ms`` 5 at 150 msg/s, the
pipeline's) puts one message in most RECORDs; its decoded columns cost ~5 us a message."""


def _chunks(parts: Sequence[Part]) -> list[Chunk]:
    """The Arrow chunks of one partition's consecutive parts: a small batched slice joins
    its small neighbours in one chunk of Python columns, the others are one chunk each."""
    from dafka.records.arrow import python_chunk

    chunks: list[Chunk] = []
    small: list[BatchSlice] = []
    for part in parts:
        if isinstance(part, BatchSlice) and part.size < SMALL_SLICE:
            small.append(part)
            continue
        if small:
            chunks.append(python_chunk(*_joined(small)))
            small = []
        chunks.append(part.chunk())
    if small:
        chunks.append(python_chunk(*_joined(small)))
    return chunks


def _joined(parts: Sequence[BatchSlice]) -> list[list[Any]]:
    """Fields OFFSET..UUID of the messages of ``parts``, each one list."""
    return [[x for part in parts for x in part.column(f)] for f in range(OFFSET, UUID + 1)]


__all__ = ["ARROW_EXTRA", "BatchSlice", "CheckedBatch", "PlainRun", "RecordColumns", "RecordRun"]
