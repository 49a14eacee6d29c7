"""The pipeline's keys (issue 19): one value carried by the run, its children's JSON configs
and its checks, turned into the clients' settings fields and the connector's options here.

The connector's own ``dafka.spark._options.ClientSecurity`` is the same three paths, but
dafka.spark imports pyspark, which only the job process may (the producers and checks run
without it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict


class KeyFields(TypedDict):
    """The clients' security settings fields (``Producer(**keys.fields())``)."""

    key: str | None
    authorized_keys: str | None
    tower_key: str | None


@dataclass(frozen=True, slots=True)
class Keys:
    """``key`` (a secret certificate), ``authorized_keys`` (a directory), ``tower_key``
    (the towers' public certificate): paths, as every client takes them; None: plaintext."""

    key: str | None = None
    authorized_keys: str | None = None
    tower_key: str | None = None

    def fields(self) -> KeyFields:
        """The clients' settings fields (docs/security.md)."""
        return {
            "key": self.key,
            "authorized_keys": self.authorized_keys,
            "tower_key": self.tower_key,
        }

    def spark_options(self) -> dict[str, str]:
        """The connector's options for the same keys (docs/spark.md), those given."""
        named = {
            "key": self.key,
            "authorizedKeys": self.authorized_keys,
            "towerKey": self.tower_key,
        }
        return {name: value for name, value in named.items() if value is not None}


PLAINTEXT = Keys()
"""No keys: every client and the local cluster in plaintext (the default)."""

__all__ = ["PLAINTEXT", "KeyFields", "Keys"]
