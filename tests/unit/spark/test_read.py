"""The executor's rows: a bounded read's columns -> Arrow batches of the source schema."""

from __future__ import annotations

import random

import pyarrow as pa

from dafka.records import BatchSlice, Part, PlainRun, Record, RecordColumns
from dafka.records.arrow import SCHEMA
from dafka.spark._read import arrow_batches
from dafka.spark._schema import SOURCE_ARROW_SCHEMA
from tests.unit.records.test_records_arrow import (
    _arrow_rows,
    _checked,
    _reference,
    _table_rows,
    random_batch,
)


def test_the_shared_arrow_schema_is_the_spark_sources() -> None:
    """Spark refuses batches whose schema differs from the declared one in any detail."""
    assert SCHEMA.equals(SOURCE_ARROW_SCHEMA, check_metadata=True)


def _polls(rng: random.Random) -> tuple[list[RecordColumns], list[Record]]:
    """Random polls of one partition: plain runs, batches (some with headers), in order."""
    polls: list[RecordColumns] = []
    spec: list[tuple[str, str, int, bytes, int, int]] = []
    offset = rng.randint(0, 1000)
    for _ in range(rng.randint(1, 8)):
        parts: list[Part] = []
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.4:
                contents = [b"x" + rng.randbytes(rng.randint(0, 9)) for _ in range(3)]
                parts.append(PlainRun("t", "p.0", offset, contents))
                spec += [("t", "p.0", offset + i, c, 0, 1) for i, c in enumerate(contents)]
                offset += len(contents)
            else:
                content = random_batch(rng, headers=rng.random() < 0.3)
                checked = _checked("t", "p.0", offset, content)
                parts.append(BatchSlice(checked, 0, checked.count))
                spec.append(("t", "p.0", offset, content, 0, checked.count))
                offset += 1
        polls.append(RecordColumns(parts))
    return polls, _reference(spec)


def test_polls_become_batches_of_about_the_row_count_in_order() -> None:
    rng = random.Random(3)
    for _ in range(30):
        polls, expected = _polls(rng)
        rows = rng.choice([1, 10, 50, 10_000])
        batches = list(arrow_batches(polls, rows))
        assert all(b.schema.equals(SOURCE_ARROW_SCHEMA, check_metadata=True) for b in batches)
        assert all(b.num_rows >= rows for b in batches[:-1])  # only the last is short
        got = _table_rows(pa.Table.from_batches(batches, schema=SCHEMA))
        assert got == _arrow_rows(expected)
    assert list(arrow_batches([], 10)) == []
