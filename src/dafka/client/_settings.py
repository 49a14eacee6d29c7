"""One settings object per client: :class:`ProducerSettings` and :class:`ConsumerSettings`.

Every field is also a keyword argument of its client (``Producer("t", linger_ms=2)``). Names
follow Kafka where a Kafka concept fits (``linger_ms``, ``batch_size``, ``max_in_flight``,
``offset_reset``...) and the C reference where the concept is Dafka's (``head_interval``,
``beacon_interval``...). The node machines and the runner keep their own config classes
(``ProducerConfig``, ``ConsumerConfig``, ``TransportConfig``); the settings build them, so
that one object is the source of truth the user edits. A wrong value raises
:class:`ConfigError` naming the field.

Towers are given as the ``dafka`` commands take them (one grammar,
:func:`dafka.config.tower_endpoints`): ``"host:port"``, the tower's beacon-in port (its XSUB,
the C ``beacon/sub_address``) with its beacon-out XPUB at ``port + 1`` (as ``dafka up --port``
and ``dafka tower``'s defaults bind them), or ``"host:subport:pubport"`` for any pair,
comma-separated. The transport is built by :meth:`TransportConfig.for_towers`, as everywhere.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from dafka.config import check_towers
from dafka.errors import ConfigError
from dafka.node import ConsumerConfig, FetchPolicy, ProducerConfig
from dafka.protocol import MAX_MESSAGE_BYTES, message_limit_problem
from dafka.transport.config import TransportConfig
from dafka.transport.security import Security

DEFAULT_TOWERS = "127.0.0.1:5556"

Partitioner = Literal["modulo", "rendezvous"]
Backpressure = Literal["block", "error"]
AcksFrom = Literal["stores", "any"]
OffsetReset = Literal["earliest", "latest"]
IsolationLevel = Literal["read_uncommitted", "read_committed"]


def _require(field: str, ok: bool, value: object, what: str) -> None:
    if not ok:
        raise ConfigError(f"{field} must be {what}, got {value!r}")


def _int(field: str, value: object, minimum: int) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
    _require(field, ok, value, f"an int >= {minimum}")


def _number(field: str, value: object, *, allow_zero: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = ok and (value >= 0 if allow_zero else value > 0)  # type: ignore[operator]
    _require(field, ok, value, "a number >= 0" if allow_zero else "a number > 0")


def _choice(field: str, value: object, choices: tuple[str, ...]) -> None:
    _require(field, value in choices, value, " or ".join(repr(c) for c in choices))


@dataclass(frozen=True, slots=True)
class _CommonSettings:
    """Fields both clients share: where the towers are and how the node's transport runs."""

    towers: str = DEFAULT_TOWERS
    """Comma-separated towers: ``host:port`` (XSUB port; the XPUB is port + 1) or
    ``host:subport:pubport``."""
    beacon_interval: float = 1.0
    """``beacon/interval`` in seconds."""
    beacon_timeout: float | None = None
    """``beacon/timeout``: a peer not heard of for this long is disconnected (None: 4 beacon
    intervals)."""
    advertised_host: str = ""
    """``beacon/address``: the host peers connect to ("": the ``bind_host`` address; with
    ``"*"`` the address the tower sees)."""
    bind_host: str = ""
    """``bind``: the address the data sockets listen on (an IP or ``"*"``); "": the address
    this host reaches its tower from, 127.0.0.1 when the tower is on loopback (the one rule
    of every node, docs/deploy.md)."""
    high_watermark: int = 1_000_000
    """ZeroMQ high-water mark of the data sockets, in messages."""
    socket_linger_ms: int = 500
    """How long closing sockets wait to send what is queued (ZeroMQ LINGER)."""
    receive_batch: int = 1024
    """Messages the runner reads from one socket before running the machine's actions."""
    ready_timeout: float = 10.0
    """Seconds the client waits for its node thread to bind its sockets."""
    max_message_bytes: int = MAX_MESSAGE_BYTES
    """The largest RECORD content, the same on every node (``max_message_bytes`` in
    ``dafka config``): a producer refuses a message whose RECORD would be larger
    (:class:`MessageTooLargeError` at the call); a consumer skips a larger RECORD, and the
    drop notice a store keeps in place of one (counted: ``poll_statistics()``)."""
    key: str | Path | None = None
    """``security/key``: this client's secret certificate (``dafka keygen``); with it every
    socket is CURVE (docs/security.md). None: plaintext, as the C reference."""
    authorized_keys: str | Path | None = None
    """``security/authorized_keys``: directory of the public certificates allowed to connect
    to this client's sockets (needed with ``key``; re-read when it changes)."""
    tower_key: str | Path | None = None
    """``security/tower_key``: the towers' public certificate (None: ``tower.key`` in
    ``authorized_keys``, else this client's own key)."""
    acl: str | Path | None = None
    """``security/acl``: the permissions file (docs/security.md, "Permissions"): with it this
    client refuses what a peer's key may not send it, and a producer serves its records only
    to keys that may consume its topic (needs ``key``). None: no permissions."""

    def _check_common(self) -> None:
        check_towers(self.towers)
        _number("beacon_interval", self.beacon_interval)
        if self.beacon_timeout is not None:
            _number("beacon_timeout", self.beacon_timeout)
            if self.beacon_timeout <= self.beacon_interval:
                raise ConfigError(
                    f"beacon_timeout ({self.beacon_timeout}) must be larger than "
                    f"beacon_interval ({self.beacon_interval})"
                )
        _require(
            "advertised_host",
            isinstance(self.advertised_host, str),
            self.advertised_host,
            "a string",
        )
        _require("bind_host", isinstance(self.bind_host, str), self.bind_host, "a host or '*'")
        _int("high_watermark", self.high_watermark, 0)
        _int("socket_linger_ms", self.socket_linger_ms, -1)
        _int("receive_batch", self.receive_batch, 1)
        _number("ready_timeout", self.ready_timeout)
        problem = message_limit_problem(self.max_message_bytes)
        if problem is not None:
            raise ConfigError(f"max_message_bytes {problem}")
        for field in ("key", "authorized_keys", "tower_key", "acl"):
            value = getattr(self, field)
            _require(field, value is None or isinstance(value, str | Path), value, "a path")
        if self.key in (None, "") and self.authorized_keys not in (None, ""):
            raise ConfigError("authorized_keys needs key (this client's secret certificate)")
        if self.key in (None, "") and self.acl not in (None, ""):
            raise ConfigError("acl needs key (permissions name the peers' keys)")

    def transport(self) -> TransportConfig:
        """The runner's :class:`TransportConfig` for these settings."""
        return TransportConfig.for_towers(
            self.towers,
            beacon_interval=float(self.beacon_interval),
            beacon_timeout=None if self.beacon_timeout is None else float(self.beacon_timeout),
            advertised_host=self.advertised_host,
            bind_host=self.bind_host,
            high_watermark=self.high_watermark,
            linger_ms=self.socket_linger_ms,
            receive_batch=self.receive_batch,
            security=(
                None
                if self.key in (None, "")
                else Security.load(
                    self.key,
                    self.authorized_keys,
                    self.tower_key,
                    self.acl,
                )
            ),
        )


