"""RECORD contents -> Arrow RecordBatches of the source schema (executor side).

A RECORD is either a batch (``dafka.records``: many messages, recognised by its magic)
or a plain record (one message whose value is the whole content). Rows are built column by
column and in bulk, never one Python object per message on the common path:

* a batched RECORD becomes Arrow arrays over its own bytes (``dafka.records.arrow``, which
  the consumer's ``RecordColumns.to_arrow`` shares: the value column is the RECORD's data
  with offsets computed by Arrow); a batch with headers goes through the reference decoder;
* a run of plain RECORDs becomes one binary array from the list of contents;
* the constant columns (topic, partition, a batch's offset) are ``pa.repeat``s, the index
  column a slice of a cached ``0..n`` array.

Chunks are concatenated into batches of about ``ROWS_PER_BATCH`` rows (a batch ends at a
RECORD boundary). Messages a read-committed consumer delivered (:class:`Record` tuples) are
added with :meth:`RowBuilder.add_records`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import repeat

import pyarrow as pa

from dafka.records import MAGIC, CorruptBatchError, Record
from dafka.records.arrow import Chunk, batch_chunk, plain_chunk, python_chunk, record_batch

ROWS_PER_BATCH = 65_536
"""Rows per Arrow batch handed to Spark (about: a batch ends at a RECORD boundary)."""

_startswith = bytes.startswith


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
        self._add(python_chunk(*columns[2:]))
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
        self._add(plain_chunk(first, contents))

    def _batch(self, sequence: int, content: bytes) -> None:
        try:
            self._add(batch_chunk(sequence, content))
        except CorruptBatchError:
            self.corrupt += 1

    def _cut(self) -> pa.RecordBatch:
        chunks = self._chunks
        self._chunks, self._rows = [], 0
        return record_batch(self.topic, self.partition, chunks)


__all__ = ["ROWS_PER_BATCH", "RowBuilder"]
