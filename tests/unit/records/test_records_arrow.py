"""Arrow columns of messages (dafka.records.arrow): the direct batch decoder equals the
reference decoder, the consumer's check (check_batch) rejects exactly what decode_batch
rejects, and RecordColumns builds the same messages as Records, lists and Arrow."""

from __future__ import annotations

import random
import struct
import sys

import pyarrow as pa
import pytest
from crc32c import crc32c

from dafka.records import (
    BatchSlice,
    CheckedBatch,
    CorruptBatchError,
    Part,
    PlainRun,
    Record,
    RecordColumns,
    check_batch,
    decode_batch,
    encode_batch,
)
from dafka.records._columns import SMALL_SLICE
from dafka.records.arrow import SCHEMA, TIMESTAMP, batch_arrays


def random_batch(rng: random.Random, headers: bool = False) -> bytes:
    n = rng.randint(1, 40)
    values = [rng.randbytes(rng.randint(0, 30)) for _ in range(n)]
    keys = (
        [rng.choice([None, b"", rng.randbytes(rng.randint(1, 9))]) for _ in range(n)]
        if rng.random() < 0.6
        else None
    )
    stamps = None
    if rng.random() < 0.6:
        base = rng.randint(0, 2_000_000_000_000)
        spread = rng.choice([1000, 1 << 40])  # narrow and wide deltas
        stamps = [base + rng.randint(0, spread) for _ in range(n)]
    uuids = (
        [rng.choice([bytes(16), rng.randbytes(16)]) for _ in range(n)]
        if rng.random() < 0.6
        else None
    )
    hdrs = [[("h", rng.randbytes(3))] if rng.random() < 0.5 else None for _ in range(n)]
    return encode_batch(values, keys, hdrs if headers else None, stamps, uuids)


