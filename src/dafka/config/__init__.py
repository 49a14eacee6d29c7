"""Configuration of the ``dafka`` commands: one table of settings, one loader.

* :data:`SETTINGS` - every setting (key as in the C reference where it has one, flag,
  environment variable, default, what it accepts);
* :func:`load` - the TOML file (``--config`` / ``DAFKA_CONFIG``) and ``DAFKA_*`` variables,
  checked, with :meth:`Layers.effective` telling where each value came from.

* :func:`listen_addresses` - where a node listens and what it advertises (the one rule;
  docs/deploy.md).

Precedence: default < file < environment < flag. See docs/cli.md.
"""

from dafka.config._acl import Acl, Grant, key_name
from dafka.config._key_files import PLAINTEXT, KeyFields, KeyFiles
from dafka.config._keys import CLIENT_FIELDS, SETTINGS, Setting
from dafka.config._listen import (
    Listen,
    check_listen,
    every_interface,
    is_loopback,
    listen_addresses,
    route_address,
)
from dafka.config._loader import CONFIG_ENV, Layers, Value, check, load, unknown_key
from dafka.config._values import TOPIC, Kind, check_towers, tower_endpoints, tower_spec

__all__ = [
    "CLIENT_FIELDS",
    "CONFIG_ENV",
    "PLAINTEXT",
    "SETTINGS",
    "TOPIC",
    "Acl",
    "Grant",
    "KeyFields",
    "KeyFiles",
    "Kind",
    "Layers",
    "Listen",
    "Setting",
    "Value",
    "check",
    "check_listen",
    "check_towers",
    "every_interface",
    "is_loopback",
    "key_name",
    "listen_addresses",
    "load",
    "route_address",
    "tower_endpoints",
    "tower_spec",
    "unknown_key",
]
