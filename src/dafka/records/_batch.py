"""The batch format: many messages in the content of one Dafka RECORD.

A Dafka RECORD carries opaque bytes. A batched producer packs many messages (key, value,
headers, timestamp, optional Gazette UUID) into one RECORD so that the per-RECORD costs
(a ZeroMQ message, an ACK, an index entry in every store) are paid once per batch. A consumer
recognises a batch by its magic, without configuration; a plain RECORD (a C producer's, or
``batching=False``) is delivered as one message whose value is the whole content.

Layout (all integers little-endian; offsets in bytes)::

    0   magic           8   b"\\x89DFKB\\r\\n" + version byte (1): see MAGIC
    8   crc             u32 CRC-32C (Castagnoli) of every byte after this field ([12:])
    12  count           u32 number of messages, >= 1
    16  flags           u16 which optional columns follow (FLAG_*); unknown bits: corrupt
    18  reserved        u16 0
    20  base_timestamp  i64 ms since the epoch (0 when FLAG_TIMESTAMPS is clear)
    28  columns, each a fixed-width array of ``count`` entries, in this order:
          key_lengths     i32[count]  if FLAG_KEYS      (-1: no key; 0: empty key)
          value_lengths   u32[count]
          header_counts   u32[count]  if FLAG_HEADERS
          ts_deltas       i32[count]  if FLAG_TIMESTAMPS (i64[count] with FLAG_WIDE_TS)
          uuids           16 bytes * count if FLAG_UUIDS (16 zero bytes: none)
        then, if FLAG_HEADERS, with H = sum(header_counts):
          name_lengths    u32[H]
          hvalue_lengths  u32[H]
        then the data, each run concatenated in message order:
          keys, values, header names (UTF-8) and header values interleaved per header
    end: the content ends exactly where the data ends (anything else: corrupt)

A *drop notice* is the header alone (28 bytes) with count 0, flags ``FLAG_DROPPED`` and, in
``base_timestamp``, the size of the content it stands for: what a store keeps in place of a
RECORD larger than its ``max_message_bytes`` (a foreign producer's; ours refuse such a
message at the call), so that the partition goes on and every reader agrees that the RECORD
is skipped. :func:`check_header` raises :class:`DroppedRecordError` (a
:class:`CorruptBatchError`: a reader that does not know notices skips it as corrupt) and
consumers count it with the RECORDs they dropped for their own limit. The bytes depend on
the size only: every store that drops the same RECORD keeps the same notice.

Why this shape: pure-Python speed. Each column is read with one ``struct.unpack_from`` and
the payloads are cut by slicing at running sums (``itertools.accumulate``); there is no
per-byte varint loop as in Kafka's record batch v2. Columns that a batch does not use
(no keys, no headers, no timestamps, no UUIDs) cost nothing, so a batch of bare values
costs 4 bytes per message plus 28 bytes.

Safety: the magic's first byte has the high bit set and it contains ``\\r\\n`` (as PNG's)
so text never starts with it by accident. A content that starts with the magic must pass
the CRC and the structural checks (lengths that add up to exactly the content's size,
known flags, reserved zero, UTF-8 header names) or :func:`decode_batch` raises
:class:`CorruptBatchError`: a plain record that happens to start with the magic is
reported, never delivered as garbage (probability of passing ~2^-32 for the CRC times the
structure's own odds). :func:`is_batch` only looks at the magic.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from itertools import accumulate, pairwise
from typing import NamedTuple, cast

from crc32c import crc32c

from dafka.records._errors import CorruptBatchError, DroppedRecordError

VERSION = 1
MAGIC = b"\x89DFKB\r\n" + bytes([VERSION])
"""8 bytes; the last one is the format version (a new layout gets a new magic)."""

FLAG_KEYS = 0x01
FLAG_HEADERS = 0x02
FLAG_TIMESTAMPS = 0x04
FLAG_WIDE_TS = 0x08
FLAG_UUIDS = 0x10
FLAG_DROPPED = 0x20
"""A drop notice: no messages, no columns (see the module docstring)."""
_KNOWN_FLAGS = FLAG_KEYS | FLAG_HEADERS | FLAG_TIMESTAMPS | FLAG_WIDE_TS | FLAG_UUIDS

_HEADER = struct.Struct("<8sIIHHq")
HEADER_SIZE = _HEADER.size  # 28
OVERHEAD_PER_MESSAGE = 4
"""Bytes a bare value costs beyond its length (its value_lengths entry)."""
UUID_SIZE = 16
NO_UUID = bytes(UUID_SIZE)
"""In a batch with UUIDs, a message without one carries 16 zero bytes (decoded as None;
a Gazette UUID is a v1 UUID: its version and variant bits are never zero)."""
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
MESSAGE_OVERHEAD = 4 + 4 + 4 + 8 + UUID_SIZE
"""The most a message costs in a batch beyond the bytes of its key, value and headers: its
key, value and header-count lengths, a wide timestamp delta and a UUID (36 bytes)."""
HEADER_OVERHEAD = 8
"""What a header costs beyond its name's UTF-8 bytes and its value: their two lengths."""
BATCH_OF_ONE = HEADER_SIZE + MESSAGE_OVERHEAD
"""The most a batch of one message adds to its key, value and headers (64 bytes): a message
fits ``max_message_bytes`` when its bytes and this do."""
MAX_TIMESTAMP = 2**63 - 1
"""Timestamps are milliseconds since the epoch in ``[0, MAX_TIMESTAMP]``: the batch keeps a
base (i64) and deltas from it (i64 at most), which any two such timestamps fit."""

