"""The executor's rows: a bounded read's columns -> Arrow batches of the source schema."""

from __future__ import annotations

import random

import pyarrow as pa

from dafka.message import Flags, ProducerID, build_uuids
from dafka.records import BatchSlice, Part, PlainRun, Record, RecordColumns
from dafka.records._batch import check_batch, encode_batch
from dafka.records._columns import CheckedBatch
from dafka.records.arrow import SCHEMA
from dafka.spark._read import RangePartition, _committed, arrow_batches
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


def test_a_committed_task_holds_a_span_larger_than_the_consumers_ring() -> None:
    """A sink's transaction is one span per task: 500,000 rows, ~60 MB, past the 32 MiB
    the read-committed consumer holds. The task's filter holds it (its memory holds the
    span whole at the ACK either way), so it is released without reading it again from
    the stores: here there are none (towers nobody answers: a replay's consumer failed
    the task, no tower within 10 s; 36 MiB of RECORDs)."""
    producer = ProducerID.fromhex("01000000000a")
    n, value = 1000, b"v" * 1000  # RECORDs of ~1 MiB
    parts: list[Part] = []
    clock = 1000
    for offset in range(36):
        uuids = build_uuids(producer, clock, n, int(Flags.CONTINUE_TXN))
        clock += n
        content = encode_batch([value] * n, uuids=uuids)
        layout, _ = check_batch(content)
        batch = CheckedBatch("t", "p.0", offset, content, layout, None)
        parts.append(BatchSlice(batch, 0, batch.count))
    ack = encode_batch([b""], uuids=build_uuids(producer, clock, 1, int(Flags.ACK_TXN)))
    layout, _ = check_batch(ack)
    parts.append(BatchSlice(CheckedBatch("t", "p.0", 36, ack, layout, None), 0, 1))
    task = RangePartition("127.0.0.1:1", "t", "p.0", 0, 37, 0.5, True, committed=True)
    got = list(
        _committed([RecordColumns(parts[:18]), RecordColumns(parts[18:])], task, task.settings())
    )
    assert sum(len(c) for c in got) == 36 * n
    assert {type(p).__name__ for c in got for p in c.parts} == {"BatchSlice"}
