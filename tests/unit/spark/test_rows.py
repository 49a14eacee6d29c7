"""The executor's row building: the Arrow-direct batch decoder equals the reference decoder."""

from __future__ import annotations

import random
import struct

import pytest

from dafka.client._batch import decode_batch, encode_batch
from dafka.client._errors import CorruptBatchError
from dafka.spark._arrow_batch import TIMESTAMP, batch_arrays
from dafka.spark._rows import RowBuilder
from dafka.spark._schema import SOURCE_ARROW_SCHEMA


def _random_batch(rng: random.Random, headers: bool = False) -> bytes:
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
    assert SOURCE_ARROW_SCHEMA.field("timestamp").type == TIMESTAMP
    for _ in range(300):
        content = _random_batch(rng)
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


def test_arrow_decoder_leaves_batches_with_headers_to_the_reference_decoder() -> None:
    content = encode_batch([b"a"], headers=[[("h", b"x")]])
    assert batch_arrays(content) is None


def test_arrow_decoder_rejects_what_the_reference_decoder_rejects() -> None:
    rng = random.Random(11)
    for _ in range(300):
        content = bytearray(_random_batch(rng))
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
    from crc32c import crc32c

    bad = good[:8] + struct.pack("<I", crc32c(bytes(body))) + bytes(body)
    with pytest.raises(CorruptBatchError):
        decode_batch(bad)
    with pytest.raises(CorruptBatchError):
        batch_arrays(bad)


def test_row_builder_mixes_plain_batched_and_header_records_in_order() -> None:
    rng = random.Random(3)
    contents = [b"plain0", b"plain1"]
    contents += [_random_batch(rng), _random_batch(rng, headers=True), b"plain4"]
    contents += [b"\x89DFKB\r\n\x01 corrupt"]  # the magic, then garbage: skipped, counted
    builder = RowBuilder("t", "p.0", rows_per_batch=10)
    batches = list(builder.add_run(5, contents)) + list(builder.finish())
    assert builder.corrupt == 1
    assert all(b.schema == SOURCE_ARROW_SCHEMA for b in batches)
    rows = [r for b in batches for r in b.to_pylist()]
    expected: list[tuple[int, int, bytes | None, bytes]] = []
    for seq, content in enumerate(contents[:5], 5):
        if content.startswith(b"plain"):
            expected.append((seq, 0, None, content))
        else:
            ref = decode_batch(content)
            expected += [
                (seq, i, k, v) for i, (k, v) in enumerate(zip(ref.keys, ref.values, strict=True))
            ]
    assert [(r["offset"], r["index"], r["key"], r["value"]) for r in rows] == expected
    assert {(r["topic"], r["partition"]) for r in rows} == {("t", "p.0")}
    with_headers = decode_batch(contents[3])
    got = [r["headers"] for r in rows if r["offset"] == 8]
    assert got == [
        [{"key": k, "value": v} for k, v in h] if h else None for h in with_headers.headers
    ]
