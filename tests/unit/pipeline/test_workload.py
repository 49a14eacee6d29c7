"""The sensor feed: deterministic, shaped as the spec says, and parsed as labelled."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from dafka.pipeline import (
    Heartbeat,
    Kind,
    Reading,
    WorkloadSpec,
    generate,
    heartbeat,
    parse,
    reference_table,
)

SPEC = WorkloadSpec(seed=3, readings=5_000, devices=12, step_ms=10, max_lateness_ms=2_000)


def test_same_seed_same_feed_other_seed_other_feed() -> None:
    assert list(generate(SPEC)) == list(generate(SPEC))
    other = WorkloadSpec(**{**SPEC.__dict__, "seed": 4})
    assert [m.value for m in generate(other)] != [m.value for m in generate(SPEC)]


def test_indexes_are_the_positions_and_readings_are_all_there() -> None:
    messages = list(generate(SPEC))
    assert [m.index for m in messages] == list(range(len(messages)))
    kinds = Counter(m.kind for m in messages)
    assert kinds[Kind.READING] == SPEC.readings
    # the fractions give roughly the expected numbers (binomial, far from the bounds)
    assert 50 < kinds[Kind.DUPLICATE] < 150
    assert 5 < kinds[Kind.MALFORMED] < 40


def test_every_message_parses_as_its_label_says() -> None:
    seen: set[str] = set()
    for m in generate(SPEC):
        parsed = parse(m.value)
        if m.kind is Kind.MALFORMED:
            assert parsed is None, m.value
            continue
        assert isinstance(parsed, Reading)
        assert parsed == m.reading
        assert m.key == parsed.device.encode()
        if m.kind is Kind.DUPLICATE:
            assert parsed.event_id in seen  # a duplicate follows its original
        else:
            assert parsed.event_id not in seen
            seen.add(parsed.event_id)


def test_duplicates_are_byte_identical_and_arrive_within_the_delay() -> None:
    first: dict[bytes, int] = {}
    for m in generate(SPEC):
        if m.kind is Kind.READING:
            first[m.value] = m.index
        elif m.kind is Kind.DUPLICATE:
            # delay counted in messages, and malformed ones may sit in between
            assert 0 < m.index - first[m.value] <= 2 * SPEC.max_duplicate_delay


def test_lateness_is_bounded_so_a_watermark_of_more_keeps_every_reading() -> None:
    newest = SPEC.start_ms
    late = 0
    for m in generate(SPEC):
        if m.reading is None:
            continue
        if m.reading.ts < newest:
            late += 1
        # duplicates lag by their delay in messages too
        assert newest - m.reading.ts <= SPEC.max_lateness_ms + 2 * SPEC.max_duplicate_delay * (
            SPEC.step_ms
        )
        newest = max(newest, m.reading.ts)
    assert late > 0


def test_heartbeat_parses_as_a_heartbeat_and_is_json() -> None:
    value = heartbeat("end-0", 123)
    assert parse(value) == Heartbeat(123)
    assert json.loads(value)["heartbeat"] is True


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"[1, 2]",
        b'{"event_id": "a", "device": "d", "ts": 1}',
        b'{"event_id": "a", "device": "d", "ts": 1, "temp": 1.5}',
        b'{"event_id": "a", "device": "d", "ts": true, "temp": 1}',
        b'{"event_id": 1, "device": "d", "ts": 1, "temp": 1}',
        b'{"heartbeat": true}',
        b"\xff",
    ],
)
def test_parse_rejects_what_the_job_rejects(value: bytes) -> None:
    assert parse(value) is None


def test_reference_table_is_stable_and_covers_sites_and_kinds() -> None:
    table = reference_table(20)
    assert table == reference_table(20)
    assert len({d.device for d in table}) == 20
    assert len({d.site for d in table}) == 5
    assert len({d.kind for d in table}) == 4


@pytest.mark.parametrize(
    "bad",
    [{"readings": -1}, {"devices": 0}, {"late_fraction": 1.5}, {"max_duplicate_delay": 0}],
)
def test_bad_specs_are_refused(bad: dict[str, int | float]) -> None:
    with pytest.raises(ValueError, match=r"."):
        WorkloadSpec(**bad)  # type: ignore[arg-type]
