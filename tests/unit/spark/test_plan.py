"""Offset planning of the dafka source (pure) and its options."""

from __future__ import annotations

import itertools

import pytest

from dafka.errors import ConfigError
from dafka.spark._options import parse_sink_options, parse_source_options
from dafka.spark._plan import Range, latest, ranges


def test_latest_goes_to_heads_and_reads_new_partitions_from_zero() -> None:
    start = {"t": {"a": 3}}
    heads = {("t", "a"): 9, ("t", "b"): 4}
    assert latest(start, heads, None) == {"t": {"a": 10, "b": 5}}
    # a head below start (a store lost its tail) never moves the offset back
    assert latest({"t": {"a": 3}}, {("t", "a"): 1}, None) == {"t": {"a": 3}}
    # partitions in start whose heads are not known yet stay where they are
    assert latest({"t": {"z": 7}}, {}, None) == {"t": {"z": 7}}


def test_max_records_are_shared_fairly() -> None:
    start = {"t": {"a": 0, "b": 0, "c": 0}}
    heads = {("t", "a"): 99, ("t", "b"): 1, ("t", "c"): 99}  # backlogs 100, 2, 100
    end = latest(start, heads, 10)
    assert sum(end["t"].values()) == 10
    assert end["t"]["b"] == 2
    assert sorted([end["t"]["a"], end["t"]["c"]]) == [4, 4]
    assert latest(start, heads, 1000) == latest(start, heads, None)


def test_ranges_split_for_min_partitions() -> None:
    start = {"t": {"a": 10}}
    end = {"t": {"a": 110, "b": 10, "c": 0}}
    assert ranges(start, end, None) == [Range("t", "a", 10, 110), Range("t", "b", 0, 10)]
    split = ranges(start, end, 11)
    assert len(split) == 11
    assert sum(r.size for r in split) == 110
    assert [r for r in split if r.partition == "b"] == [Range("t", "b", 0, 10)]
    a = [r for r in split if r.partition == "a"]
    assert all(x.end == y.start for x, y in itertools.pairwise(a))
    assert (a[0].start, a[-1].end) == (10, 110)


def test_source_options() -> None:
    o = parse_source_options(
        {"subscribe": "a, b", "maxrecordspertrigger": "5", "startingOffsets": '{"a": {"p": 3}}'},
        streaming=True,
    )
    assert o.topics == ("a", "b")
    assert o.max_records_per_trigger == 5
    assert o.starting == {"a": {"p": 3}}
    assert o.transport.tower_sub_addresses == ("tcp://127.0.0.1:5556",)
    with pytest.raises(ConfigError, match="endingOffsets"):
        parse_source_options({"subscribe": "a", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(ConfigError, match="startingOffsets"):
        parse_source_options({"subscribe": "a", "startingOffsets": "latest"}, streaming=False)
    with pytest.raises(ConfigError, match="subscribePattern"):
        parse_source_options({"subscribePattern": "("}, streaming=True)


def test_sink_options() -> None:
    # Spark passes a streaming query's checkpointLocation and queryName on to the sink.
    o = parse_sink_options(
        {"topic": "out", "towers": "h:7000", "checkpointLocation": "/x", "queryName": "q"}
    )
    assert (o.topic, o.transport.tower_pub_addresses) == ("out", ("tcp://h:7001",))
    with pytest.raises(ConfigError, match="tpoic"):
        parse_sink_options({"tpoic": "x"})