Headers = Sequence[tuple[str, bytes]]


class BatchColumns(NamedTuple):
    """A decoded batch, column by column (each list has one entry per message)."""

    keys: list[bytes | None]
    values: list[bytes]
    headers: list[tuple[tuple[str, bytes], ...]]
    timestamps: list[int | None]
    uuids: list[bytes | None]


def is_batch(content: bytes) -> bool:
    """True when ``content`` starts with the batch magic (it must then decode or be corrupt)."""
    return content[:8] == MAGIC


def encode_batch(
    values: Sequence[bytes],
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[Headers | None] | None = None,
    timestamps: Sequence[int] | None = None,
    uuids: Sequence[bytes] | None = None,
) -> bytes:
    """Pack ``values`` (and the optional parallel columns) into one batch.

    Each optional column is None (absent for every message) or as long as ``values``.
    ``keys`` entries may be None (no key); ``headers`` entries None or () (no headers).
    """
    count = len(values)
    if count == 0:
        raise ValueError("a batch holds at least one message")
    flags = 0
    columns: list[bytes] = []
    data: list[bytes] = []
    keyless = keys.count(None) if keys is not None else 0  # count: no Python frame per key
    if keys is not None and keyless != len(keys):
        _check_len("keys", keys, count)
        flags |= FLAG_KEYS
        if keyless:
            lengths = [-1 if k is None else len(k) for k in keys]
            columns.append(struct.pack(f"<{count}i", *lengths))
            data.append(b"".join([k for k in keys if k]))
        else:  # every message keyed (a keyed produce_many): no Python step per key
            keyed = cast("Sequence[bytes]", keys)  # no None: counted
            columns.append(struct.pack(f"<{count}i", *map(len, keyed)))
            data.append(b"".join(keyed))
    columns.append(struct.pack(f"<{count}I", *map(len, values)))
    data.append(b"".join(values))
    header_data: list[bytes] = []
    if headers is not None and any(headers):
        _check_len("headers", headers, count)
        flags |= FLAG_HEADERS
        counts: list[int] = []
        name_lengths: list[int] = []
        hvalue_lengths: list[int] = []
        for message_headers in headers:
            if not message_headers:
                counts.append(0)
                continue
            counts.append(len(message_headers))
            for name, value in message_headers:
                encoded = name.encode()
                name_lengths.append(len(encoded))
                hvalue_lengths.append(len(value))
                header_data.append(encoded)
                header_data.append(value)
        columns.append(struct.pack(f"<{count}I", *counts))
    base = 0
    if timestamps is not None:
        _check_len("timestamps", timestamps, count)
        flags |= FLAG_TIMESTAMPS
        base = min(timestamps)
        top = max(timestamps)
        if top == base:  # one clock reading for all (produce_many, a fast producer)
            columns.append(bytes(4 * count))
        elif top - base > _I32_MAX:
            flags |= FLAG_WIDE_TS
            columns.append(struct.pack(f"<{count}q", *[t - base for t in timestamps]))
        else:
            columns.append(struct.pack(f"<{count}i", *[t - base for t in timestamps]))
    if uuids is not None:
        _check_len("uuids", uuids, count)
        if set(map(len, uuids)) != {UUID_SIZE}:  # in C: no Python step per UUID
            raise ValueError("every uuid must be 16 bytes")
        flags |= FLAG_UUIDS
        columns.append(b"".join(uuids))
    if flags & FLAG_HEADERS:
        total = len(name_lengths)
        columns.append(struct.pack(f"<{total}I", *name_lengths))
        columns.append(struct.pack(f"<{total}I", *hvalue_lengths))
        data.append(b"".join(header_data))
    body = b"".join([struct.pack("<IHHq", count, flags, 0, base), *columns, *data])
    return MAGIC + struct.pack("<I", crc32c(body)) + body


