"""Settings: defaults, the towers parser, validation that names the field."""

from __future__ import annotations

import asyncio

import pytest

from dafka.client import (
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    ConsumerSettings,
    Producer,
    ProducerSettings,
)
from dafka.client._settings import resolve_settings
from dafka.errors import ConfigError
from dafka.node import NodeArgumentError
from dafka.records import Record, RecordMetadata, plain_record


def test_clients_take_towers_in_the_one_grammar() -> None:
    """The commands' grammar (dafka.config.tower_endpoints): host:port or
    host:subport:pubport; a bad value is a ConfigError naming the field."""
    t = ProducerSettings(towers="a:1, tcp://b:6000,[::1]:7000,c:10:20").transport()
    assert t.tower_sub_addresses == ("tcp://a:1", "tcp://b:6000", "tcp://[::1]:7000", "tcp://c:10")
    assert t.tower_pub_addresses == ("tcp://a:2", "tcp://b:6001", "tcp://[::1]:7001", "tcp://c:20")
    assert t.towers == "a:1,b:6000,[::1]:7000,c:10:20"
    assert ConsumerSettings(towers="h:5:9").transport().tower_pub_addresses == ("tcp://h:9",)
    for bad in ("", "host", "host:", ":5556", "h:abc", "h:0", "h:65535", "h:1:2:3", "my h:1"):
        with pytest.raises(ConfigError, match="towers"):
            ProducerSettings(towers=bad)
    with pytest.raises(ConfigError, match="towers must be a string"):
        ConsumerSettings(towers=["h:1"])  # type: ignore[arg-type]


def test_beacon_timeout_defaults_to_four_beacon_intervals() -> None:
    assert ConsumerSettings(beacon_interval=2.0).transport().beacon_timeout == 8.0
    assert ProducerSettings(beacon_interval=0.2, beacon_timeout=3.0).transport().beacon_timeout == 3


def test_transport_from_settings() -> None:
    t = ProducerSettings(towers="h:10,g:20", beacon_interval=0.5, socket_linger_ms=0).transport()
    assert t.tower_sub_addresses == ("tcp://h:10", "tcp://g:20")
    assert t.tower_pub_addresses == ("tcp://h:11", "tcp://g:21")
    assert t.beacon_interval == 0.5
    assert t.linger_ms == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("partitions", 0),
        ("partitions", 1.5),
        ("partitions", True),
        ("min_stores", 0),
        ("linger_ms", -1),
        ("batch_size", 0),
        ("partitioner", "random"),
        ("backpressure", "drop"),
        ("delivery_timeout", 0),
        ("name", ""),
        ("batching", "yes"),
        ("towers", "nope"),
        ("beacon_interval", 0),
        ("max_in_flight", 0),
        ("max_pending_commit_bytes", 0),
        ("max_pending_commit_bytes", 1.5),
    ],
)
def test_producer_validation_names_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        ProducerSettings(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("offset_reset", "middle"),
        ("isolation_level", "serializable"),
        ("fetch_window", 0),
        ("heads_refresh", -1),
        ("max_queued", 0),
        ("skip_unavailable_after", 0),
    ],
)
def test_consumer_validation_names_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        ConsumerSettings(**{field: value})  # type: ignore[arg-type]


def test_beacon_timeout_must_exceed_interval() -> None:
    with pytest.raises(ConfigError, match="beacon_timeout"):
        ConsumerSettings(beacon_interval=2.0, beacon_timeout=2.0)


def test_a_heartbeat_not_below_the_session_says_where_the_session_came_from() -> None:
    """``dafka consume -G`` asks this rule before joining: the message is the user's."""
    with pytest.raises(ConfigError, match=r"\(500\) must be below session_timeout_ms \(500\)$"):
        ConsumerSettings(session_timeout_ms=500, heartbeat_interval_ms=500)
    with pytest.raises(ConfigError, match=r"session_timeout_ms \(400: 2 beacon intervals\)"):
        ConsumerSettings(beacon_interval=0.2, heartbeat_interval_ms=500)
    assert ConsumerSettings(beacon_interval=0.2, heartbeat_interval_ms=399).group_timing() == (
        0.4,
        0.399,
    )


