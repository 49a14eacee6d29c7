"""The options of ``format("dafka")``, checked once, on the driver, before anything runs.

Spark hands a data source its options as a case-insensitive dict of strings. Every option is
parsed here into a frozen dataclass; an unknown name or a bad value raises
:class:`~dafka.errors.ConfigError` naming the option, so that a typo fails the query at once
instead of being ignored (Spark's own sources ignore unknown options; Kafka's warns).
Pure: no pyspark, no sockets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from dafka.config import PLAINTEXT, KeyFiles, check_towers
from dafka.errors import ConfigError
from dafka.transport.config import TransportConfig
from dafka.transport.security import Security

Isolation = Literal["read_uncommitted", "read_committed"]
Offsets = dict[str, dict[str, int]]
"""topic -> partition -> next sequence to read: Spark's offsets and the JSON options."""
Times = int | dict[str, dict[str, int]]
"""ms since the epoch: one for every partition, or topic -> partition -> ms."""

DEFAULT_TOWERS = "127.0.0.1:5556"

_SOURCE_OPTIONS = {
    "towers",
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "startingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsets",
    "endingtimestamp",
    "endingoffsetsbytimestamp",
    "maxrecordspertrigger",
    "maxoffsetspertrigger",
    "minoffsetspertrigger",
    "minrecordspertrigger",
    "maxtriggerdelay",
    "failondataloss",
    "isolation",
    "minpartitions",
    "fetchtimeout",
    "headsrefresh",
    "includeheaders",
    "clustertimeout",
    "key",
    "authorizedkeys",
    "towerkey",
    "acl",
}
_SINK_OPTIONS = {
    "towers",
    "topic",
    "name",
    "partitions",
    "checkpointlocation",
    "path",
    "clustertimeout",
    "key",
    "authorizedkeys",
    "towerkey",
    "acl",
}
_SPARK_OPTIONS = {"path", "checkpointlocation", "queryname"}
"""Options Spark itself may pass along (``start(path)``, ``checkpointLocation``,
``queryName``)."""

_KAFKA_NAMES = {
    "kafka.bootstrap.servers": "'towers' (the towers' host:port, comma-separated)",
    "kafka.group.id": "nothing: the source keeps no consumer group (Spark's checkpoint "
    "holds the offsets)",
    "groupidprefix": "nothing: the source keeps no consumer group (Spark's checkpoint "
    "holds the offsets)",
    "kafkaconsumer.polltimeoutms": "'fetchTimeout' (seconds)",
    "fetchoffset.numretries": "'fetchTimeout' (seconds)",
    "fetchoffset.retryintervalms": "'fetchTimeout' (seconds)",
    "startingoffsetsbytimestampstrategy": "nothing: a partition with no RECORD at or after "
    "its time starts at its end",
    "kafka.isolation.level": "'isolation' (read_uncommitted or read_committed)",
}
"""Options of Spark's Kafka connector, and what a dafka user gives instead: an unknown
option named like Kafka's says so (the connector is modelled on Kafka's)."""


ClientSecurity = KeyFiles
"""The options ``key``, ``authorizedKeys``, ``towerKey``, ``acl``: the files every client
takes (:class:`dafka.config.KeyFiles`, paths: a task carries them to its executor and reads
the files there; docs/security.md)."""


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """What a dafka source reads, and how."""

    towers: str
    topics: tuple[str, ...]
    pattern: str | None
    assigned: frozenset[tuple[str, str]] | None
    """``assign``: only these (topic, partition)s (None: every partition of the topics)."""
    starting: Literal["earliest", "latest"] | Offsets
    ending: Literal["latest"] | Offsets
    max_records_per_trigger: int | None
    max_offsets_per_trigger: int | None
    """Kafka's ``maxOffsetsPerTrigger``: at most this many messages per micro-batch (the
    driver counts them: ``dafka.spark._counts``); ``maxRecordsPerTrigger`` counts RECORDs."""
    min_offsets_per_trigger: int | None
    """Kafka's ``minOffsetsPerTrigger``: a micro-batch waits for at least this many messages
    (counted by the driver, as for ``maxOffsetsPerTrigger``), or for ``max_trigger_delay``
    seconds since the last one."""
    min_records_per_trigger: int | None
    """The same in RECORDs (``minRecordsPerTrigger``: from the heads alone, no counter)."""
    max_trigger_delay: float
    fail_on_data_loss: bool
    isolation: Isolation
    min_partitions: int | None
    fetch_timeout: float
    heads_refresh: float
    starting_times: Times | None = None
    """``startingTimestamp`` / ``startingOffsetsByTimestamp``: each partition starts at its
    first RECORD at or after the time (ms), at its end where none is (yet)."""
    ending_times: Times | None = None
    """``endingTimestamp`` / ``endingOffsetsByTimestamp`` (batch): each partition ends
    before its first RECORD at or after the time, at the heads where none is."""
    include_headers: bool = True
    cluster_timeout: float = 60.0
    """Seconds the driver waits for the cluster (a tower's welcome) before it fails."""
    security: ClientSecurity = PLAINTEXT

    @property
    def transport(self) -> TransportConfig:
        return towers_transport(self.towers, self.security)

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is one this source reads."""
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics

    def reads(self, key: tuple[str, str]) -> bool:
        """Whether the partition ``(topic, partition)`` is one this source reads (every
        partition of its topics, or with ``assign`` only those named)."""
        if self.assigned is not None:
            return key in self.assigned
        return self.matches(key[0])


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Where a dafka sink writes."""

    towers: str
    topic: str | None
    name: str | None
    partitions: int
    cluster_timeout: float = 60.0
    security: ClientSecurity = PLAINTEXT

    @property
    def transport(self) -> TransportConfig:
        return towers_transport(self.towers, self.security)