def drop_notice(size: int) -> bytes:
    """The drop notice of a RECORD whose content was ``size`` bytes (module docstring)."""
    body = struct.pack("<IHHq", 0, FLAG_DROPPED, 0, size)
    return MAGIC + struct.pack("<I", crc32c(body)) + body


def check_header(content: bytes, *, crc: bool = True) -> tuple[int, int, int]:
    """``(count, flags, base_timestamp)`` of a batch whose header passes every check (magic,
    CRC-32C of the whole content, known flags, reserved zero, a count that fits); raises
    :class:`CorruptBatchError` otherwise, :class:`DroppedRecordError` for a drop notice.
    Decoders of the columns start from here.

    ``crc=False`` skips the CRC (the one check that reads every byte) for a batch that
    :func:`check_batch` passed already: a consumer checks what it takes, and its Arrow
    columns need not check the same bytes twice."""
    size = len(content)
    if size < HEADER_SIZE:
        raise CorruptBatchError(f"batch of {size} bytes is shorter than its header")
    magic, stored_crc, count, flags, reserved, base = _HEADER.unpack_from(content)
    if magic != MAGIC:
        raise CorruptBatchError("not a batch (wrong magic or version)")
    if crc and crc32c(memoryview(content)[12:]) != stored_crc:
        raise CorruptBatchError("batch CRC-32C mismatch")
    if flags == FLAG_DROPPED and not count and not reserved and size == HEADER_SIZE and base > 0:
        raise DroppedRecordError(base)
    if flags & ~_KNOWN_FLAGS or reserved:
        raise CorruptBatchError(f"batch with unknown flags {flags:#x} or reserved {reserved}")
    # every message takes at least its 4-byte value length: bounds count before allocating
    if count == 0 or count * OVERHEAD_PER_MESSAGE > size - HEADER_SIZE:
        raise CorruptBatchError(f"batch count {count} does not fit in {size} bytes")
    return count, flags, base


class BatchLayout(NamedTuple):
    """Where a checked batch's columns and payloads are (every length already validated)."""

    messages: int
    base: int
    key_lengths: tuple[int, ...] | None
    value_lengths: tuple[int, ...]
    header_counts: tuple[int, ...] | None
    deltas: tuple[int, ...] | None
    uuids_at: int  # -1: no uuid column
    name_lengths: tuple[int, ...]
    hvalue_lengths: tuple[int, ...]
    data_at: int  # where the keys' data (then the values', the headers') starts


def decode_batch(content: bytes) -> BatchColumns:
    """Unpack a batch; raises :class:`CorruptBatchError` when any check fails."""
    layout = _checked_layout(content)
    try:
        return _decode_columns(content, layout)
    except UnicodeDecodeError:
        raise CorruptBatchError("batch header name is not UTF-8") from None


def check_batch(content: bytes) -> tuple[BatchLayout, BatchColumns | None]:
    """Every check :func:`decode_batch` makes, without building the messages: the batch's
    layout (``.messages``: how many), and its columns when checking needed them (a batch with
    headers is decoded: its names must be UTF-8). Raises :class:`CorruptBatchError`. What a
    consumer checks when it takes a RECORD, leaving the decoding to when (and if) a column
    is read (:func:`decode_checked`)."""
    layout = _checked_layout(content)
    if layout.header_counts is not None:
        return layout, decode_batch(content)
    return layout, None


def decode_checked(content: bytes, layout: BatchLayout) -> BatchColumns:
    """The columns of a batch :func:`check_batch` passed (``layout`` is its answer)."""
    return _decode_columns(content, layout)


def _checked_layout(content: bytes) -> BatchLayout:
    count, flags, base = check_header(content)
    try:
        return _layout(content, count, flags, base, len(content))
    except struct.error as exc:
        raise CorruptBatchError(f"batch columns overrun the content: {exc}") from None