def test_arrow_decoder_equals_the_reference_decoder() -> None:
    rng = random.Random(7)
    assert SCHEMA.field("timestamp").type == TIMESTAMP
    for _ in range(300):
        content = random_batch(rng)
        ref = decode_batch(content)
        found = batch_arrays(content)
        assert found is not None
        n, (keys, values, timestamps, uuids) = found
        assert n == len(ref.values)
        assert values.to_pylist() == ref.values
        assert keys.to_pylist() == ref.keys
        assert uuids.to_pylist() == ref.uuids
        micros = timestamps.cast("int64").to_pylist()
        assert [None if t is None else t // 1000 for t in micros] == ref.timestamps


def test_arrow_decoder_with_one_timestamp_for_all_and_empty_values() -> None:
    content = encode_batch([b"", b"a", b""], keys=[None, b"", b"k"], timestamps=[7, 7, 7])
    found = batch_arrays(content)
    assert found is not None
    _, (keys, values, timestamps, _) = found
    assert values.to_pylist() == [b"", b"a", b""]
    assert keys.to_pylist() == [None, b"", b"k"]
    assert timestamps.cast("int64").to_pylist() == [7000, 7000, 7000]


def test_arrow_decoder_leaves_batches_with_headers_to_the_reference_decoder() -> None:
    content = encode_batch([b"a"], headers=[[("h", b"x")]])
    assert batch_arrays(content) is None


def test_arrow_decoder_rejects_what_the_reference_decoder_rejects() -> None:
    rng = random.Random(11)
    for _ in range(300):
        content = bytearray(random_batch(rng))
        at = rng.randrange(len(content))
        content[at] ^= 1 << rng.randrange(8)
        with pytest.raises(CorruptBatchError):
            decode_batch(bytes(content))
        with pytest.raises(CorruptBatchError):
            batch_arrays(bytes(content))
    # a batch whose lengths do not add up (CRC recomputed: only the structure is wrong)
    good = encode_batch([b"abc", b"de"])
    body = bytearray(good[12:])
    struct.pack_into("<I", body, 16, 4)  # first value length 3 -> 4
    bad = good[:8] + struct.pack("<I", crc32c(bytes(body))) + bytes(body)
    with pytest.raises(CorruptBatchError):
        decode_batch(bad)
    with pytest.raises(CorruptBatchError):
        batch_arrays(bad)


def test_check_batch_rejects_exactly_what_decode_batch_rejects() -> None:
    rng = random.Random(13)
    for trial in range(600):
        content = bytearray(random_batch(rng, headers=trial % 3 == 0))
        if trial % 2:
            at = rng.randrange(len(content))
            content[at] ^= 1 << rng.randrange(8)
        try:
            ref = decode_batch(bytes(content))
        except CorruptBatchError:
            with pytest.raises(CorruptBatchError):
                check_batch(bytes(content))
            continue
        layout, _ = check_batch(bytes(content))
        assert layout.messages == len(ref.values)
    # structure wrong under a good CRC: a value length that overruns, a bad UTF-8 name
    for good, at, value in [
        (encode_batch([b"abc", b"de"]), 16, 4),
        (encode_batch([b"abc", b"de"], keys=[b"k", None]), 16, -2),
    ]:
        body = bytearray(good[12:])
        struct.pack_into("<i", body, at, value)
        bad = good[:8] + struct.pack("<I", crc32c(bytes(body))) + bytes(body)
        with pytest.raises(CorruptBatchError):
            decode_batch(bad)
        with pytest.raises(CorruptBatchError):
            check_batch(bad)
    named = encode_batch([b"v"], headers=[[("\u00e9", b"x")]])
    body = bytearray(named[12:])
    body[body.index("\u00e9".encode())] = 0xFF  # no longer UTF-8
    bad = named[:8] + struct.pack("<I", crc32c(bytes(body))) + bytes(body)
    with pytest.raises(CorruptBatchError, match="UTF-8"):
        check_batch(bad)


def _checked(topic: str, partition: str, offset: int, content: bytes) -> CheckedBatch:
    layout, columns = check_batch(content)
    return CheckedBatch(topic, partition, offset, content, layout, columns)


def _reference(parts: list[tuple[str, str, int, bytes, int, int]]) -> list[Record]:
    """Records of (topic, partition, offset, content, start, stop) the slow, obvious way."""
    out = []
    for topic, partition, offset, content, start, stop in parts:
        if not content.startswith(b"\x89DFKB"):
            out.append(Record(topic, partition, offset, 0, None, content, (), None, None))
            continue
        cols = decode_batch(content)
        for i in range(start, stop):
            out.append(
                Record(
                    topic,
                    partition,
                    offset,
                    i,
                    cols.keys[i],
                    cols.values[i],
                    cols.headers[i],
                    cols.timestamps[i],
                    cols.uuids[i],
                )
            )
    return out


def _arrow_rows(records: list[Record]) -> list[dict[str, object]]:
    return [
        {
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
            "index": r.index,
            "key": r.key,
            "value": r.value,
            "headers": [{"key": k, "value": v} for k, v in r.headers] if r.headers else None,
            "timestamp": r.timestamp,
            "uuid": r.uuid,
        }
        for r in records
    ]


def _table_rows(table: pa.Table) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = table.to_pylist()
    micros = table.column("timestamp").cast(pa.int64()).to_pylist()
    for row, us in zip(rows, micros, strict=True):
        row["timestamp"] = None if us is None else us // 1000
    return rows


def test_columns_equal_the_records_of_the_same_parts() -> None:
    rng = random.Random(5)
    for _ in range(40):
        spec: list[tuple[str, str, int, bytes, int, int]] = []
        parts: list[Part] = []
        offset = rng.randint(0, 1000)
        for _ in range(rng.randint(1, 6)):
            topic, partition = rng.choice([("t", "p.0"), ("t", "p.1"), ("u", "p.0")])
            if rng.random() < 0.4:
                contents = [rng.randbytes(rng.randint(0, 9)) for _ in range(rng.randint(1, 5))]
                contents = [b"x" + c for c in contents]  # never the magic
                parts.append(PlainRun(topic, partition, offset, tuple(contents)))
                spec += [(topic, partition, offset + i, c, 0, 1) for i, c in enumerate(contents)]
                offset += len(contents)
            else:
                content = random_batch(rng, headers=rng.random() < 0.3)
                checked = _checked(topic, partition, offset, content)
                start = rng.randrange(checked.count)
                stop = rng.randint(start + 1, checked.count)
                parts.append(BatchSlice(checked, start, stop))
                spec.append((topic, partition, offset, content, start, stop))
                offset += 1
        expected = _reference(spec)
        columns = RecordColumns(parts)
        assert len(columns) == len(expected)
        assert list(columns) == expected
        assert columns.records() == expected
        by_field = [list(c) for c in zip(*expected, strict=True)]
        names = ["topics", "partitions", "offsets", "indexes", "keys", "values"]
        names += ["headers", "timestamps", "uuids"]
        for name, column in zip(names, by_field, strict=True):
            assert getattr(columns, name) == column, name
            assert getattr(columns, name) is getattr(columns, name)  # built once
        table = columns.to_arrow()
        assert table.schema == SCHEMA
        assert _table_rows(table) == _arrow_rows(expected)


def test_columns_of_records_of_any_partitions() -> None:
    records = [
        Record("t", "a", 3, 0, b"k", b"v1", (("h", b"x"),), 1700000000123, bytes(range(16))),
        Record("u", "b", 9, 2, None, b"v2", (), None, None),
    ]
    columns = RecordColumns.from_records(records)
    assert list(columns) == records
    assert columns.topics == ["t", "u"]
    assert columns.values == [b"v1", b"v2"]
    assert columns.headers == [(("h", b"x"),), ()]
    assert _table_rows(columns.to_arrow()) == _arrow_rows(records)
    assert not RecordColumns.from_records([])
    empty = RecordColumns().to_arrow()
    assert empty.num_rows == 0
    assert empty.schema == SCHEMA


def test_a_checked_batch_is_not_crc_checked_again_by_its_arrow_columns() -> None:
    """A consumer checks a batch when it takes it (check_batch: CRC and structure); its Arrow
    columns then skip the CRC, the one check that reads every byte, and keep the rest."""
    good = encode_batch([b"abc", b"de"])
    bad = good[:-1] + bytes([good[-1] ^ 1])  # a payload byte flipped: only the CRC sees it
    with pytest.raises(CorruptBatchError, match="CRC"):
        batch_arrays(bad)
    found = batch_arrays(bad, checked=True)
    assert found is not None
    assert found[1][1].to_pylist() == [b"abc", b"dd"]
    with pytest.raises(CorruptBatchError):  # the structure is still checked
        batch_arrays(good[:-1], checked=True)
    checked = _checked("t", "p", 0, good)
    assert _table_rows(RecordColumns([BatchSlice(checked, 0, 2)]).to_arrow()) == _arrow_rows(
        _reference([("t", "p", 0, good, 0, 2)])
    )


def test_concat_joins_the_parts_of_several_polls() -> None:
    rng = random.Random(9)
    polls: list[RecordColumns] = []
    spec: list[tuple[str, str, int, bytes, int, int]] = []
    for offset in range(0, 12, 2):
        content = random_batch(rng, headers=offset == 4)
        checked = _checked("t", "p", offset, content)
        plain = b"x%d" % offset
        polls.append(
            RecordColumns(
                [BatchSlice(checked, 0, checked.count), PlainRun("t", "p", offset + 1, [plain])]
            )
        )
        spec += [
            ("t", "p", offset, content, 0, checked.count),
            ("t", "p", offset + 1, plain, 0, 1),
        ]
    joined = RecordColumns.concat(polls)
    expected = _reference(spec)
    assert joined.records() == expected
    assert len(joined) == sum(map(len, polls))
    table = joined.to_arrow()
    assert table.num_rows == len(expected)
    assert len(table.to_batches()) == 1  # one partition: one batch, not one per poll
    assert _table_rows(table) == _arrow_rows(expected)
    assert RecordColumns.concat(polls[:1]) is polls[0]
    assert not RecordColumns.concat([])


def test_plain_values_are_the_contents_themselves() -> None:
    contents = [b"a", b"b"]
    columns = RecordColumns([PlainRun("t", "p", 0, contents)])
    assert columns.values is contents  # no copy of a plain run's list


def test_to_arrow_without_pyarrow_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    columns = RecordColumns([PlainRun("t", "p", 0, [b"a"])])
    assert columns.values == [b"a"]  # the lists never need pyarrow
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now fails
    monkeypatch.delitem(sys.modules, "dafka.records.arrow")
    with pytest.raises(ImportError, match=r"dafka\[arrow\]"):
        columns.to_arrow()


def test_small_batch_slices_are_gathered_into_one_chunk_with_the_same_rows() -> None:
    """Slices of fewer than SMALL_SLICE messages (most RECORDs of a slow producer hold one)
    become Arrow from their decoded columns, joined with their small neighbours; bigger
    slices and plain runs between them keep their own chunks: the rows are the same."""
    rng = random.Random(11)
    parts: list[Part] = []
    spec: list[tuple[str, str, int, bytes, int, int]] = []
    offset = 0
    for kind in ["small", "small", "big", "small", "headers", "plain", "small", "big"]:
        if kind == "plain":
            contents = [b"x1", b"x2"]
            parts.append(PlainRun("t", "p", offset, contents))
            spec += [("t", "p", offset + i, c, 0, 1) for i, c in enumerate(contents)]
            offset += len(contents)
            continue
        n = SMALL_SLICE + 8 if kind == "big" else rng.randint(1, 3)
        values = [rng.randbytes(rng.randint(0, 20)) for _ in range(n)]
        keys = [rng.choice([None, b"k"]) for _ in range(n)]
        stamps = [1_767_225_600_000 + rng.randint(0, 999) for _ in range(n)]
        uuids = [rng.choice([bytes(16), rng.randbytes(16)]) for _ in range(n)]
        hdrs = [[("h", b"v")] for _ in range(n)] if kind == "headers" else None
        content = encode_batch(values, keys, hdrs, stamps, uuids)
        checked = _checked("t", "p", offset, content)
        start = 1 if kind == "big" else 0
        parts.append(BatchSlice(checked, start, n))
        spec.append(("t", "p", offset, content, start, n))
        offset += 1
    table = RecordColumns(parts).to_arrow()
    assert table.schema == SCHEMA
    assert _table_rows(table) == _arrow_rows(_reference(spec))