def towers_transport(towers: str, security: ClientSecurity) -> TransportConfig:
    """The transport of a client of ``towers`` (the one tower grammar, as every client),
    secured when ``security`` names a key: the head watchers' transport. The connector's
    consumers and producers take :meth:`ClientSecurity.fields` instead, which their settings
    load the same way."""
    return TransportConfig.for_towers(towers, security=Security.from_files(security))


def parse_source_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """The source's options; ``streaming`` None checks what both kinds of read share (the
    data source's ``schema()``, called when the query is defined, before Spark knows
    which kind it is)."""
    opts = _lower(options)
    _check_known(opts, _SOURCE_OPTIONS, "source")
    towers = opts.get("towers", DEFAULT_TOWERS)
    check_towers(towers, "towers")
    subscribe = opts.get("subscribe")
    pattern = opts.get("subscribepattern")
    assign = opts.get("assign")
    if sum(o is not None for o in (subscribe, pattern, assign)) != 1:
        raise ConfigError(
            "give exactly one of the options 'subscribe', 'subscribePattern' and 'assign'"
        )
    assigned = None if assign is None else _assign_option(assign)
    topics: tuple[str, ...] = ()
    if assigned is not None:
        topics = tuple(sorted({topic for topic, _ in assigned}))
    if subscribe is not None:
        topics = tuple(t.strip() for t in subscribe.split(",") if t.strip())
        if not topics:
            raise ConfigError(f"option 'subscribe' names no topic: {subscribe!r}")
        for topic in topics:
            _check_topic("subscribe", topic)
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"option 'subscribePattern' is not a regex: {exc}") from None
    starting = _offsets_option(
        opts, "startingOffsets", "latest" if streaming else "earliest", ("earliest", "latest")
    )
    if streaming and "endingoffsets" in opts:
        raise ConfigError("option 'endingOffsets' is for batch reads (spark.read) only")
    ending = _offsets_option(opts, "endingOffsets", "latest", ("latest",))
    if starting == "latest" and streaming is False:
        raise ConfigError("option 'startingOffsets' cannot be 'latest' for batch reads")
    starting_times = _times_option(opts, "startingOffsets", "startingTimestamp")
    ending_times = _times_option(opts, "endingOffsets", "endingTimestamp")
    if streaming and ending_times is not None:
        raise ConfigError(
            "the options 'endingTimestamp' and 'endingOffsetsByTimestamp' are "
            "for batch reads (spark.read) only"
        )
    isolation = opts.get("isolation", "read_uncommitted")
    if isolation not in ("read_uncommitted", "read_committed"):
        raise ConfigError(
            f"option 'isolation' must be 'read_uncommitted' or 'read_committed', got {isolation!r}"
        )
    max_records = _int_option(opts, "maxRecordsPerTrigger", None, 1)
    max_offsets = _int_option(opts, "maxOffsetsPerTrigger", None, 1)
    if max_records is not None and max_offsets is not None:
        raise ConfigError(
            "give at most one of 'maxOffsetsPerTrigger' (messages) and "
            "'maxRecordsPerTrigger' (RECORDs)"
        )
    min_records = _int_option(opts, "minRecordsPerTrigger", None, 1)
    min_offsets = _int_option(opts, "minOffsetsPerTrigger", None, 1)
    if min_records is not None and min_offsets is not None:
        raise ConfigError(
            "give at most one of 'minOffsetsPerTrigger' (messages) and "
            "'minRecordsPerTrigger' (RECORDs)"
        )
    if max_offsets is not None and isolation == "read_committed":
        raise ConfigError(
            "option 'maxOffsetsPerTrigger' is not supported with isolation=read_committed "
            "(its batches end at clean cuts, counted in RECORDs): use 'maxRecordsPerTrigger'"
        )
    return SourceOptions(
        towers=towers,
        topics=topics,
        pattern=pattern,
        assigned=assigned,
        starting=starting,  # type: ignore[arg-type]
        ending=ending,  # type: ignore[arg-type]
        starting_times=starting_times,
        ending_times=ending_times,
        max_records_per_trigger=max_records,
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        min_records_per_trigger=min_records,
        max_trigger_delay=_duration_option(opts, "maxTriggerDelay", 15 * 60.0),
        fail_on_data_loss=_bool_option(opts, "failOnDataLoss", True),
        isolation=isolation,  # type: ignore[arg-type]
        min_partitions=_int_option(opts, "minPartitions", None, 1),
        fetch_timeout=_float_option(opts, "fetchTimeout", 30.0),
        heads_refresh=_float_option(opts, "headsRefresh", 0.1),
        include_headers=_bool_option(opts, "includeHeaders", True),
        cluster_timeout=_float_option(opts, "clusterTimeout", 60.0),
        security=_security_options(opts),
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = _lower(options)
    _check_known(opts, _SINK_OPTIONS, "sink")
    towers = opts.get("towers", DEFAULT_TOWERS)
    check_towers(towers, "towers")
    topic = opts.get("topic")
    if topic is not None:
        _check_topic("topic", topic)
    name = opts.get("name")
    if name is not None:
        _check_topic("name", name)
    return SinkOptions(
        towers=towers,
        topic=topic,
        name=name,
        partitions=_int_option(opts, "partitions", 1, 1) or 1,
        cluster_timeout=_float_option(opts, "clusterTimeout", 60.0),
        security=_security_options(opts),
    )


# -- helpers ---------------------------------------------------------------------------------


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _check_known(opts: Mapping[str, str], known: set[str], what: str) -> None:
    unknown = sorted(set(opts) - known - _SPARK_OPTIONS)
    if unknown:
        kafka = [
            f"{name!r} is Spark's Kafka connector's; dafka's: {_KAFKA_NAMES[name]}"
            for name in unknown
            if name in _KAFKA_NAMES
        ]
        if any(name.startswith("kafka.") and name not in _KAFKA_NAMES for name in unknown):
            kafka.append("'kafka.*' options configure a Kafka client; dafka has none")
        raise ConfigError(
            f"unknown dafka {what} option(s) {', '.join(map(repr, unknown))}"
            + (f" ({'; '.join(kafka)})" if kafka else "")
            + f"; known: {', '.join(sorted(known - _SPARK_OPTIONS))}"
        )


def _assign_option(text: str) -> frozenset[tuple[str, str]]:
    """``assign``: JSON ``{"topic": ["partition", ...]}`` (Kafka's shape; dafka partitions
    are named, so the names are strings)."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not data:
        raise ConfigError(
            f'option \'assign\' must be JSON {{"topic": ["partition", ...]}}, got {text!r}'
        )
    out: set[tuple[str, str]] = set()
    for topic, parts in data.items():
        _check_topic("assign", topic)
        if not isinstance(parts, list) or not parts:
            raise ConfigError(f"option 'assign': {topic!r} must map to a list of partitions")
        for partition in parts:
            if not isinstance(partition, str):
                raise ConfigError(
                    f"option 'assign': partitions are named by strings (a producer's "
                    f'partition id such as "w1.0"), got {partition!r} in {topic!r}'
                )
            _check_topic("assign", partition)
            out.add((topic, partition))
    return frozenset(out)


def _security_options(opts: Mapping[str, str]) -> ClientSecurity:
    """``key``, ``authorizedKeys``, ``towerKey``, ``acl``: checked by loading them here, on
    the driver, so that a missing or bad file fails the query at once (the executors load
    them again)."""
    names = ("key", "authorizedKeys", "towerKey", "acl")
    security = KeyFiles.given(*(opts.get(name.lower()) for name in names))
    security.check(("option 'key'", "option 'authorizedKeys'", "option 'towerKey'", "option 'acl'"))
    try:
        Security.from_files(security)
    except ConfigError as exc:
        raise ConfigError(f"option 'key': {exc}") from None
    return security


def _check_topic(option: str, topic: str) -> None:
    raw = topic.encode("utf-8", "surrogateescape")
    if not 0 < len(raw) <= 255 or b"\x00" in raw:
        raise ConfigError(f"option '{option}': {topic!r} is not a valid name (1-255 bytes, no NUL)")


def _int_option(
    opts: Mapping[str, str], name: str, default: int | None, minimum: int
) -> int | None:
    text = opts.get(name.lower())
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"option '{name}' must be an integer, got {text!r}") from None
    if value < minimum:
        raise ConfigError(f"option '{name}' must be >= {minimum}, got {value}")
    return value


def _float_option(opts: Mapping[str, str], name: str, default: float) -> float:
    text = opts.get(name.lower())
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"option '{name}' must be a number of seconds, got {text!r}") from None
    if not value > 0:
        raise ConfigError(f"option '{name}' must be > 0, got {value}")
    return value


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def _duration_option(opts: Mapping[str, str], name: str, default: float) -> float:
    """Seconds, from Spark's time strings (``15m``, ``30s``, ``500ms``; a bare number is
    milliseconds, as Spark's ``timeStringAsMs``)."""
    text = opts.get(name.lower())
    if text is None:
        return default
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", text.lower())
    if found is None or found.group(2) not in (*_UNITS, ""):
        raise ConfigError(
            f"option '{name}' must be a duration such as '15m', '30s' or '500ms', got {text!r}"
        )
    value = float(found.group(1)) * _UNITS.get(found.group(2), 0.001)
    if not value > 0:
        raise ConfigError(f"option '{name}' must be > 0, got {text!r}")
    return value


def _bool_option(opts: Mapping[str, str], name: str, default: bool) -> bool:
    text = opts.get(name.lower())
    if text is None:
        return default
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise ConfigError(f"option '{name}' must be 'true' or 'false', got {text!r}")


def _times_option(opts: Mapping[str, str], offsets: str, timestamp: str) -> Times | None:
    """``<x>Timestamp`` (ms, every partition) or ``<x>OffsetsByTimestamp`` (JSON ``{"topic":
    {"partition": ms}}``): at most one of them and ``<x>Offsets`` (Kafka ranks them; here
    two that disagree are a mistake said at once)."""
    by = f"{offsets}ByTimestamp"
    given = [n for n in (offsets, timestamp, by) if n.lower() in opts]
    if len(given) > 1:
        raise ConfigError(f"give at most one of the options {', '.join(map(repr, given))}")
    if timestamp.lower() in opts:
        return _int_option(opts, timestamp, 0, 0)
    text = opts.get(by.lower())
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        raise ConfigError(
            f'option \'{by}\' must be JSON {{"topic": {{"partition": ms}}}}, got {text!r}'
        ) from None
    return parse_offsets(data, f"option '{by}'")


def _offsets_option(
    opts: Mapping[str, str], name: str, default: str, words: tuple[str, ...]
) -> str | Offsets:
    text = opts.get(name.lower(), default).strip()
    if text in words:
        return text
    try:
        data = json.loads(text)
    except ValueError:
        allowed = " or ".join(repr(w) for w in words)
        raise ConfigError(
            f"option '{name}' must be {allowed} or JSON "
            f'{{"topic": {{"partition": next_offset}}}}, got {text!r}'
        ) from None
    return parse_offsets(data, f"option '{name}'")


def parse_offsets(data: object, what: str) -> Offsets:
    """Check a JSON offsets document ``{topic: {partition: next_sequence}}``."""
    if not isinstance(data, dict):
        raise ConfigError(f"{what}: offsets must be a JSON object of topics")
    out: Offsets = {}
    for topic, parts in data.items():
        if not isinstance(topic, str) or not isinstance(parts, dict):
            raise ConfigError(f"{what}: {topic!r} must map to an object of partitions")
        row: dict[str, int] = {}
        for partition, offset in parts.items():
            if type(offset) is not int or offset < 0:
                raise ConfigError(
                    f"{what}: offset of {topic}/{partition} must be an integer >= 0, got {offset!r}"
                )
            row[str(partition)] = offset
        out[topic] = row
    return out


__all__ = [
    "PLAINTEXT",
    "ClientSecurity",
    "Isolation",
    "Offsets",
    "SinkOptions",
    "SourceOptions",
    "Times",
    "parse_offsets",
    "parse_sink_options",
    "parse_source_options",
    "towers_transport",
]
