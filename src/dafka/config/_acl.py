"""Permissions: which keys may produce to and consume from which topics (``--acl FILE``).

An ACL file is TOML (docs/security.md, "Permissions")::

    stores = ["store-a", "store-b"]     # hold, replicate and serve every topic

    [[grant]]
    keys = ["alice"]                    # a certificate's name in --authorized-keys
    produce = ["orders", "logs.*"]      # (alice.key) or a Z85 public key
    consume = ["orders"]

A key is named by the name of its certificate in the authorized-keys directory (``alice``
or ``alice.key``) or by its 40-character Z85 public key. Topic patterns are shell globs
(``*``, ``?``, ``[...]``, :func:`fnmatch.fnmatchcase`). A key may do what any grant naming it
allows; a key no grant names may do nothing; a store key may do everything (stores fetch
from producers and from each other, and answer every consumer). This module is the rule
only (pure): the transport maps a connection's key to its names and applies it where the
data is (``dafka.transport.security``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from dafka.errors import ConfigError

_GRANT_KEYS = frozenset({"keys", "produce", "consume"})


def key_name(name: str) -> str:
    """The name an ACL matches for ``name``: a certificate's file name without ``.key`` (a
    40-character Z85 key is kept whole)."""
    return name if len(name) == 40 else name.removesuffix(".key")


@dataclass(frozen=True, slots=True)
class Grant:
    """What the keys named may do: topic patterns they may produce to and consume from."""

    keys: frozenset[str]
    produce: tuple[str, ...] = ()
    consume: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Acl:
    """The permissions of one ACL file (:meth:`load`, :meth:`parse`)."""

    stores: frozenset[str] = frozenset()
    grants: tuple[Grant, ...] = ()

    @classmethod
    def load(cls, path: str | Path) -> Acl:
        """Read and check an ACL file; any problem is a :class:`ConfigError` naming it."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"ACL {path}: cannot read it ({exc})") from exc
        return cls.parse(text, str(path))

    @classmethod
    def parse(cls, text: str, source: str = "ACL") -> Acl:
        try:
            table = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"ACL {source}: not TOML ({exc})") from exc
        unknown = set(table) - {"stores", "grant"}
        if unknown:
            raise ConfigError(
                f"ACL {source}: unknown key(s) {', '.join(sorted(unknown))} "
                "(expected stores and [[grant]] tables)"
            )
        stores = _names(table.get("stores", []), source, "stores")
        raw_grants = table.get("grant", [])
        if not isinstance(raw_grants, list) or not all(isinstance(g, dict) for g in raw_grants):
            raise ConfigError(f"ACL {source}: grant must be [[grant]] tables")
        grants = []
        for number, raw in enumerate(raw_grants, 1):
            where = f"grant {number}"
            extra = set(raw) - _GRANT_KEYS
            if extra:
                raise ConfigError(
                    f"ACL {source}: {where} has unknown key(s) {', '.join(sorted(extra))} "
                    "(expected keys, produce, consume)"
                )
            keys = _names(raw.get("keys"), source, f"{where} keys")
            if not keys:
                raise ConfigError(f"ACL {source}: {where} names no keys")
            grants.append(
                Grant(
                    keys,
                    _patterns(raw.get("produce", []), source, f"{where} produce"),
                    _patterns(raw.get("consume", []), source, f"{where} consume"),
                )
            )
        return cls(stores, tuple(grants))

    def is_store(self, names: Iterable[str]) -> bool:
        """Whether a key with these names (its Z85 key, its certificates' names) is a store."""
        return not self.stores.isdisjoint(names)

    def names_any(self, names: Iterable[str]) -> bool:
        """Whether a key with these names is named anywhere: a store, or in some grant (a
        tower forwards only such keys' beacons)."""
        named = frozenset(names)
        return not self.stores.isdisjoint(named) or any(
            not grant.keys.isdisjoint(named) for grant in self.grants
        )

    def may_produce(self, names: Iterable[str], topic: str) -> bool:
        return self._may(names, topic, produce=True)

    def may_consume(self, names: Iterable[str], topic: str) -> bool:
        return self._may(names, topic, produce=False)

    def _may(self, names: Iterable[str], topic: str, *, produce: bool) -> bool:
        named = frozenset(names)
        if not self.stores.isdisjoint(named):
            return True
        for grant in self.grants:
            if grant.keys.isdisjoint(named):
                continue
            patterns = grant.produce if produce else grant.consume
            if any(fnmatchcase(topic, pattern) for pattern in patterns):
                return True
        return False


def _names(value: Any, source: str, what: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"ACL {source}: {what} must be a list of key names (strings)")
    return frozenset(key_name(v) for v in value)


def _patterns(value: Any, source: str, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"ACL {source}: {what} must be a list of topic patterns (strings)")
    return tuple(value)


__all__ = ["Acl", "Grant", "key_name"]
