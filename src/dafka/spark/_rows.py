"""RECORD contents -> Arrow RecordBatches of the source schema (executor side).

A RECORD is either a batch (``dafka.client._batch``: many messages, recognised by its magic)
or a plain record (one message whose value is the whole content). Rows are built column by
column: Python lists that grow per message, turned into Arrow arrays once per output batch,
because building Arrow arrays is cheap per column and expensive per row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from dafka.client._batch import decode_batch, is_batch
from dafka.client._errors import CorruptBatchError
from dafka.spark._schema import SOURCE_ARROW_SCHEMA

ROWS_PER_BATCH = 65_536
"""Rows per Arrow batch handed to Spark: large enough to amortise, small enough to stream."""

_TYPES = [field.type for field in SOURCE_ARROW_SCHEMA]


class _Columns:
    __slots__ = ("headers", "indexes", "keys", "offsets", "size", "timestamps", "uuids", "values")

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.indexes: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes] = []
        self.headers: list[list[dict[str, object]] | None] = []
        self.timestamps: list[int | None] = []
        self.uuids: list[bytes | None] = []
        self.size = 0


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
        self._cols = _Columns()

    def add_run(self, first_sequence: int, contents: Iterable[bytes]) -> Iterator[pa.RecordBatch]:
        """Add consecutive RECORDs from ``first_sequence``; yields full batches as they fill."""
        cols = self._cols
        for sequence, content in enumerate(contents, first_sequence):
            if is_batch(content):
                try:
                    batch = decode_batch(content)
                except CorruptBatchError:
                    self.corrupt += 1
                    continue
                n = len(batch.values)
                cols.offsets.extend([sequence] * n)
                cols.indexes.extend(range(n))
                cols.keys.extend(batch.keys)
                cols.values.extend(batch.values)
                cols.headers.extend(
                    [[{"key": k, "value": v} for k, v in h] if h else None for h in batch.headers]
                )
                cols.timestamps.extend([None if t is None else t * 1000 for t in batch.timestamps])
                cols.uuids.extend(batch.uuids)
                cols.size += n
            else:
                cols.offsets.append(sequence)
                cols.indexes.append(0)
                cols.keys.append(None)
                cols.values.append(content)
                cols.headers.append(None)
                cols.timestamps.append(None)
                cols.uuids.append(None)
                cols.size += 1
            if cols.size >= self.rows_per_batch:
                yield self._cut()
                cols = self._cols

    def finish(self) -> Iterator[pa.RecordBatch]:
        """The last, partial batch (if any)."""
        if self._cols.size:
            yield self._cut()

    def _cut(self) -> pa.RecordBatch:
        cols = self._cols
        self._cols = _Columns()
        n = cols.size
        t = _TYPES
        arrays = [
            pa.array([self.topic] * n, t[0]),
            pa.array([self.partition] * n, t[1]),
            pa.array(cols.offsets, t[2]),
            pa.array(cols.indexes, t[3]),
            pa.array(cols.keys, t[4]),
            pa.array(cols.values, t[5]),
            pa.array(cols.headers, t[6]),
            pa.array(cols.timestamps, t[7]),
            pa.array(cols.uuids, t[8]),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=SOURCE_ARROW_SCHEMA)


__all__ = ["ROWS_PER_BATCH", "RowBuilder"]
