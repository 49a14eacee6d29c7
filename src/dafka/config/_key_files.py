"""A node's or client's security files as paths: the one value the commands, the clients'
settings, the Spark connector and the pipeline carry (docs/security.md).

Paths only, not loaded keys: a Spark task carries them to its executor and reads the files
there, a pipeline child gets them in its JSON config. ``dafka.transport.security.Security.
from_files`` loads them (every file checked, a :class:`ConfigError` naming the bad one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from dafka.errors import ConfigError


class KeyFields(TypedDict):
    """The clients' security settings fields (``Producer(**files.fields())``)."""

    key: str | None
    authorized_keys: str | None
    tower_key: str | None
    acl: str | None


@dataclass(frozen=True, slots=True)
class KeyFiles:
    """``key`` (a secret certificate), ``authorized_keys`` (a directory), ``tower_key`` (the
    towers' public certificate), ``acl`` (a permissions file): paths; None: not given (no
    ``key``: plaintext)."""

    key: str | None = None
    authorized_keys: str | None = None
    tower_key: str | None = None
    acl: str | None = None

    @classmethod
    def given(
        cls,
        key: object = None,
        authorized_keys: object = None,
        tower_key: object = None,
        acl: object = None,
    ) -> KeyFiles:
        """From values as options give them: "" or None is not given, a path becomes str."""

        def path(value: object) -> str | None:
            return None if value is None or str(value) == "" else str(value)

        return cls(path(key), path(authorized_keys), path(tower_key), path(acl))

    def check(
        self, names: tuple[str, str, str, str] = ("key", "authorized_keys", "tower_key", "acl")
    ) -> None:
        """The files' combination: the others need ``key`` (:class:`ConfigError`, naming
        them as ``names`` spell them: flags, settings or Spark options)."""
        if self.key is None:
            extra = [
                name
                for name, value in zip(
                    names[1:], (self.authorized_keys, self.tower_key, self.acl), strict=True
                )
                if value is not None
            ]
            if extra:
                raise ConfigError(
                    f"{'/'.join(extra)} need{'s' if len(extra) == 1 else ''} {names[0]} "
                    "(this node's secret certificate, dafka keygen)"
                )

    @property
    def secured(self) -> bool:
        return self.key is not None

    def fields(self) -> KeyFields:
        """The clients' settings fields (docs/security.md)."""
        return {
            "key": self.key,
            "authorized_keys": self.authorized_keys,
            "tower_key": self.tower_key,
            "acl": self.acl,
        }

    def spark_options(self) -> dict[str, str]:
        """The connector's options for the same files (docs/spark.md), those given."""
        named = {
            "key": self.key,
            "authorizedKeys": self.authorized_keys,
            "towerKey": self.tower_key,
            "acl": self.acl,
        }
        return {name: value for name, value in named.items() if value is not None}


PLAINTEXT = KeyFiles()
"""No files: plaintext, as the C reference (the default)."""

__all__ = ["PLAINTEXT", "KeyFields", "KeyFiles"]
