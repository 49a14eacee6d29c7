"""The commands' groups of options, and the transport and client fields they make.

The options themselves are built from the settings table by ``dafka.config.options``
(``setting_option``, ``security_options``...), which the pipeline's command shares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from dafka.config import KeyFiles
from dafka.config.options import (
    F,
    SettingType,
    TopicType,
    security_options,
    setting_option,
    stack,
)
from dafka.storage import FsyncPolicy, RetentionPolicy, StorageConfig
from dafka.transport.config import TransportConfig
from dafka.transport.security import Security

node_options = stack(
    setting_option("towers", param="towers", multiple=True),
    setting_option("beacon/address", param="advertise"),
    setting_option("bind", param="bind_host"),
    setting_option("beacon/interval"),
)
"""``--tower``, ``--advertise``, ``--bind``, ``--beacon-interval``: joining a cluster
(with :func:`security_options`, its keys)."""


storage_options = stack(
    setting_option("store/segment_bytes"),
    setting_option("store/retention/bytes"),
    setting_option("store/retention/age"),
    setting_option("store/retention/check"),
    setting_option("store/scrub_rate"),
)
"""``--segment-bytes``, ``--retention-bytes``, ``--retention-age``, ``--retention-check``,
``--scrub-rate``: how a store's log is cut into segments, how much of it is kept, and how
fast it is checked in the background."""


def storage_config_of(
    fsync: str,
    segment_bytes: int,
    retention_bytes: int,
    retention_age: float,
    retention_check: float,
    scrub_rate: int = 1 << 20,
) -> StorageConfig:
    """A store's :class:`StorageConfig` from its options (0: no retention limit, no scrub)."""
    return StorageConfig(
        fsync=FsyncPolicy.parse(fsync),
        segment_bytes=segment_bytes,
        retention=RetentionPolicy(
            max_bytes=retention_bytes or None, max_age_s=retention_age or None
        ),
        retention_check_s=retention_check,
        scrub_bytes_per_s=scrub_rate,
    )


metrics_options = stack(setting_option("metrics/port"), setting_option("metrics/host"))
"""``--metrics-port``, ``--metrics-host``: where a process serves /metrics."""

log_options = stack(
    setting_option("log/format"),
    click.option("-v", "--verbose", is_flag=True, help="Debug logs."),
)
"""``--log-format``, ``-v``: a daemon's logs."""


def json_option(what: str) -> Callable[[F], F]:
    """``--json`` (``as_json``): print ``what`` as one JSON value."""
    return click.option("--json", "as_json", is_flag=True, help=f"One JSON {what}.")


def transport_config(
    towers: tuple[str, ...] | str,
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    security: KeyFiles | None = None,
) -> TransportConfig:
    """The transport of a daemon or watcher joining the cluster of ``towers`` (the node
    options), built as every node's is (:meth:`TransportConfig.for_towers`)."""
    return TransportConfig.for_towers(
        _joined(towers),
        advertised_host=advertise,
        bind_host=bind_host,
        beacon_interval=beacon_interval,
        security=None if security is None else Security.from_files(security),
    )


def client_fields(
    towers: tuple[str, ...] | str,
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    security: KeyFiles | None = None,
) -> dict[str, Any]:
    """The node options as the clients' settings fields (``Producer(**fields)``): the same
    towers, in the same grammar; the settings build the same transport."""
    return {
        "towers": _joined(towers),
        "advertised_host": advertise,
        "bind_host": bind_host,
        "beacon_interval": beacon_interval,
        **(security_fields(security) if security is not None else {}),
    }


def security_fields(security: KeyFiles) -> dict[str, Any]:
    """The clients' settings fields of ``security``, its files checked first (a bad one is a
    ConfigError before any client starts)."""
    Security.from_files(security)
    return dict(security.fields())


class Milliseconds(click.ParamType[float]):
    """A duration in milliseconds, from ``least`` to ``most``: what a Kafka setting named
    ``*.ms`` takes (``kafka`` names it). A value below ``least`` is most likely seconds:
    the error says what to give for that. Not a number, not finite, 0 or below: an error
    naming the option (a usage error, exit 2, no traceback)."""

    name = "ms"

    def __init__(self, least: float, most: float, kafka: str) -> None:
        self.least = least
        self.most = most
        self.kafka = kafka

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of milliseconds", param, ctx)
        if not self.least <= number <= self.most:  # NaN is neither
            if 0 < number < self.least:
                self.fail(
                    f"in milliseconds (as Kafka's {self.kafka}): {number:g} ms is below the "
                    f"least, {self.least:g} ms; for {number:g} s give {number * 1000:g}",
                    param,
                    ctx,
                )
            self.fail(
                f"{value} is not a number of milliseconds from {self.least:g} to {self.most:.0f}",
                param,
                ctx,
            )
        return number


def _joined(towers: tuple[str, ...] | str) -> str:
    return ",".join(towers) if isinstance(towers, tuple) else towers


__all__ = [
    "Milliseconds",
    "SettingType",
    "TopicType",
    "client_fields",
    "json_option",
    "log_options",
    "metrics_options",
    "node_options",
    "security_fields",
    "security_options",
    "setting_option",
    "stack",
    "storage_config_of",
    "storage_options",
    "transport_config",
]