def test_node_configs_follow_settings() -> None:
    p = ProducerSettings(min_stores=2, head_interval=0.25, max_in_flight=10)
    config = p.producer_config()
    assert (config.min_stores, config.head_interval, config.max_unacked_records) == (2, 0.25, 10)
    c = ConsumerSettings(offset_reset="earliest", fetch_window=50, heads_refresh=None)
    cc = c.consumer_config()
    assert (cc.offset_reset, cc.fetch.window, cc.heads_refresh) == ("earliest", 50, None)


def test_keyword_fields_override_settings() -> None:
    base = ProducerSettings(linger_ms=2)
    got = resolve_settings(ProducerSettings, base, {"partitions": 3})
    assert (got.linger_ms, got.partitions) == (2, 3)
    assert resolve_settings(ProducerSettings, None, {}) == ProducerSettings()
    with pytest.raises(ConfigError, match="lingr_ms"):
        resolve_settings(ProducerSettings, None, {"lingr_ms": 1})
    with pytest.raises(ConfigError, match="ProducerSettings"):
        resolve_settings(ProducerSettings, ConsumerSettings(), {})  # type: ignore[type-var]


def test_plain_record_shape() -> None:
    r = plain_record("t", "P", 7, b"v")
    assert r == Record("t", "P", 7, 0, None, b"v", (), None, None)
    assert (r.offset, r.value, r.uuid) == (7, b"v", None)
    assert RecordMetadata("t", "P", 7, 3).index == 3


@pytest.mark.parametrize(
    ("topic", "fields", "error", "match"),
    [
        (b"orders", {}, TypeError, "topic must be a str"),
        ("", {}, NodeArgumentError, "topic must be 1 to 255 bytes"),
        ("t" * 256, {}, NodeArgumentError, "topic must be 1 to 255 bytes"),
        ("orders", {"name": "n" * 254}, NodeArgumentError, "producer id must be 1 to 255"),
        ("orders", {"linger_ms": -1}, ConfigError, "linger_ms"),
    ],
)
def test_producer_and_async_producer_reject_the_same_arguments_when_built(
    topic: object, fields: dict[str, object], error: type[Exception], match: str
) -> None:
    """Both check their arguments in the constructor (one function), before any thread or
    socket: no cluster is needed to see the errors."""
    with pytest.raises(error, match=match):
        Producer(topic, **fields)  # type: ignore[arg-type]

    async def build() -> None:
        AsyncProducer(topic, **fields)  # type: ignore[arg-type]

    with pytest.raises(error, match=match):
        asyncio.run(build())


@pytest.mark.parametrize(
    ("topics", "fields", "error", "match"),
    [
        ([123], {}, TypeError, "topic must be a str, got int"),
        (123, {}, TypeError, "topics must be a str or an iterable of str, got int"),
        (b"orders", {}, TypeError, "topics must be a str or an iterable of str, got bytes"),
        (["ok", None], {}, TypeError, "topic must be a str, got NoneType"),
        ([""], {}, NodeArgumentError, "topic must be 1 to 255 bytes"),
        (["t" * 256], {}, NodeArgumentError, "topic must be 1 to 255 bytes"),
        (None, {"assign": {("t", 7): 0}}, TypeError, "partition must be a str, got int"),
        (None, {"assign": {"t": 0}}, TypeError, r"\(topic, partition\) keys"),
        (None, {"end_offsets": {("t", "p"): 3}}, ConfigError, "not in assign"),
    ],
)
def test_consumer_and_async_consumer_reject_bad_topics_when_built(
    topics: object, fields: dict[str, object], error: type[Exception], match: str
) -> None:
    """A topic that is not a str is a clear TypeError raised by the constructor, before any
    thread or socket (was: an AttributeError from the node's thread, or a wait for a tower).
    ``ready_timeout`` is short so that the old code fails fast instead of waiting 10 s."""
    with pytest.raises(error, match=match):
        Consumer(topics, ready_timeout=0.5, **fields)  # type: ignore[arg-type]

    async def build() -> None:
        AsyncConsumer(topics, ready_timeout=0.5, **fields)  # type: ignore[arg-type]

    with pytest.raises(error, match=match):
        asyncio.run(build())
