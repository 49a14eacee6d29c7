"""Click options built from the settings table: what every command (``dafka.cli``) and the
pipeline's command (``dafka.pipeline``) take the same way.

Each option's type checks values with the setting's own parser, its help names the config
key and the environment variable, and its default is the table's: --help, the TOML file,
``DAFKA_*`` and ``dafka config`` cannot disagree.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import click

from dafka.config._key_files import KeyFiles
from dafka.config._keys import SETTINGS, Setting
from dafka.config._values import TOPIC
from dafka.errors import ConfigError

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


def security_options(fn: F) -> F:
    """``--key``, ``--authorized-keys``, ``--tower-key``, ``--acl``, given to the command as
    one ``security: KeyFiles`` argument (paths; ``Security.from_files`` loads them)."""

    @functools.wraps(fn)
    def wrapper(
        *args: Any, key: str, authorized_keys: str, tower_key: str, acl: str, **kwargs: Any
    ) -> Any:
        security = KeyFiles.given(key, authorized_keys, tower_key, acl)
        security.check(("--key", "--authorized-keys", "--tower-key", "--acl"))
        return fn(*args, security=security, **kwargs)

    return stack(
        setting_option("security/key", param="key"),
        setting_option("security/authorized_keys", param="authorized_keys"),
        setting_option("security/tower_key", param="tower_key"),
        setting_option("security/acl", param="acl"),
    )(cast(F, wrapper))


__all__ = ["F", "SettingType", "TopicType", "security_options", "setting_option", "stack"]