@dataclass(frozen=True, slots=True)
class ProducerSettings(_CommonSettings):
    """Settings of a :class:`Producer` (see docs/client.md)."""

    name: str | None = None
    """Stable name: the producer owns partitions ``f"{name}.{i}"`` and resumes them when
    restarted with the same name. None: a random id (nothing to resume)."""
    partitions: int = 1
    """How many partitions (producer identities) this producer owns."""
    partitioner: Partitioner = "modulo"
    """How a key picks its partition: FNV-1a ``"modulo"`` N or ``"rendezvous"``."""
    min_stores: int = 1
    """Distinct stores that must hold a RECORD before its messages count as delivered
    (Kafka ``acks`` counted in stores)."""
    acks_from: AcksFrom = "stores"
    """Whose ACKs count: ``"stores"``, only stores that introduced themselves to this
    producer (ours do); ``"any"``, every peer's (C stores never introduce their writer; a
    forged or stray ACK then marks messages stored). See docs/client.md."""
    batching: bool = True
    """Many messages per RECORD (the batch format); False: one message per RECORD,
    content = value (key, headers and timestamp are not carried), readable by C consumers."""
    linger_ms: float = 5.0
    """How long a partition's batch may wait for more messages before it is sent."""
    batch_size: int = 256 * 1024
    """A batch is sent once its messages reach this many bytes."""
    max_in_flight: int = 1_000_000
    """Messages sent or queued and not yet delivered, per producer; then ``backpressure``."""
    max_in_flight_bytes: int = 512 * 1024 * 1024
    """The same bound in bytes of value (+ key and headers)."""
    max_pending_commit_bytes: int = 64 * 1024 * 1024
    """``TransactionalProducer`` only: bytes of RECORDs held back behind pipelined commits
    (``commit_transaction_nowait``: the RECORDs a transaction sends wait in the producer
    until the ACKs before them are queued); then ``backpressure``. Not counted in
    ``max_in_flight_bytes`` (nothing held is sent yet)."""
    backpressure: Backpressure = "block"
    """What ``send`` does at the bound: ``"block"`` waits, ``"error"`` raises
    :class:`BackpressureError`."""
    delivery_timeout: float = 120.0
    """Seconds a message may wait for its stores before its future fails with
    :class:`DeliveryError` (Kafka ``delivery.timeout.ms``)."""
    head_interval: float = 1.0
    """``producer/head_interval``: seconds between HEADs announcing the last sequence."""
    resume_timeout: float = 5.0
    """Seconds a named producer waits at start for the stores to tell it its partitions'
    heads before it raises :class:`DeliveryError` (resuming needs at least one store). It
    waits ``max(0.5, 1.5 * beacon_interval)`` after the last new store greeted it, so that
    every store answers (a resume never goes backwards), and never less than twice that."""
    resume: bool = True
    """Whether a named producer asks the stores for its partitions' heads before it publishes
    (False: start at sequence 0, for a name known to be new)."""

    def __post_init__(self) -> None:
        self._check_common()
        if self.name is not None:
            _require(
                "name",
                isinstance(self.name, str) and bool(self.name.strip()),
                self.name,
                "a non-empty string or None",
            )
        _int("partitions", self.partitions, 1)
        _choice("partitioner", self.partitioner, ("modulo", "rendezvous"))
        _int("min_stores", self.min_stores, 1)
        _choice("acks_from", self.acks_from, ("stores", "any"))
        _require("batching", isinstance(self.batching, bool), self.batching, "True or False")
        _number("linger_ms", self.linger_ms, allow_zero=True)
        _int("batch_size", self.batch_size, 1)
        _int("max_in_flight", self.max_in_flight, 1)
        _int("max_in_flight_bytes", self.max_in_flight_bytes, 1)
        _int("max_pending_commit_bytes", self.max_pending_commit_bytes, 1)
        _choice("backpressure", self.backpressure, ("block", "error"))
        _number("delivery_timeout", self.delivery_timeout)
        _number("head_interval", self.head_interval)
        _number("resume_timeout", self.resume_timeout)
        _require("resume", isinstance(self.resume, bool), self.resume, "True or False")

    @classmethod
    def from_config(
        cls,
        config: str | Path | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        **fields: Any,
    ) -> ProducerSettings:
        """See :func:`settings_from_config`: ``ProducerSettings.from_config("dafka.toml")``."""
        return settings_from_config(cls, config, environ=environ, **fields)

    def producer_config(self) -> ProducerConfig:
        """The :class:`ProducerConfig` of each partition's machine (bounds are the client's:
        the machine's own are set so that they never bind before the client's do)."""
        return ProducerConfig(
            head_interval=float(self.head_interval),
            min_stores=self.min_stores,
            max_unacked_records=self.max_in_flight,
            max_unacked_bytes=self.max_in_flight_bytes + 64 * 1024 * 1024,
            backpressure=self.backpressure,
            acks_from=self.acks_from,
        )


