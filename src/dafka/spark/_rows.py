"""RECORD contents -> Arrow RecordBatches of the source schema (executor side).

A RECORD is either a batch (``dafka.client._batch``: many messages, recognised by its magic)
or a plain record (one message whose value is the whole content). Rows are built column by
column and in bulk, never one Python object per message on the common path:

* a batched RECORD becomes Arrow arrays over its own bytes (``_arrow_batch.batch_arrays``:
  the value column is the RECORD's data with offsets computed by Arrow); a batch with
  headers goes through the reference decoder instead;
* a run of plain RECORDs becomes one binary array from the list of contents;
* the constant columns (topic, partition, a batch's offset) are ``pa.repeat``s, the index
  column a slice of a cached ``0..n`` array.

Chunks are concatenated into batches of about ``ROWS_PER_BATCH`` rows (a batch ends at a
RECORD boundary). Messages a read-committed consumer delivered (:class:`Record` tuples) are
added with :meth:`RowBuilder.add_records`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat

import pyarrow as pa

from dafka.client._batch import MAGIC, decode_batch
from dafka.client._errors import CorruptBatchError
from dafka.client._records import Record
from dafka.spark._arrow_batch import batch_arrays
from dafka.spark._schema import SOURCE_ARROW_SCHEMA

ROWS_PER_BATCH = 65_536
"""Rows per Arrow batch handed to Spark (about: a batch ends at a RECORD boundary)."""

_TYPES = [field.type for field in SOURCE_ARROW_SCHEMA]
_OFFSET, _INDEX, _KEY, _VALUE, _HEADERS, _TIMESTAMP, _UUID = _TYPES[2:]
_startswith = bytes.startswith

Chunk = tuple[int, list[pa.Array]]
"""``(rows, [offset, index, key, value, headers, timestamp, uuid])``."""

_ARANGE = pa.array(range(ROWS_PER_BATCH), _INDEX)


def _indexes(n: int) -> pa.Array:
    """``0, 1, ..., n - 1`` as the index column (a slice of a cached array)."""
    if n > len(_ARANGE):
        return pa.array(range(n), _INDEX)
    return _ARANGE.slice(0, n)


def _header_lists(headers: Iterable[Sequence[tuple[str, bytes]]]) -> list[object]:
    return [[{"key": k, "value": v} for k, v in h] if h else None for h in headers]


def _python_chunk(
    offsets: Sequence[int],
    indexes: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes],
    headers: Sequence[Sequence[tuple[str, bytes]]],
    timestamps: Sequence[int | None],
    uuids: Sequence[bytes | None],
) -> Chunk:
    """A chunk from Python columns (batches with headers, read-committed records)."""
    n = len(values)
    return n, [
        pa.array(offsets, _OFFSET),
        pa.array(indexes, _INDEX),
        pa.array(keys, _KEY),
        pa.array(values, _VALUE),
        pa.array(_header_lists(headers), _HEADERS) if any(headers) else pa.nulls(n, _HEADERS),
        pa.array([None if t is None else t * 1000 for t in timestamps], _TIMESTAMP),
        pa.array(uuids, _UUID),
    ]


class RowBuilder:
    """Accumulates the messages of one partition's RECORDs and cuts them into batches.

    ``corrupt`` counts RECORDs that start with the batch magic but fail its checks: they are
    reported (and skipped), never delivered as garbage.
    """

    def __init__(self, topic: str, partition: str, rows_per_batch: int = ROWS_PER_BATCH) -> None:
        self.topic = topic
        self.partition = partition
        self.rows_per_batch = rows_per_batch
        self.corrupt = 0
        self._chunks: list[Chunk] = []
        self._rows = 0

    def add_run(self, first_sequence: int, contents: Sequence[bytes]) -> Iterator[pa.RecordBatch]:
        """Add consecutive RECORDs from ``first_sequence``; yields full batches as they fill."""
        flags = list(map(_startswith, contents, repeat(MAGIC)))
        at = 0
        n = len(contents)
        while at < n:
            if not flags[at]:  # a run of plain RECORDs: one array
                stop = flags.index(True, at) if True in flags[at:] else n
                self._plain(first_sequence + at, contents[at:stop])
                at = stop
            else:
                self._batch(first_sequence + at, contents[at])
                at += 1
            if self._rows >= self.rows_per_batch:
                yield self._cut()

    def add_records(self, records: Sequence[Record]) -> Iterator[pa.RecordBatch]:
        """Add messages a consumer delivered (read_committed); yields full batches."""
        if not records:
            return
        columns = list(zip(*records, strict=True))
        self._add(_python_chunk(*columns[2:]))
        if self._rows >= self.rows_per_batch:
            yield self._cut()

    def finish(self) -> Iterator[pa.RecordBatch]:
        """The last, partial batch (if any)."""
        if self._rows:
            yield self._cut()

    def _add(self, chunk: Chunk) -> None:
        self._chunks.append(chunk)
        self._rows += chunk[0]

    def _plain(self, first: int, contents: Sequence[bytes]) -> None:
        n = len(contents)
        self._add(
            (
                n,
                [
                    pa.array(range(first, first + n), _OFFSET),
                    pa.repeat(pa.scalar(0, _INDEX), n),
                    pa.nulls(n, _KEY),
                    pa.array(contents, _VALUE),
                    pa.nulls(n, _HEADERS),
                    pa.nulls(n, _TIMESTAMP),
                    pa.nulls(n, _UUID),
                ],
            )
        )

    def _batch(self, sequence: int, content: bytes) -> None:
        try:
            found = batch_arrays(content)
            if found is None:  # headers: the reference decoder
                cols = decode_batch(content)
                n = len(cols.values)
                self._add(
                    _python_chunk(
                        [sequence] * n,
                        range(n),
                        cols.keys,
                        cols.values,
                        cols.headers,
                        cols.timestamps,
                        cols.uuids,
                    )
                )
                return
        except CorruptBatchError:
            self.corrupt += 1
            return
        n, (keys, values, timestamps, uuids) = found
        offsets = pa.repeat(pa.scalar(sequence, _OFFSET), n)
        headers = pa.nulls(n, _HEADERS)
        self._add((n, [offsets, _indexes(n), keys, values, headers, timestamps, uuids]))

    def _cut(self) -> pa.RecordBatch:
        chunks, n = self._chunks, self._rows
        self._chunks, self._rows = [], 0
        if len(chunks) == 1:
            columns = chunks[0][1]
        else:
            columns = [pa.concat_arrays([c[1][i] for c in chunks]) for i in range(7)]
        arrays = [
            pa.repeat(pa.scalar(self.topic, _TYPES[0]), n),
            pa.repeat(pa.scalar(self.partition, _TYPES[1]), n),
            *columns,
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=SOURCE_ARROW_SCHEMA)


__all__ = ["ROWS_PER_BATCH", "RowBuilder"]
