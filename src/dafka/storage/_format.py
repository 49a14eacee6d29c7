"""The on-disk format of a partition log, and the one routine that reads it back.

Layout of a data directory::

    <root>/.lock                         flock'ed by the open Storage (one process at a time)
    <root>/<topic dir>/<partition dir>/  one log per (topic, partition); names: see _naming
        00000000000000000000.log         segment: records from base offset 0
        00000000000000000000.idx         its sparse offset index
        00000000000000004096.log         next segment, base offset 4096 ...

A segment is named by the 20-digit, zero-padded offset of its first record (its *base*), so
that names sort like offsets. Segment file (``.log``), all integers big-endian::

    header   24 bytes   magic b"DAFKALOG" | version u32 (=1) | reserved u32 (=0) | base u64
    record   16 bytes   offset u64 | length u32 | crc u32
             + length bytes of payload
    record   ...

* ``offset`` is the record's Dafka sequence. It is redundant (base + position in the file)
  but lets every record be checked on its own: a record whose offset is not the one expected
  there is corrupt, and a log can never silently shift offsets.
* ``crc`` is CRC-32C (Castagnoli) of the first 12 header bytes (offset and length) followed by
  the payload, so a flipped bit anywhere in a record, header included, is detected. CRC-32C
  rather than zlib's CRC-32: the ``crc32c`` package computes it with the SSE4.2 / ARMv8 CRC
  instructions (several GB/s, so checksums never limit append or read throughput), and
  Castagnoli's polynomial detects more error patterns than IEEE's at these lengths (it is
  what iSCSI, ext4, Btrfs and Kafka use).
* ``length`` is bounded by the configured ``max_record_bytes``: a larger value is corruption.

Index file (``.idx``), no header, big-endian entries of 8 bytes::

    relative offset u32 (offset - base) | position u32 (byte position of that record)

An entry is added for a record when it starts at least ``index_interval_bytes`` after the
previous entry (the segment header counts as an implicit entry ``(0, 24)``), so the index is
a deterministic function of the log and can always be rebuilt from it. It is written lazily
(batched, after the log) and never fsynced: after a crash it may lag the log or point past
it, and recovery validates its entries before trusting them.

Segments are capped at 2 GiB and records at 1 GiB so that positions fit the index's u32.

Because every record carries its offset, length and CRC, a reader that meets a bad record can
find the next intact one by itself (:func:`resync`): the log keeps what follows a damaged
record, and loses exactly the damaged bytes (``_segment.salvage``).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from typing import Final, Literal, Protocol

from crc32c import crc32c

MAGIC: Final = b"DAFKALOG"
VERSION: Final = 1
SEGMENT_HEADER: Final = struct.Struct(">8sIIQ")
SEGMENT_HEADER_SIZE: Final = SEGMENT_HEADER.size  # 24
RECORD_HEADER: Final = struct.Struct(">QII")
RECORD_HEADER_SIZE: Final = RECORD_HEADER.size  # 16
OFFSET_LENGTH: Final = struct.Struct(">QI")
CRC: Final = struct.Struct(">I")
INDEX_ENTRY_SIZE: Final = 8
MAX_OFFSET: Final = 2**64 - 1
MAX_SEGMENT_BYTES: Final = 2**31
MAX_RECORD_BYTES: Final = 2**30
SCAN_CHUNK: Final = 1 << 20
SAME_LENGTH_MAX: Final = 1 << 16
"""Records longer than this are checked one at a time by :func:`scan` (their CRC costs more
than the Python step around it); shorter ones of one length many at a time."""
_SAME_FIRST = 16
_SAME_MOST = 1024
_BACKOFF_FIRST = 64
_BACKOFF_MOST = 1 << 16

LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".idx"


def segment_stem(base: int) -> str:
    """``00000000000000004096`` for base 4096: 20 digits hold any u64."""
    return f"{base:020d}"


def parse_segment_stem(stem: str) -> int | None:
    """The base offset of a segment file stem, or None if the stem is not one of ours."""
    if len(stem) != 20 or not stem.isascii() or not stem.isdigit():
        return None
    base = int(stem)
    return base if base <= MAX_OFFSET else None


def encode_segment_header(base: int) -> bytes:
    return SEGMENT_HEADER.pack(MAGIC, VERSION, 0, base)


def segment_header_ok(data: bytes, base: int) -> bool:
    """Whether ``data`` starts with the header of a version-1 segment based at ``base``."""
    if len(data) < SEGMENT_HEADER_SIZE:
        return False
    magic, version, reserved, stored_base = SEGMENT_HEADER.unpack_from(data)
    return bool(magic == MAGIC and version == VERSION and reserved == 0 and stored_base == base)


Problem = Literal["torn", "corrupt"]

Payload = bytes | bytearray | memoryview
"""What may be appended: any bytes-like object of bytes (read back as ``bytes``)."""


@dataclass(slots=True)
class ScanResult:
    """Where a scan stopped: the end of the last good record and the offset after it.

    ``problem`` is None when the scan reached ``end`` (or the wanted offsets) cleanly;
    ``"torn"`` when the last record runs past ``end`` (an interrupted write); ``"corrupt"``
    when a complete record fails its CRC, its offset, or its length bound.
    """

    position: int
    next_offset: int
    problem: Problem | None = None
    detail: str = ""


def scan(
    fd: int,
    position: int,
    end: int,
    offset: int,
    *,
    max_length: int,
    stop_offset: int = MAX_OFFSET + 1,
    want_from: int = MAX_OFFSET + 1,
    out: list[tuple[int, bytes]] | None = None,
    contents: list[bytes] | None = None,
    index: IndexSink | None = None,
    chunk: int = SCAN_CHUNK,
    first: bytes = b"",
) -> ScanResult:
    """Walk records from ``position`` (which holds ``offset``) towards ``end``, checking each.

    Stops before ``stop_offset``, at ``end``, or at the first bad record. Records with offset
    ``>= want_from`` are appended to ``out`` as (offset, payload), and their payloads alone
    to ``contents`` (a reader that knows the first offset needs no tuple per record);
    ``index`` (if given) is offered every record's position so that it can add its sparse
    entries. Reads in chunks of about ``chunk`` bytes
    with ``pread`` (no shared file position, so readers never disturb the appender), after
    ``first``: the file's bytes from ``position`` on, read by the caller (the scrub, which
    keeps a digest of exactly the bytes it checked).
    """
    unpack = RECORD_HEADER.unpack_from
    unpack_head = OFFSET_LENGTH.unpack_from
    hsize = RECORD_HEADER_SIZE
    buf = first
    buf_start = position
    buf_end = position + len(first)
    # Checking only (no record wanted, no index): records of one length are checked many at
    # a time with C-level maps (``_intact_same_length``), ``same`` of them at first, twice
    # as many after each stretch that was all intact. One that is not (another length,
    # damage) is left to the per-record check below, which says exactly what is wrong, and so
    # are the next ``backoff`` records (doubling while stretches keep failing: a log of mixed
    # lengths pays a failed stretch per ``backoff`` records at most).
    same = _SAME_FIRST if out is None and contents is None and index is None else 0
    backoff = _BACKOFF_FIRST
    one_by_one_until = offset
    while position < end and offset < stop_offset:
        if position + hsize > buf_end:
            if position + hsize > end:
                return ScanResult(position, offset, "torn", "record header cut short")
            buf = pread_all(fd, min(chunk, end - position), position)
            buf_start = position
            buf_end = position + len(buf)
            if position + hsize > buf_end:
                return ScanResult(position, offset, "torn", "file shorter than expected")
        rel = position - buf_start
        got, length, crc = unpack(buf, rel)
        if same and offset >= one_by_one_until and length <= SAME_LENGTH_MAX:
            stride = hsize + length
            count = min(same, (min(buf_end, end) - position) // stride, stop_offset - offset)
            if count >= _SAME_FIRST:  # (else few are left in the buffer or the wanted range)
                good = 0
                if (  # two headers first: a log of mixed lengths fails here, cheaply
                    length <= max_length
                    and unpack_head(buf, rel + stride) == (offset + 1, length)
                    and unpack_head(buf, rel + (count - 1) * stride) == (offset + count - 1, length)
                ):
                    good = _intact_same_length(buf, rel, offset, length, count)
                position += good * stride
                offset += good
                if good == count:
                    same = min(2 * same, _SAME_MOST)
                    backoff = _BACKOFF_FIRST
                    continue
                same = _SAME_FIRST
                one_by_one_until = offset + backoff
                backoff = min(2 * backoff, _BACKOFF_MOST)
                if good:
                    continue
        if got != offset:
            return ScanResult(position, offset, "corrupt", f"offset {got} where {offset} expected")
        if length > max_length:
            return ScanResult(position, offset, "corrupt", f"length {length} over the bound")
        record_end = position + hsize + length
        if record_end > end:
            return ScanResult(position, offset, "torn", "payload cut short")
        if record_end > buf_end:
            buf = pread_all(fd, max(chunk, hsize + length), position)
            buf_start = position
            buf_end = position + len(buf)
            rel = 0
            if record_end > buf_end:
                return ScanResult(position, offset, "torn", "file shorter than expected")
        payload = buf[rel + hsize : rel + hsize + length]
        if crc32c(payload, crc32c(buf[rel : rel + 12])) != crc:
            return ScanResult(position, offset, "corrupt", "CRC-32C mismatch")
        if index is not None:
            index.offer(offset, position)
        if offset >= want_from:
            if contents is not None:
                contents.append(payload)
            if out is not None:
                out.append((offset, payload))
        position = record_end
        offset += 1
    return ScanResult(position, offset)


@lru_cache(maxsize=64)
def _same_length_layout(length: int) -> struct.Struct:
    """A record whose payload is ``length`` bytes: its offset and length (as the CRC-32C
    covers them), its CRC, its payload."""
    return struct.Struct(f">12sI{length}s")


def _intact_same_length(buf: bytes, rel: int, offset: int, length: int, count: int) -> int:
    """How many of the ``count`` records at ``buf[rel:]``, if each had a payload of
    ``length`` bytes, are intact in a row from the first (which holds ``offset``): each
    one's offset the next, its length ``length``, its CRC-32C good - the checks of
    :func:`scan`, made with C-level ``iter_unpack``, ``map`` and tuple comparisons (no Python
    step per record unless one fails). ``buf`` must hold them all."""
    layout = _same_length_layout(length)
    view = memoryview(buf)[rel : rel + count * layout.size]
    heads, crcs, payloads = zip(*layout.iter_unpack(view), strict=True)
    expected = tuple(map(OFFSET_LENGTH.pack, range(offset, offset + count), repeat(length)))
    computed = tuple(map(crc32c, payloads, map(crc32c, heads)))
    if heads == expected and computed == crcs:
        return count
    for i in range(count):
        if heads[i] != expected[i] or computed[i] != crcs[i]:
            return i
    return count  # (unreachable: the tuples differ somewhere)


def record_intact(fd: int, position: int, end: int, offset: int, max_length: int) -> bool:
    """Whether a complete record holding ``offset`` with a good CRC sits at ``position``."""
    probe = scan(fd, position, end, offset, max_length=max_length, stop_offset=offset + 1)
    return probe.problem is None and probe.next_offset == offset + 1


_NONZERO = re.compile(rb"[^\x00]")


def resync(
    fd: int, position: int, end: int, offset: int, *, max_length: int, chunk: int = SCAN_CHUNK
) -> tuple[int, int] | None:
    """The first intact record after a bad one: its (position, offset), or None if none.

    The bad record sits at ``position`` where ``offset`` was expected. First its own length
    is trusted (a flip in the payload or the CRC leaves it right): if the record after it is
    intact and holds ``offset + 1``, only the bad record is lost. Otherwise every later byte
    position ``q`` is a candidate whose header holds an offset in ``(offset, offset +
    (q - position) // 16]`` (a record takes at least 16 bytes), a length within the bound
    and a CRC-32C that matches its header and payload: random bytes pass with a chance of
    about 2**-32 per position that already has a plausible offset. Candidates are found
    with ``bytes.find`` on the offsets' common leading bytes (C speed), and runs of zero
    bytes are stepped over whole.
    """
    hsize = RECORD_HEADER_SIZE
    head = pread_all(fd, hsize, position)
    if len(head) == hsize:
        _, length, _ = RECORD_HEADER.unpack(head)
        after = position + hsize + length
        if (
            length <= max_length
            and after + hsize <= end
            and record_intact(fd, after, end, offset + 1, max_length)
        ):
            return after, offset + 1
    lowest = offset + 1
    highest = min(offset + max(1, (end - position) // hsize), MAX_OFFSET)
    low_bytes = lowest.to_bytes(8, "big")
    high_bytes = highest.to_bytes(8, "big")
    common = 0
    while common < 8 and low_bytes[common] == high_bytes[common]:
        common += 1
    prefix = low_bytes[:common]
    unpack_offset = OFFSET_LENGTH.unpack_from
    start = position + 1
    while start + hsize <= end:
        buf = pread_all(fd, min(chunk + hsize - 1, end - start), start)
        limit = min(chunk, len(buf) - hsize + 1)  # candidates starting in this chunk
        i = 0
        while i < limit:
            if prefix:
                i = buf.find(prefix, i, limit + common - 1)
                if i < 0:
                    break
            got, length = unpack_offset(buf, i)
            q = start + i
            if got == 0:  # a run of zeros: step over it
                found = _NONZERO.search(buf, i)
                i = max(i + 1, (found.start() if found else len(buf)) - 7)
                continue
            if (
                lowest <= got <= offset + (q - position) // hsize
                and length <= max_length
                and q + hsize + length <= end
                and record_intact(fd, q, end, got, max_length)
            ):
                return q, got
            i += 1
        start += max(1, limit)
    return None


def encode_record(offset: int, payload: Payload) -> bytes:
    """One record as it is on disk: header (offset, length, CRC) and payload."""
    length = len(payload)
    head = OFFSET_LENGTH.pack(offset, length)
    return head + CRC.pack(crc32c(payload, crc32c(head))) + bytes(payload)


def encode_run(first_offset: int, payloads: Sequence[Payload], lengths: list[int]) -> list[Payload]:
    """The records of ``payloads`` at ``first_offset``, ``first_offset + 1``... as the parts
    of one write (header, payload, header, payload...): joined, exactly what
    :func:`encode_record` of each gives. ``lengths`` are the payloads' lengths.

    Built with C-level ``map`` s (pack, CRC, pack) and two slice assignments: no Python
    step per record (the store appends every run it receives this way). Raises
    ``TypeError`` for a payload that is not bytes-like."""
    offsets = range(first_offset, first_offset + len(payloads))
    heads = list(map(OFFSET_LENGTH.pack, offsets, lengths))
    crcs = map(crc32c, payloads, map(crc32c, heads))
    parts: list[Payload] = [b""] * (2 * len(payloads))
    parts[::2] = list(map(RECORD_HEADER.pack, offsets, lengths, crcs))
    parts[1::2] = payloads
    return parts


class IndexSink(Protocol):
    """What :func:`scan` feeds positions to (the sparse index implements it)."""

    def offer(self, offset: int, position: int) -> None:
        """See a record at ``position``; keep an entry for it if the interval says so."""


def pread_all(fd: int, size: int, position: int) -> bytes:
    """``pread`` until ``size`` bytes or end of file (a pread may legally return less)."""
    data = os.pread(fd, size, position)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def all_zero(fd: int, position: int, end: int) -> bool:
    """Whether bytes [position, end) are all zero: the look of a tail lost in a power cut."""
    while position < end:
        data = pread_all(fd, min(SCAN_CHUNK, end - position), position)
        if not data:
            return True
        if data.count(0) != len(data):
            return False
        position += len(data)
    return True


__all__ = [
    "CRC",
    "INDEX_ENTRY_SIZE",
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "MAGIC",
    "MAX_OFFSET",
    "MAX_RECORD_BYTES",
    "MAX_SEGMENT_BYTES",
    "OFFSET_LENGTH",
    "RECORD_HEADER",
    "RECORD_HEADER_SIZE",
    "SEGMENT_HEADER",
    "SEGMENT_HEADER_SIZE",
    "VERSION",
    "IndexSink",
    "Payload",
    "Problem",
    "ScanResult",
    "all_zero",
    "encode_record",
    "encode_run",
    "encode_segment_header",
    "parse_segment_stem",
    "pread_all",
    "record_intact",
    "resync",
    "scan",
    "segment_header_ok",
    "segment_stem",
]
