"""The expected output, computed by hand on small feeds and cross-checked on a generated one."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from dafka.pipeline import (
    Aggregate,
    Device,
    Kind,
    WorkloadSpec,
    expected,
    generate,
    heartbeat,
    reference_table,
    window_of,
)

TABLE = [Device("a", "oslo", "office"), Device("b", "turin", "freezer")]


def reading(event_id: str, device: str, ts: int, temp: int) -> bytes:
    return json.dumps({"event_id": event_id, "device": device, "ts": ts, "temp": temp}).encode()


def test_a_small_feed_by_hand() -> None:
    values = [
        reading("1", "a", 1_000, 10),
        reading("2", "a", 1_999, 30),
        reading("1", "a", 1_000, 10),  # duplicate
        reading("3", "b", 2_000, -5),
        b"{broken",
        reading("4", "a", 500, 7),  # late, earlier window
        reading("5", "zz", 2_100, 1),  # not in the reference table
        heartbeat("hb", 99_000),
        b"{broken",
    ]
    result = expected(values, TABLE, window_ms=1_000)
    assert result.messages == 8
    assert result.readings == 5
    assert result.duplicates == 1
    assert result.dead_letters == Counter({b"{broken": 2})
    assert result.aggregates == [
        Aggregate(0, 1_000, "a", "oslo", "office", 1, 7, 7, 7),
        Aggregate(1_000, 2_000, "a", "oslo", "office", 2, 40, 10, 30),
        Aggregate(2_000, 3_000, "b", "turin", "freezer", 1, -5, -5, -5),
        Aggregate(2_000, 3_000, "zz", None, None, 1, 1, 1, 1),
    ]


def test_window_of_matches_spark_for_negative_and_boundary_times() -> None:
    assert window_of(0, 1000) == 0
    assert window_of(999, 1000) == 0
    assert window_of(1000, 1000) == 1000
    assert window_of(-1, 1000) == -1000


def test_generated_feed_accounts_for_every_message() -> None:
    spec = WorkloadSpec(seed=11, readings=3_000, devices=7, step_ms=20)
    messages = list(generate(spec))
    result = expected((m.value for m in messages), reference_table(spec.devices), 5_000)
    kinds = Counter(m.kind for m in messages)
    assert result.messages == len(messages)
    assert result.readings == kinds[Kind.READING] == spec.readings
    assert result.duplicates == kinds[Kind.DUPLICATE]
    assert sum(result.dead_letters.values()) == kinds[Kind.MALFORMED]
    assert sum(a.count for a in result.aggregates) == spec.readings
    assert len({(a.window_start, a.device) for a in result.aggregates}) == len(result.aggregates)
    assert all(a.site is not None for a in result.aggregates)


def test_aggregate_json_round_trip_and_validation() -> None:
    agg = Aggregate(0, 5, "a", None, "office", 2, 3, 1, 2)
    assert Aggregate.from_json(json.loads(json.dumps(agg.to_json()))) == agg
    with pytest.raises(ValueError, match="count"):
        Aggregate.from_json({**agg.to_json(), "count": "2"})
    with pytest.raises(ValueError, match="device"):
        Aggregate.from_json({**agg.to_json(), "device": None})


def test_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="window_ms"):
        expected([], TABLE, 0)
