"""The executor's row building (on the shared Arrow builders of dafka.records.arrow)."""

from __future__ import annotations

import random

from dafka.records import decode_batch
from dafka.records.arrow import SCHEMA
from dafka.spark._rows import RowBuilder
from dafka.spark._schema import SOURCE_ARROW_SCHEMA
from tests.unit.records.test_records_arrow import random_batch as _random_batch


def test_the_shared_arrow_schema_is_the_spark_sources() -> None:
    """Spark refuses batches whose schema differs from the declared one in any detail."""
    assert SCHEMA.equals(SOURCE_ARROW_SCHEMA, check_metadata=True)


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
