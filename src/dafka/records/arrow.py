"""Messages -> Arrow columns of the message schema, shared by the consumer and the Spark source.

:data:`SCHEMA` is one row per message: ``topic, partition, offset, index, key, value,
headers, timestamp, uuid`` - the columns of a :class:`Record`, and exactly the Arrow form of
the Spark source's schema (``dafka.spark._schema``; a test holds the two equal).
:meth:`RecordColumns.to_arrow <dafka.records.RecordColumns.to_arrow>` builds its arrays
here (the Spark source's tasks use it for their rows). pyarrow is optional for the core
install: this module is imported only when Arrow is asked for (``dafka[arrow]``).

A batched RECORD becomes Arrow arrays straight from its layout. The batch format
(``dafka.records._batch``) is columnar: fixed-width length, timestamp and UUID columns, then
the payloads concatenated in message order. Arrow's binary arrays are exactly "offsets + one
data buffer", so the ``value`` (and ``key``) columns are built over the RECORD's own bytes -
the offsets are a running sum of the length column, computed by Arrow - and no Python object
is made per message. :func:`dafka.records._batch.decode_batch` stays the reference decoder,
and ``tests/unit/records/test_records_arrow.py`` holds the two equal.

A batch with headers (rare, and costly to lay out as Arrow lists) is decoded by
``decode_batch`` instead (:func:`batch_arrays` returns None). The checks are the reference
decoder's: magic, CRC-32C, known flags, reserved zero, a count that fits, lengths that add
up to exactly the content's size; a failing batch raises :class:`CorruptBatchError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from dafka.records._batch import (
    FLAG_HEADERS,
    FLAG_KEYS,
    FLAG_TIMESTAMPS,
    FLAG_UUIDS,
    FLAG_WIDE_TS,
    HEADER_SIZE,
    NO_UUID,
    UUID_SIZE,
    check_header,
    decode_batch,
)
from dafka.records._errors import CorruptBatchError
from dafka.records._record import Record

TIMESTAMP = pa.timestamp("us", tz="UTC")
HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.string(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("index", pa.int32(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", pa.list_(pa.field("element", HEADER))),
        pa.field("timestamp", TIMESTAMP),
        pa.field("uuid", pa.binary()),
    ]
)
"""One row per message (a :class:`Record`'s fields); ``offset`` is the sequence of the
RECORD that carried it, ``index`` its position inside a batched RECORD (0 for a plain one)."""
_NO_UUID = pa.scalar(NO_UUID, pa.binary(UUID_SIZE))
_NULL_UUID = pa.scalar(None, pa.binary(UUID_SIZE))
_ZERO_I32 = pa.scalar(0, pa.int32())
_THOUSAND = pa.scalar(1000, pa.int64())
# Compute functions get Arrow scalars, never Python ints: converting a Python scalar makes
# pyarrow try to import optional modules (dateutil, ...) on every call, which costs more
# than the computation when they are not installed.


def _i64(value: int) -> pa.Scalar:
    return pa.scalar(value, pa.int64())


def _column(buf: pa.Buffer, type_: pa.DataType, count: int, pos: int, width: int) -> pa.Array:
    """A fixed-width column of the batch (copied: its position may be unaligned)."""
    data = pa.py_buffer(buf[pos : pos + width * count].to_pybytes())
    return pa.Array.from_buffers(type_, count, [None, data])


def _offsets(lengths: pa.Array, start: int) -> tuple[pa.Buffer, int]:
    """Arrow int32 offsets ``start, start + l0, ...`` of ``lengths`` (int32 >= 0 or uint32),
    and the end.

    One compute call (a checked running sum from ``start``: an overflow is a corrupt
    batch), its 4-byte entries reused as int32 - valid because they only grow and the end
    is checked below 2^31 - behind the leading ``start``. (A cast, an add and a concat
    cost four times as much: each compute call has a fixed cost of microseconds.)"""
    count = len(lengths)
    try:
        sums = pc.cumulative_sum_checked(lengths, start=pa.scalar(start, lengths.type))
    except pa.ArrowInvalid:
        raise CorruptBatchError("batch lengths overflow") from None
    data = sums.buffers()[1].to_pybytes()[sums.offset * 4 : (sums.offset + count) * 4]
    end = int.from_bytes(data[-4:], "little") if count else start
    if end >= 1 << 31:
        raise CorruptBatchError("batch larger than 2 GiB")
    return pa.py_buffer(start.to_bytes(4, "little") + data), end


def batch_arrays(content: bytes, *, checked: bool = False) -> tuple[int, list[pa.Array]] | None:
    """``(count, [key, value, timestamp, uuid])`` of a batched RECORD, or None when it has
    headers. Raises :class:`CorruptBatchError` when a check fails. ``checked``: the batch
    passed :func:`~dafka.records.check_batch` already (its CRC is not computed again; the
    other checks are cheap and stay)."""
    size = len(content)
    count, flags, base = check_header(content, crc=not checked)
    if flags & FLAG_HEADERS:
        return None
    buf = pa.py_buffer(content)
    pos = HEADER_SIZE
    widths = 4 * count * (2 if flags & FLAG_KEYS else 1)
    if flags & FLAG_TIMESTAMPS:
        widths += (8 if flags & FLAG_WIDE_TS else 4) * count
    if flags & FLAG_UUIDS:
        widths += UUID_SIZE * count
    if pos + widths > size:
        raise CorruptBatchError("batch columns overrun the content")
    key_lengths = None
    if flags & FLAG_KEYS:
        key_lengths = _column(buf, pa.int32(), count, pos, 4)
        pos += 4 * count
    value_lengths = _column(buf, pa.uint32(), count, pos, 4)
    pos += 4 * count
    if flags & FLAG_TIMESTAMPS:
        wide = bool(flags & FLAG_WIDE_TS)
        width = 8 if wide else 4
        deltas = _column(buf, pa.int64() if wide else pa.int32(), count, pos, width)
        pos += width * count
        if content.count(0, pos - width * count, pos) == width * count:  # one clock reading
            micros = pa.py_buffer((base * 1000).to_bytes(8, "little", signed=True) * count)
            timestamps = pa.Array.from_buffers(TIMESTAMP, count, [None, micros])
        else:
            micros = pc.multiply(pc.add(deltas.cast(pa.int64()), _i64(base)), _THOUSAND)
            timestamps = micros.cast(TIMESTAMP)
    elif flags & FLAG_WIDE_TS or base:
        raise CorruptBatchError("batch timestamp fields without FLAG_TIMESTAMPS")
    else:
        timestamps = pa.nulls(count, TIMESTAMP)
    if flags & FLAG_UUIDS:
        fixed = _column(buf, pa.binary(UUID_SIZE), count, pos, UUID_SIZE)
        pos += UUID_SIZE * count
        uuids = pc.if_else(pc.equal(fixed, _NO_UUID), _NULL_UUID, fixed).cast(pa.binary())
    else:
        uuids = pa.nulls(count, pa.binary())
    if key_lengths is not None:
        if pc.min(key_lengths).as_py() < -1:
            raise CorruptBatchError("batch key length below -1")
        present = pc.greater_equal(key_lengths, _ZERO_I32)
        key_offsets, pos = _offsets(pc.max_element_wise(key_lengths, _ZERO_I32), pos)
        keys = pa.Array.from_buffers(
            pa.binary(), count, [present.buffers()[1], key_offsets, buf], offset=0
        )
    else:
        keys = pa.nulls(count, pa.binary())
    value_offsets, end = _offsets(value_lengths, pos)
    if end != size:
        raise CorruptBatchError(f"batch data ends at {end}, the content at {size}")
    values = pa.Array.from_buffers(pa.binary(), count, [None, value_offsets, buf])
    return count, [keys, values, timestamps, uuids]


_TYPES = [field.type for field in SCHEMA]
_TOPIC, _PARTITION, _OFFSET, _INDEX, _KEY, _VALUE, _HEADERS, _TIMESTAMP, _UUID = _TYPES

Chunk = tuple[int, list[pa.Array]]
"""``(rows, [offset, index, key, value, headers, timestamp, uuid])``: the columns of some
messages of one partition (topic and partition are constant; :func:`record_batch` adds them)."""

_ARANGE = pa.array(range(65_536), _INDEX)


def _indexes(start: int, stop: int) -> pa.Array:
    """``start, ..., stop - 1`` as the index column (a slice of a cached array)."""
    if stop > len(_ARANGE):
        return pa.array(range(start, stop), _INDEX)
    return _ARANGE.slice(start, stop - start)


def _header_lists(headers: Iterable[Sequence[tuple[str, bytes]]]) -> list[object]:
    return [[{"key": k, "value": v} for k, v in h] if h else None for h in headers]


def python_chunk(
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


def plain_chunk(first: int, contents: Sequence[bytes]) -> Chunk:
    """A run of plain RECORDs from sequence ``first``: one message each, value = content."""
    n = len(contents)
    return n, [
        pa.array(range(first, first + n), _OFFSET),
        pa.repeat(pa.scalar(0, _INDEX), n),
        pa.nulls(n, _KEY),
        pa.array(contents, _VALUE),
        pa.nulls(n, _HEADERS),
        pa.nulls(n, _TIMESTAMP),
        pa.nulls(n, _UUID),
    ]


def batch_chunk(
    sequence: int,
    content: bytes,
    start: int = 0,
    stop: int | None = None,
    *,
    checked: bool = False,
) -> Chunk:
    """Messages ``[start, stop)`` of the batched RECORD ``sequence`` (default: all of them).

    Raises :class:`CorruptBatchError` when the batch fails a check (``checked``: see
    :func:`batch_arrays`)."""
    found = batch_arrays(content, checked=checked)
    if found is None:  # headers: the reference decoder
        cols = decode_batch(content)
        n = len(cols.values)
        stop = n if stop is None else stop
        return python_chunk(
            [sequence] * (stop - start),
            range(start, stop),
            cols.keys[start:stop],
            cols.values[start:stop],
            cols.headers[start:stop],
            cols.timestamps[start:stop],
            cols.uuids[start:stop],
        )
    n, (keys, values, timestamps, uuids) = found
    stop = n if stop is None else stop
    offsets = pa.repeat(pa.scalar(sequence, _OFFSET), stop - start)
    headers = pa.nulls(stop - start, _HEADERS)
    arrays = [keys, values, timestamps, uuids]
    if start or stop != n:
        arrays = [a.slice(start, stop - start) for a in arrays]
    keys, values, timestamps, uuids = arrays
    return stop - start, [offsets, _indexes(start, stop), keys, values, headers, timestamps, uuids]


def record_batch(topic: str, partition: str, chunks: Sequence[Chunk]) -> pa.RecordBatch:
    """One RecordBatch of :data:`SCHEMA` from chunks of one partition (concatenated)."""
    n = sum(c[0] for c in chunks)
    if len(chunks) == 1:
        columns = chunks[0][1]
    else:
        columns = [pa.concat_arrays([c[1][i] for c in chunks]) for i in range(7)]
    arrays = [
        pa.repeat(pa.scalar(topic, _TOPIC), n),
        pa.repeat(pa.scalar(partition, _PARTITION), n),
        *columns,
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def records_batch(records: Sequence[Record]) -> pa.RecordBatch:
    """One RecordBatch of :data:`SCHEMA` from Records of any partitions."""
    columns = list(zip(*records, strict=True))
    _, arrays = python_chunk(*columns[2:])
    return pa.RecordBatch.from_arrays(
        [pa.array(columns[0], _TOPIC), pa.array(columns[1], _PARTITION), *arrays],
        schema=SCHEMA,
    )


def table(batches: Sequence[pa.RecordBatch]) -> pa.Table:
    """The Table of ``batches`` (no copy; an empty one of :data:`SCHEMA` for none)."""
    return pa.Table.from_batches(batches, schema=SCHEMA)


__all__ = [
    "SCHEMA",
    "TIMESTAMP",
    "Chunk",
    "batch_arrays",
    "batch_chunk",
    "plain_chunk",
    "python_chunk",
    "record_batch",
    "records_batch",
    "table",
]
