"""The source's and the sink's options beside Spark's Kafka connector's (issue 21): what a
Kafka user types is either dafka's too (``assign``, ``includeHeaders``) or names dafka's
equivalent in the ConfigError."""

from __future__ import annotations

import pytest

from dafka.errors import ConfigError
from dafka.spark._options import parse_sink_options, parse_source_options
from dafka.spark._sink import sink_name


@pytest.mark.parametrize(
    ("option", "hint"),
    [
        ("kafka.bootstrap.servers", "'towers'"),
        ("kafka.group.id", "no consumer group"),
        ("kafka.max.poll.records", "'kafka.\\*' options configure a Kafka client"),
    ],
)
def test_an_unknown_kafka_option_names_dafkas_equivalent(option: str, hint: str) -> None:
    with pytest.raises(ConfigError, match=rf"unknown dafka source option.*{hint}"):
        parse_source_options({"subscribe": "t", option: "1"}, streaming=True)


def test_a_sink_given_kafkas_server_option_names_towers() -> None:
    with pytest.raises(ConfigError, match=r"kafka\.bootstrap\.servers.*'towers'"):
        parse_sink_options({"topic": "t", "kafka.bootstrap.servers": "h:9092"})


def test_assign_names_partitions_of_topics() -> None:
    options = parse_source_options(
        {"assign": '{"a": ["w1.0", "w2.0"], "b": ["x.0"]}'}, streaming=True
    )
    assert options.topics == ("a", "b")
    assert options.reads(("a", "w1.0"))
    assert options.reads(("b", "x.0"))
    assert not options.reads(("a", "w3.0"))
    assert not options.reads(("c", "w1.0"))
    every = parse_source_options({"subscribe": "a"}, streaming=True)
    assert every.reads(("a", "w3.0"))
    assert not every.reads(("b", "w3.0"))


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"assign": "a"}, "assign"),
        ({"assign": '{"a": [0]}'}, "partitions are named by strings"),
        ({"assign": '{"a": []}'}, "list of partitions"),
        ({"assign": '{"a": ["w.0"]}', "subscribe": "a"}, "exactly one of"),
        ({"subscribe": "a", "includeHeaders": "yes"}, "includeHeaders"),
        ({"subscribe": "a", "clusterTimeout": "0"}, "clusterTimeout"),
    ],
)
def test_bad_values_name_the_option(given: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_source_options(given, streaming=True)


def test_include_headers_and_cluster_timeout() -> None:
    options = parse_source_options(
        {"subscribe": "a", "INCLUDEHEADERS": "false", "clusterTimeout": "5"}, streaming=True
    )
    assert options.include_headers is False
    assert options.cluster_timeout == 5.0
    assert parse_source_options({"subscribe": "a"}, streaming=True).include_headers is True


def test_the_shared_checks_leave_the_kind_of_read_open() -> None:
    """``schema()`` parses before Spark says whether the read streams: 'latest' (streaming
    only) and 'endingOffsets' (batch only) pass there, and fail in the other kind."""
    both = {"subscribe": "a", "startingOffsets": "latest", "endingOffsets": "latest"}
    parse_source_options(both, streaming=None)
    with pytest.raises(ConfigError, match="startingOffsets"):
        parse_source_options(both, streaming=False)
    with pytest.raises(ConfigError, match="endingOffsets"):
        parse_source_options(both, streaming=True)


def test_a_one_shot_write_gets_its_own_name() -> None:
    options = parse_sink_options({"topic": "t"})
    first, second = sink_name(options, {}, once=True), sink_name(options, {}, once=True)
    assert first != second
    assert first.startswith("write-")
    named = parse_sink_options({"topic": "t", "name": "load-1"})
    assert sink_name(named, {}, once=True) == "load-1"
    with pytest.raises(ConfigError, match="checkpointLocation"):
        sink_name(options, {})  # a streaming writer is made per micro-batch: it needs one


def test_max_offsets_per_trigger_counts_messages() -> None:
    """Kafka's name is dafka's too (it was refused with a hint to maxRecordsPerTrigger)."""
    options = parse_source_options(
        {"subscribe": "t", "maxOffsetsPerTrigger": "500"}, streaming=True
    )
    assert (options.max_offsets_per_trigger, options.max_records_per_trigger) == (500, None)
    with pytest.raises(ConfigError, match="at most one of 'maxOffsetsPerTrigger'"):
        parse_source_options(
            {"subscribe": "t", "maxOffsetsPerTrigger": "5", "maxRecordsPerTrigger": "5"},
            streaming=True,
        )
    with pytest.raises(ConfigError, match="'maxOffsetsPerTrigger' is not supported with"):
        parse_source_options(
            {"subscribe": "t", "maxOffsetsPerTrigger": "5", "isolation": "read_committed"},
            streaming=True,
        )
    with pytest.raises(ConfigError, match="maxOffsetsPerTrigger"):
        parse_source_options({"subscribe": "t", "maxOffsetsPerTrigger": "0"}, streaming=True)


def test_min_offsets_counts_messages_min_records_records() -> None:
    """``minOffsetsPerTrigger`` counts messages (the driver's counter), in either isolation;
    ``minRecordsPerTrigger`` is its RECORD-counting twin; one of the two at most."""
    for isolation in ("read_uncommitted", "read_committed"):
        options = parse_source_options(
            {"subscribe": "t", "minOffsetsPerTrigger": "50", "isolation": isolation},
            streaming=True,
        )
        assert (options.min_offsets_per_trigger, options.min_records_per_trigger) == (50, None)
    options = parse_source_options({"subscribe": "t", "minRecordsPerTrigger": "7"}, streaming=True)
    assert (options.min_offsets_per_trigger, options.min_records_per_trigger) == (None, 7)
    with pytest.raises(ConfigError, match="at most one of 'minOffsetsPerTrigger'"):
        parse_source_options(
            {"subscribe": "t", "minOffsetsPerTrigger": "5", "minRecordsPerTrigger": "5"},
            streaming=True,
        )