@dataclass(frozen=True, slots=True)
class ConsumerSettings(_CommonSettings):
    """Settings of a :class:`Consumer` (see docs/client.md)."""

    offset_reset: OffsetReset = "latest"
    """``consumer/offset/reset``: where a partition with no start position begins."""
    isolation_level: IsolationLevel = "read_uncommitted"
    """``"read_committed"``: only committed messages, each once (issue 10, planned)."""
    fetch_window: int = 10_000
    """Records asked for per FETCH while catching up."""
    fetch_retry_initial: float = 0.5
    """Seconds a FETCH may go without progress before it is sent again (doubling)."""
    fetch_retry_max: float = 5.0
    """Upper bound of the FETCH retry wait."""
    heads_refresh: float | None = 10.0
    """Period of GET-HEADS for every subscribed topic (None: only at subscription)."""
    skip_unavailable_after: int | None = 10
    """FETCH retries answered only from beyond a gap before skipping it (None: never)."""
    max_queued: int = 200_000
    """Records received and not yet polled; beyond it the consumer stops reading."""
    latest_settle: float = 1.0
    """Seconds after subscribing during which a partition first heard of counts as existing
    at start (``latest`` reads it from its head on; later ones are read from their
    beginning). ``at_end()`` is False before it is over."""
    single_store_fetch: bool = True
    """Address each FETCH to one store (fallback to the others on timeout) instead of
    letting every store answer it (see docs/nodes.md)."""
    fail_on_data_loss: bool = True
    """What a poll does when it reaches records that are gone from every store (damage no
    store could repair, retention: ``skip_unavailable_after`` FETCH retries answered only
    from beyond them) and what :meth:`Consumer.read_to_end` does when records never arrive:
    True (the default, as Spark's ``failOnDataLoss``) raises :class:`DataLossError` naming
    them, after handing out what came before them; False skips them (counted in
    ``poll_statistics().records_lost``, logged as a warning)."""
    control_messages: bool = False
    """Hand out transaction control messages too: the ACKs (UUID flag ``ACK_TXN``) that
    commit or roll back a transaction. False (the default): never, in read_uncommitted too,
    as Kafka's consumers never see control records. A read-committed filter fed by this
    consumer needs them (``ReadCommittedConsumer``, ``replay_from_stores`` and the Spark
    source's read_committed path set it)."""

    group_id: str | None = None
    """``consumer/group``: the consumer group (Kafka's ``group.id``). With it the consumer
    commits its positions to the cluster (``commit``, auto-commit) and starts a partition
    at the group's committed offset; ``offset_reset`` applies only where nothing was
    committed (docs/groups.md)."""
    enable_auto_commit: bool = True
    """With ``group_id``: commit the positions of what earlier polls handed out, every
    ``auto_commit_interval_ms`` (checked at each poll) and at ``close`` (as Kafka)."""
    auto_commit_interval_ms: float = 5000.0
    """How often auto-commit commits, in milliseconds."""
    commit_timeout: float = 30.0
    """Seconds a synchronous ``commit`` waits for the stores (then :class:`CommitError`)
    and ``committed`` for their answers."""
    group_instance_id: str | None = None
    """Static membership (Kafka's ``group.instance.id``): a member restarted with the same
    id within ``session_timeout_ms`` gets the same partitions and moves nothing; closing
    says no goodbye (its partitions wait for it until the timeout)."""
    session_timeout_ms: float | None = None
    """A group member whose beats stop for this long is counted dead and its partitions
    move (None: 2 beacon intervals, 2,000 ms by default)."""
    heartbeat_interval_ms: float | None = None
    """How often a group member beats (None: a quarter of ``session_timeout_ms``); a new
    member also listens this long before taking partitions."""

    def __post_init__(self) -> None:
        self._check_common()
        _choice("offset_reset", self.offset_reset, ("earliest", "latest"))
        if self.group_id is not None:
            _require(
                "group_id",
                isinstance(self.group_id, str) and bool(self.group_id.strip()),
                self.group_id,
                "a non-empty string or None",
            )
        _require(
            "enable_auto_commit",
            isinstance(self.enable_auto_commit, bool),
            self.enable_auto_commit,
            "True or False",
        )
        _number("auto_commit_interval_ms", self.auto_commit_interval_ms)
        if self.group_instance_id is not None:
            _require(
                "group_instance_id",
                isinstance(self.group_instance_id, str) and bool(self.group_instance_id.strip()),
                self.group_instance_id,
                "a non-empty string or None",
            )
        if self.session_timeout_ms is not None:
            _number("session_timeout_ms", self.session_timeout_ms)
        if self.heartbeat_interval_ms is not None:
            _number("heartbeat_interval_ms", self.heartbeat_interval_ms)
        session, heartbeat = self.group_timing()
        if heartbeat >= session:
            default = ": 2 beacon intervals" if self.session_timeout_ms is None else ""
            raise ConfigError(
                f"heartbeat_interval_ms ({heartbeat * 1000:g}) must be below "
                f"session_timeout_ms ({session * 1000:g}{default})"
            )
        _number("commit_timeout", self.commit_timeout)
        _choice("isolation_level", self.isolation_level, ("read_uncommitted", "read_committed"))
        _int("fetch_window", self.fetch_window, 1)
        _number("fetch_retry_initial", self.fetch_retry_initial)
        _number("fetch_retry_max", self.fetch_retry_max)
        if self.fetch_retry_max < self.fetch_retry_initial:
            raise ConfigError("fetch_retry_max must be >= fetch_retry_initial")
        if self.heads_refresh is not None:
            _number("heads_refresh", self.heads_refresh)
        if self.skip_unavailable_after is not None:
            _int("skip_unavailable_after", self.skip_unavailable_after, 1)
        _int("max_queued", self.max_queued, 1)
        _number("latest_settle", self.latest_settle, allow_zero=True)
        _require(
            "single_store_fetch",
            isinstance(self.single_store_fetch, bool),
            self.single_store_fetch,
            "True or False",
        )
        _require(
            "fail_on_data_loss",
            isinstance(self.fail_on_data_loss, bool),
            self.fail_on_data_loss,
            "True or False",
        )

    @classmethod
    def from_config(
        cls,
        config: str | Path | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        **fields: Any,
    ) -> ConsumerSettings:
        """See :func:`settings_from_config`: ``ConsumerSettings.from_config("dafka.toml")``."""
        return settings_from_config(cls, config, environ=environ, **fields)

    def group_timing(self) -> tuple[float, float]:
        """(session timeout, heartbeat interval) of a group member, in seconds."""
        session = (
            2.0 * float(self.beacon_interval)
            if self.session_timeout_ms is None
            else float(self.session_timeout_ms) / 1000.0
        )
        heartbeat = (
            session / 4.0
            if self.heartbeat_interval_ms is None
            else float(self.heartbeat_interval_ms) / 1000.0
        )
        return session, heartbeat

    def consumer_config(self) -> ConsumerConfig:
        """The :class:`ConsumerConfig` of the consumer's machine."""
        return ConsumerConfig(
            offset_reset=self.offset_reset,
            fetch=FetchPolicy(
                window=self.fetch_window,
                retry_initial=float(self.fetch_retry_initial),
                retry_max=float(self.fetch_retry_max),
            ),
            heads_refresh=None if self.heads_refresh is None else float(self.heads_refresh),
            skip_unavailable_after=self.skip_unavailable_after,
            latest_settle=float(self.latest_settle),
            single_store_fetch=self.single_store_fetch,
        )