def _layout(content: bytes, count: int, flags: int, base: int, size: int) -> BatchLayout:
    pos = HEADER_SIZE
    key_lengths: tuple[int, ...] | None = None
    if flags & FLAG_KEYS:
        key_lengths = struct.unpack_from(f"<{count}i", content, pos)
        pos += 4 * count
    value_lengths: tuple[int, ...] = struct.unpack_from(f"<{count}I", content, pos)
    pos += 4 * count
    header_counts: tuple[int, ...] | None = None
    if flags & FLAG_HEADERS:
        header_counts = struct.unpack_from(f"<{count}I", content, pos)
        pos += 4 * count
    deltas: tuple[int, ...] | None = None
    if flags & FLAG_TIMESTAMPS:
        wide = bool(flags & FLAG_WIDE_TS)
        deltas = struct.unpack_from(f"<{count}{'q' if wide else 'i'}", content, pos)
        pos += (8 if wide else 4) * count
    elif flags & FLAG_WIDE_TS or base:
        raise CorruptBatchError("batch timestamp fields without FLAG_TIMESTAMPS")
    uuids_at = -1
    if flags & FLAG_UUIDS:
        uuids_at = pos
        pos += UUID_SIZE * count
        if pos > size:
            raise CorruptBatchError("batch uuids overrun the content")
    name_lengths: tuple[int, ...] = ()
    hvalue_lengths: tuple[int, ...] = ()
    if header_counts is not None:
        total = sum(header_counts)
        if total * 8 > size - pos:
            raise CorruptBatchError(f"batch header count {total} does not fit")
        name_lengths = struct.unpack_from(f"<{total}I", content, pos)
        pos += 4 * total
        hvalue_lengths = struct.unpack_from(f"<{total}I", content, pos)
        pos += 4 * total
    data_at = pos
    if key_lengths is not None:
        if min(key_lengths) < -1:
            raise CorruptBatchError("batch key length below -1")
        pos += sum(key_lengths) + key_lengths.count(-1)
    pos += sum(value_lengths) + sum(name_lengths) + sum(hvalue_lengths)
    if pos != size:
        raise CorruptBatchError(f"batch lengths add up to {pos} bytes, content has {size}")
    return BatchLayout(
        count,
        base,
        key_lengths,
        value_lengths,
        header_counts,
        deltas,
        uuids_at,
        name_lengths,
        hvalue_lengths,
        data_at,
    )


def _decode_columns(content: bytes, layout: BatchLayout) -> BatchColumns:
    count, base, key_lengths, value_lengths, header_counts, deltas, uuids_at = layout[:7]
    timestamps: list[int | None]
    if deltas is not None:
        timestamps = [base + d for d in deltas] if any(deltas) else [base] * count
    else:
        timestamps = [None] * count
    uuids: list[bytes | None]
    if uuids_at >= 0:
        end = uuids_at + UUID_SIZE * count
        uuids = [content[i : i + UUID_SIZE] for i in range(uuids_at, end, UUID_SIZE)]
        if NO_UUID in uuids:
            uuids = [None if u == NO_UUID else u for u in uuids]
    else:
        uuids = [None] * count
    pos = layout.data_at
    keys: list[bytes | None]
    if key_lengths is not None:
        starts = list(accumulate([max(n, 0) for n in key_lengths], initial=pos))
        pos = starts[-1]
        keys = [
            None if n < 0 else content[a:b]
            for n, a, b in zip(key_lengths, starts, starts[1:], strict=False)
        ]
    else:
        keys = [None] * count
    starts = list(accumulate(value_lengths, initial=pos))
    pos = starts[-1]
    values = [content[a:b] for a, b in pairwise(starts)]
    headers: list[tuple[tuple[str, bytes], ...]]
    if header_counts is not None:
        pairs = zip(layout.name_lengths, layout.hvalue_lengths, strict=True)
        interleaved = [n for pair in pairs for n in pair]
        bounds = list(accumulate(interleaved, initial=pos))
        pieces = [content[a:b] for a, b in pairwise(bounds)]
        flat = [(pieces[i].decode(), pieces[i + 1]) for i in range(0, len(pieces), 2)]
        headers = []
        at = 0
        for n in header_counts:
            headers.append(tuple(flat[at : at + n]))
            at += n
    else:
        headers = [()] * count
    return BatchColumns(keys, values, headers, timestamps, uuids)


def control_indexes(content: bytes, layout: BatchLayout) -> list[int]:
    """Indexes of the batch's transaction control messages: those whose UUID carries the
    ``ACK_TXN`` flag (an ACK commits or rolls back its producer's transaction: Kafka's
    control records). A read-uncommitted consumer hands them to nobody; a read-committed
    filter needs them. Cheap when there are none (the common case): one scan, in C, of the
    byte that holds the flags' low bits.

    The flags are the 10 low bits of the UUID's bytes 8-9 (big-endian): ACK_TXN (0x2) is
    byte 9 == 0x02 with the two low bits of byte 8 clear."""
    at = layout.uuids_at
    if at < 0:
        return []
    end = at + UUID_SIZE * layout.messages
    low = content[at + 9 : end : UUID_SIZE]
    if b"\x02" not in low:
        return []
    high = content[at + 8 : end : UUID_SIZE]
    return [i for i, (h, b) in enumerate(zip(high, low, strict=True)) if b == 2 and not h & 3]


def _check_len(name: str, column: Sequence[object], count: int) -> None:
    if len(column) != count:
        raise ValueError(f"batch column {name} has {len(column)} entries for {count} values")


__all__ = [
    "MAGIC",
    "BatchColumns",
    "BatchLayout",
    "CorruptBatchError",
    "check_batch",
    "check_header",
    "control_indexes",
    "decode_batch",
    "decode_checked",
    "encode_batch",
    "is_batch",
]
