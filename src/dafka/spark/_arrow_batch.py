"""One batched RECORD -> Arrow columns of the source schema, straight from its layout.

The batch format (``dafka.client._batch``) is columnar: fixed-width length, timestamp and
UUID columns, then the payloads concatenated in message order. Arrow's binary arrays are
exactly "offsets + one data buffer", so the ``value`` (and ``key``) columns are built over
the RECORD's own bytes - the offsets are a running sum of the length column, computed by
Arrow - and no Python object is made per message. This is what makes the source's executor
path fast (see docs/spark.md, "Costs"); :func:`dafka.client._batch.decode_batch` stays the
reference decoder, and ``tests/unit/spark/test_arrow_batch.py`` holds the two equal.

A batch with headers (rare, and costly to lay out as Arrow lists) is decoded by
``decode_batch`` instead (:func:`batch_arrays` returns None). The checks are the reference
decoder's: magic, CRC-32C, known flags, reserved zero, a count that fits, lengths that add
up to exactly the content's size; a failing batch raises :class:`CorruptBatchError`.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from dafka.client._batch import (
    FLAG_HEADERS,
    FLAG_KEYS,
    FLAG_TIMESTAMPS,
    FLAG_UUIDS,
    FLAG_WIDE_TS,
    HEADER_SIZE,
    NO_UUID,
    UUID_SIZE,
    check_header,
)
from dafka.client._errors import CorruptBatchError

TIMESTAMP = pa.timestamp("us", tz="UTC")
_NO_UUID = pa.scalar(NO_UUID, pa.binary(UUID_SIZE))
_NULL_UUID = pa.scalar(None, pa.binary(UUID_SIZE))
_ZERO_I32 = pa.scalar(0, pa.int32())
_THOUSAND = pa.scalar(1000, pa.int64())
_ZERO_OFFSET = pa.array([0], pa.int64())
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
    """Arrow int32 offsets ``start, start + l0, ...`` of ``lengths``, and the end."""
    sums = pc.cumulative_sum(lengths.cast(pa.int64()))
    end = start + (sums[-1].as_py() if len(sums) else 0)
    if end >= 1 << 31:
        raise CorruptBatchError("batch larger than 2 GiB")
    offsets = pa.concat_arrays([_ZERO_OFFSET, sums])
    offsets = pc.add(offsets, _i64(start)).cast(pa.int32())
    return offsets.buffers()[1], end


def batch_arrays(content: bytes) -> tuple[int, list[pa.Array]] | None:
    """``(count, [key, value, timestamp, uuid])`` of a batched RECORD, or None when it has
    headers. Raises :class:`CorruptBatchError` when a check fails."""
    size = len(content)
    count, flags, base = check_header(content)
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
        deltas = _column(buf, pa.int64() if wide else pa.int32(), count, pos, 8 if wide else 4)
        pos += (8 if wide else 4) * count
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


__all__ = ["TIMESTAMP", "batch_arrays"]
