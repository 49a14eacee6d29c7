"""Click options built from the settings table (``dafka.config``), and the transport they make.

Each option's type checks values with the setting's own parser, its help names the config
key and the environment variable, and its default is the table's: --help, the TOML file,
``DAFKA_*`` and ``dafka config`` cannot disagree.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import click

from dafka.config import SETTINGS, TOPIC, Setting
from dafka.errors import ConfigError
from dafka.storage import FsyncPolicy, RetentionPolicy, StorageConfig
from dafka.transport.config import TransportConfig
from dafka.transport.security import Security

F = TypeVar("F", bound=Callable[..., Any])


class SettingType(click.ParamType[Any]):
    """A click type that parses with a setting's parser (errors name the accepted values)."""

    envvar_list_splitter = ","

    def __init__(self, setting: Setting) -> None:
        self.setting = setting
        self.name = setting.key

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return self.setting.kind.parse(value)
        except ConfigError as exc:
            self.fail(f"{exc} (config key {self.setting.key})", param, ctx)

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return self.setting.key.rsplit("/", 1)[-1].upper()


class TopicType(click.ParamType[str]):
    """A topic name: 1-255 bytes of UTF-8, no NUL (the wire's rule)."""

    name = "topic"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return TOPIC.parse(value)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)


def setting_option(
    key: str, *short: str, param: str | None = None, help_extra: str = "", **extra: Any
) -> Callable[[F], F]:
    """``--flag`` (and ``short`` aliases) for setting ``key``."""
    s = SETTINGS[key]
    required = s.default is None
    default = None if required else (s.default,) if extra.get("multiple") else s.default
    return click.option(
        *short,
        s.flag,
        param or s.flag.removeprefix("--").replace("-", "_"),
        type=SettingType(s),
        default=default,
        required=required,
        show_default=not required and s.default != "",
        envvar=s.env,
        show_envvar=True,
        help=f"{s.help}{help_extra} [config: {s.key}]",
        **extra,
    )


def stack(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """One decorator of several options, in ``--help`` in the order given."""

    def apply(fn: F) -> F:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


node_options = stack(
    setting_option("towers", param="towers", multiple=True),
    setting_option("beacon/address", param="advertise"),
    setting_option("bind", param="bind_host"),
    setting_option("beacon/interval"),
)
"""``--tower``, ``--advertise``, ``--bind``, ``--beacon-interval``: joining a cluster
(with :func:`security_options`, its keys)."""


@dataclass(frozen=True, slots=True)
class SecurityOptions:
    """``--key``, ``--authorized-keys``, ``--tower-key``, ``--acl`` as given ("" when not)."""

    key: str = ""
    authorized_keys: str = ""
    tower_key: str = ""
    acl: str = ""

    def load(self) -> Security | None:
        """The node's :class:`Security` (None: plaintext); a bad file is a ConfigError."""
        if not self.key:
            if self.authorized_keys or self.tower_key or self.acl:
                raise ConfigError(
                    "--authorized-keys/--tower-key/--acl need --key (this node's secret "
                    "certificate)"
                )
            return None
        return Security.load(
            self.key, self.authorized_keys, self.tower_key or None, self.acl or None
        )

    def client_fields(self) -> dict[str, Any]:
        """The clients' settings fields (``key``, ``authorized_keys``, ``tower_key``)."""
        self.load()  # the same checks, before a client starts
        return {
            "key": self.key or None,
            "authorized_keys": self.authorized_keys or None,
            "tower_key": self.tower_key or None,
            "acl": self.acl or None,
        }


def security_options(fn: F) -> F:
    """``--key``, ``--authorized-keys``, ``--tower-key``, ``--acl``, given to the command as one
    ``security: SecurityOptions`` argument."""

    @functools.wraps(fn)
    def wrapper(
        *args: Any, key: str, authorized_keys: str, tower_key: str, acl: str, **kwargs: Any
    ) -> Any:
        security = SecurityOptions(key, authorized_keys, tower_key, acl)
        return fn(*args, security=security, **kwargs)

    return stack(
        setting_option("security/key", param="key"),
        setting_option("security/authorized_keys", param="authorized_keys"),
        setting_option("security/tower_key", param="tower_key"),
        setting_option("security/acl", param="acl"),
    )(cast(F, wrapper))


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
    security: SecurityOptions | None = None,
) -> TransportConfig:
    """The transport of a daemon or watcher joining the cluster of ``towers`` (the node
    options), built as every node's is (:meth:`TransportConfig.for_towers`)."""
    return TransportConfig.for_towers(
        _joined(towers),
        advertised_host=advertise,
        bind_host=bind_host,
        beacon_interval=beacon_interval,
        security=None if security is None else security.load(),
    )


def client_fields(
    towers: tuple[str, ...] | str,
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    security: SecurityOptions | None = None,
) -> dict[str, Any]:
    """The node options as the clients' settings fields (``Producer(**fields)``): the same
    towers, in the same grammar; the settings build the same transport."""
    return {
        "towers": _joined(towers),
        "advertised_host": advertise,
        "bind_host": bind_host,
        "beacon_interval": beacon_interval,
        **(security.client_fields() if security is not None else {}),
    }


def _joined(towers: tuple[str, ...] | str) -> str:
    return ",".join(towers) if isinstance(towers, tuple) else towers


__all__ = [
    "SecurityOptions",
    "SettingType",
    "TopicType",
    "client_fields",
    "json_option",
    "log_options",
    "metrics_options",
    "node_options",
    "security_options",
    "setting_option",
    "stack",
    "storage_config_of",
    "storage_options",
    "transport_config",
]