def common_fields(settings: ProducerSettings | ConsumerSettings) -> dict[str, Any]:
    """The fields every client shares (towers, transport, security), to build a helper
    client of the other kind with the same reach (a consumer's commit producer...)."""
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(_CommonSettings)}


S = TypeVar("S", ProducerSettings, ConsumerSettings)

_ROLE = {ProducerSettings: "producer", ConsumerSettings: "consumer"}


def _config_fields(
    cls: type[ProducerSettings | ConsumerSettings],
    config: str | Path | None,
    environ: Mapping[str, str] | None,
) -> dict[str, Any]:
    """The fields the file and ``DAFKA_*`` variables set for a ``cls`` client (values
    already checked by the key's own parser, errors naming the key and what it accepts)."""
    from dafka.config import CLIENT_FIELDS, load

    layers = load(config, os.environ if environ is None else environ)
    role = _ROLE[cls]
    out: dict[str, Any] = {}
    for key, value in layers.effective().items():
        if value.source == "default" or key not in CLIENT_FIELDS:
            continue
        field, roles = CLIENT_FIELDS[key]
        if role not in roles:
            continue
        if key == "producer/name" and not value.value:
            continue
        out[field] = value.value
    return out


def settings_from_config(
    cls: type[S],
    config: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    **fields: Any,
) -> S:
    """Settings as the ``dafka`` commands read them: defaults < the TOML file (``config``,
    else ``$DAFKA_CONFIG``) < ``DAFKA_*`` variables < ``fields``. Keys are the commands'
    (``dafka config`` lists them; ``dafka.config.CLIENT_FIELDS`` maps them to fields); a
    wrong key or value is a :class:`ConfigError` naming the key and what it accepts."""
    return resolve_settings(cls, cls(**_config_fields(cls, config, environ)), fields)


def resolve_settings(cls: type[S], settings: S | None, fields: dict[str, Any]) -> S:
    """``settings`` (or the defaults) with ``fields`` overriding; unknown names raise
    :class:`ConfigError` naming them. ``config_file=PATH`` among the fields starts from
    :func:`settings_from_config` (the file and the ``DAFKA_*`` variables) instead."""
    if "config_file" in fields:
        fields = dict(fields)
        path = fields.pop("config_file")
        if settings is not None:
            raise ConfigError("give settings= or config_file=, not both")
        settings = settings_from_config(cls, path)
    base = settings if settings is not None else cls()
    if not isinstance(base, cls):
        raise ConfigError(f"settings must be a {cls.__name__}, got {type(base).__name__}")
    if not fields:
        return base
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ConfigError(f"unknown {cls.__name__} field(s): {', '.join(unknown)}")
    return dataclasses.replace(base, **fields)


__all__ = [
    "DEFAULT_TOWERS",
    "ConsumerSettings",
    "ProducerSettings",
    "common_fields",
    "resolve_settings",
    "settings_from_config",
]
