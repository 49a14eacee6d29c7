"""Where the effective settings come from: defaults < TOML file < DAFKA_* variables < flags.

The file is ``--config PATH`` or ``DAFKA_CONFIG``. Its tables nest along the key's path
(``[beacon] interval = 0.5`` is ``beacon/interval``; a quoted ``"beacon/interval" = 0.5`` is
the same). Every key and value of the file and of the ``DAFKA_*`` variables that name a key
is checked when loaded: an unknown key or a bad value is a :class:`ConfigError` naming the
key, where it came from and what is accepted. Flags are the command line's business
(``dafka.cli``); they win over both.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dafka.config._keys import SETTINGS, Setting
from dafka.errors import ConfigError

CONFIG_ENV = "DAFKA_CONFIG"


@dataclass(frozen=True, slots=True)
class Value:
    """An effective value and where it came from (``default``, ``file PATH``, ``env NAME``,
    ``flag --x``)."""

    value: Any
    source: str


@dataclass(frozen=True)
class Layers:
    """What the file and the environment set, checked, by key."""

    path: Path | None = None
    file: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)

    def effective(self) -> dict[str, Value]:
        """Every key's value without flags: env over file over default."""
        out: dict[str, Value] = {}
        for key, setting in SETTINGS.items():
            if key in self.env:
                out[key] = Value(self.env[key], f"env {setting.env}")
            elif key in self.file:
                out[key] = Value(self.file[key], f"file {self.path}")
            else:
                out[key] = Value(setting.default, "default")
        return out


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in table.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict):
            out.update(_flatten(value, key + "/"))
        else:
            out[key] = value
    return out


def unknown_key(key: str, where: str) -> ConfigError:
    close = difflib.get_close_matches(key, SETTINGS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    known = ", ".join(sorted(SETTINGS))
    return ConfigError(f"{where}: unknown key {key!r}{hint}; known keys: {known}")


def check(setting: Setting, value: Any, where: str) -> Any:
    """``value`` parsed for ``setting``, or a ConfigError naming the key and its origin."""
    try:
        return setting.kind.parse(value)
    except ConfigError as exc:
        raise ConfigError(
            f"{where}: {setting.key} = {value!r} is invalid: {exc} (accepted: "
            f"{setting.kind.accepted})"
        ) from None


def read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            table = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} not found") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {str(path)!r} is a directory") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}") from None
    values: dict[str, Any] = {}
    for key, value in _flatten(table).items():
        setting = SETTINGS.get(key)
        if setting is None:
            raise unknown_key(key, str(path))
        values[key] = check(setting, value, str(path))
    return values


def load(config: str | Path | None, environ: Mapping[str, str]) -> Layers:
    """The file (``config``, else ``$DAFKA_CONFIG``, else none) and the environment, checked."""
    if config is None and environ.get(CONFIG_ENV):
        config = environ[CONFIG_ENV]
    path = Path(config) if config else None
    file_values = read_file(path) if path is not None else {}
    env_values: dict[str, Any] = {}
    for key, setting in SETTINGS.items():
        raw = environ.get(setting.env)
        if raw is not None:
            env_values[key] = check(setting, raw, f"environment {setting.env}")
    return Layers(path, file_values, env_values)
