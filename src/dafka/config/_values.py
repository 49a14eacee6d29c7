"""Value parsers of the settings: one function per kind, each says what it accepts.

A parser takes what a user typed (a string from a flag or an environment variable) or what
a TOML file holds (already an int, float, bool or list) and returns the typed value, or
raises :class:`ConfigError` whose message says which values are accepted. The caller adds
which key (and which file or variable) the value came from.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dafka.errors import ConfigError
from dafka.storage import FsyncPolicy

Parser = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Kind:
    """How one setting's values are read: the parser and, for --help and errors, what it
    accepts."""

    accepted: str
    parse: Parser


_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)
MAX_FSYNC_MS = 60_000.0
MAX_TOPIC_BYTES = 255


def _text(value: Any, accepted: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"expected {accepted}, got {value!r}")
    return value.strip()


def integer(minimum: int, maximum: int) -> Kind:
    accepted = f"an integer from {minimum} to {maximum}"

    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ConfigError(f"expected {accepted}, got {value!r}")
        try:
            number = int(value) if isinstance(value, int) else int(str(value).strip())
        except ValueError:
            raise ConfigError(f"expected {accepted}, got {value!r}") from None
        if not minimum <= number <= maximum:
            raise ConfigError(f"expected {accepted}, got {number}")
        return number

    return Kind(accepted, parse)


def number(minimum: float, maximum: float, *, inclusive_min: bool = False) -> Kind:
    low = "from" if inclusive_min else "above"
    accepted = f"a number {low} {minimum:g} up to {maximum:g}"

    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ConfigError(f"expected {accepted}, got {value!r}")
        try:
            result = float(value) if isinstance(value, int | float) else float(str(value))
        except ValueError:
            raise ConfigError(f"expected {accepted}, got {value!r}") from None
        above = result >= minimum if inclusive_min else result > minimum
        if not (math.isfinite(result) and above and result <= maximum):
            raise ConfigError(f"expected {accepted}, got {value!r}")
        return result

    return Kind(accepted, parse)


_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"(\d+)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)


def size(minimum: int, maximum: int, *, zero: str | None = None) -> Kind:
    """Bytes: an integer, optionally with K, M, G or T (powers of 1024: ``64M``, ``1GiB``);
    ``zero`` (when given) says what 0 means, and 0 is then accepted below ``minimum``."""
    accepted = f"a size in bytes from {minimum} to {maximum} (K, M, G, T: powers of 1024)"
    if zero:
        accepted += f", or 0 ({zero})"

    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ConfigError(f"expected {accepted}, got {value!r}")
        if isinstance(value, int):
            number = value
        else:
            match = _SIZE.fullmatch(str(value).strip())
            if match is None:
                raise ConfigError(f"expected {accepted}, got {value!r}")
            number = int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
        if not (minimum <= number <= maximum or (zero and number == 0)):
            raise ConfigError(f"expected {accepted}, got {value!r}")
        return number

    return Kind(accepted, parse)


_DURATION_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)", re.IGNORECASE)


def duration(maximum: float, *, zero: str) -> Kind:
    """Seconds: a number, optionally with s, m, h or d (``90``, ``15m``, ``7d``); 0 means
    ``zero``."""
    accepted = f"seconds, or a number with s, m, h or d, up to {maximum:g} s; 0: {zero}"

    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ConfigError(f"expected {accepted}, got {value!r}")
        if isinstance(value, int | float):
            seconds = float(value)
        else:
            match = _DURATION.fullmatch(str(value).strip())
            if match is None:
                raise ConfigError(f"expected {accepted}, got {value!r}")
            seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2).lower()]
        if not (math.isfinite(seconds) and 0 <= seconds <= maximum):
            raise ConfigError(f"expected {accepted}, got {value!r}")
        return seconds

    return Kind(accepted, parse)


def choice(*choices: str) -> Kind:
    accepted = "one of " + ", ".join(choices)

    def parse(value: Any) -> str:
        text = _text(value, accepted).lower()
        if text not in choices:
            raise ConfigError(f"expected {accepted}, got {value!r}")
        return text

    return Kind(accepted, parse)


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"expected true or false, got {value!r}")


BOOLEAN = Kind("true or false", _boolean)


def _host(value: Any) -> str:
    """A host peers can connect to: an IP address or a DNS name (no '*', no spaces)."""
    accepted = "an IP address or a host name"
    text = _text(value, accepted)
    if text == "":
        return text
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        if not _HOSTNAME.match(text):
            raise ConfigError(f"expected {accepted}, got {value!r}") from None
    return text


HOST = Kind("an IP address or a host name", _host)


def _bind_address(value: Any) -> str:
    """An interface to bind: an IP address, ``*`` (every interface) or ``localhost``."""
    accepted = "an IP address, * (every interface) or localhost"
    text = _text(value, accepted)
    if text in ("*", "localhost"):
        return text
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        raise ConfigError(f"expected {accepted}, got {value!r}") from None
    return text


BIND_ADDRESS = Kind("an IP address, * or localhost", _bind_address)


def _listen_address(value: Any) -> str:
    """A node's ``bind``: as :data:`BIND_ADDRESS`, or "" for the default of the listening
    rule (``dafka.config.listen_addresses``: where this host reaches its tower)."""
    if isinstance(value, str) and value.strip() == "":
        return ""
    return _bind_address(value)


LISTEN_ADDRESS = Kind("an IP address, * or localhost", _listen_address)


def _decimal(text: str) -> bool:
    """A port as typed: ASCII digits, few enough for ``int`` (``str.isdigit`` also takes
    "²", on which ``int`` raises: a traceback instead of the grammar's error)."""
    return 0 < len(text) <= 20 and text.isascii() and text.isdigit()


def tower_endpoints(value: Any) -> tuple[tuple[str, str], ...]:
    """The one grammar of towers, for every command, client, daemon and Spark option:
    ``host:port`` (XPUB at port+1) or ``host:subport:pubport``, an optional ``tcp://``,
    IPv6 hosts in brackets (``[::1]:5556``), several joined with ``,`` (or a TOML list):
    the (XSUB, XPUB) endpoints of each tower. Errors quote the item as typed."""
    accepted = "host:port or host:subport:pubport, several joined with commas"
    items: list[str] = []
    for part in value if isinstance(value, list | tuple) else [value]:
        items.extend(s.strip() for s in _text(part, accepted).split(",") if s.strip())
    out: list[tuple[str, str]] = []
    for item in items:
        spec = item.removeprefix("tcp://")
        parts = spec.rsplit(":", 2) if spec.count(":") >= 2 and "]" not in spec else None
        if parts is not None and len(parts) == 3:
            name, sub_text, pub_text = parts
        else:
            name, _, sub_text = spec.rpartition(":")
            pub_text = str(int(sub_text) + 1) if _decimal(sub_text) else ""
        if not name or not _decimal(sub_text) or not _decimal(pub_text):
            raise ConfigError(f"expected {accepted}, got {item!r}")
        sub_port, pub_port = int(sub_text), int(pub_text)
        if not (0 < sub_port < 65536 and 0 < pub_port < 65536):
            raise ConfigError(
                f"port out of range in {item!r} (1-65535; host:port takes PORT+1 too)"
            )
        _host(name)
        out.append((f"tcp://{name}:{sub_port}", f"tcp://{name}:{pub_port}"))
    if not out:
        raise ConfigError(f"expected {accepted}, got {value!r}")
    return tuple(out)


def check_towers(towers: object, field: str = "towers") -> str:
    """``towers`` as a client setting or option holds them (one string), checked by
    :func:`tower_endpoints`; a bad value is a :class:`ConfigError` naming ``field``."""
    if not isinstance(towers, str):
        raise ConfigError(f"{field} must be a string 'host:port,...', got {towers!r}")
    try:
        tower_endpoints(towers)
    except ConfigError as exc:
        raise ConfigError(f"{field}: {exc}") from None
    return towers


def tower_spec(sub: str, pub: str) -> str:
    """A tower's endpoints as :func:`tower_endpoints` reads them back: ``host:port`` when
    the XPUB is at port+1, else ``host:subport:pubport``."""
    sub_port, pub_port = int(sub.rsplit(":", 1)[1]), int(pub.rsplit(":", 1)[1])
    text = sub.removeprefix("tcp://")
    return text if pub_port == sub_port + 1 else f"{text}:{pub_port}"


def _towers(value: Any) -> str:
    """The towers, checked, as one canonical comma-separated string (what --tower and
    DAFKA_TOWERS hold); :func:`tower_endpoints` turns it into endpoints."""
    return ",".join(tower_spec(sub, pub) for sub, pub in tower_endpoints(value))


TOWERS = Kind("host:port or host:subport:pubport, comma-separated", _towers)


def _endpoint(value: Any) -> str:
    """A ZeroMQ TCP endpoint to bind: ``tcp://HOST:PORT`` (PORT may be ``*``)."""
    accepted = "tcp://HOST:PORT (HOST an IP address, * or localhost; PORT 1-65535 or *)"
    text = _text(value, accepted)
    match = re.fullmatch(r"tcp://(.+):(\*|\d+)", text)
    if match is None:
        raise ConfigError(f"expected {accepted}, got {value!r}")
    _bind_address(match.group(1))
    if match.group(2) != "*" and not 0 < int(match.group(2)) < 65536:
        raise ConfigError(f"expected {accepted}, got {value!r}")
    return text


ENDPOINT = Kind("tcp://HOST:PORT", _endpoint)


def _fsync(value: Any) -> str:
    """An fsync policy (``batch``, ``records:N``, ``ms:T``, ``os``, joined with ``+``), with
    N from 1 to 10^9 and T from 0 to 60,000 ms; returned in its canonical form."""
    accepted = "batch, records:N (1-1e9), ms:T (0-60000), os, or several joined with +"
    try:
        policy = FsyncPolicy.parse(_text(value, accepted))
    except ConfigError:
        raise ConfigError(f"expected {accepted}, got {value!r}") from None
    if policy.interval_ms is not None and not policy.interval_ms <= MAX_FSYNC_MS:
        raise ConfigError(f"expected {accepted}, got {value!r}")
    if policy.every_records is not None and policy.every_records > 1_000_000_000:
        raise ConfigError(f"expected {accepted}, got {value!r}")
    return str(policy)


FSYNC = Kind("batch, records:N, ms:T, os, joined with +", _fsync)


def _topic(value: Any) -> str:
    """A topic name: 1-255 bytes of UTF-8, no NUL (the wire's rule)."""
    accepted = "a topic name of 1 to 255 bytes without NUL"
    text = value if isinstance(value, str) else _text(value, accepted)
    raw = text.encode("utf-8", "surrogateescape")
    if not 0 < len(raw) <= MAX_TOPIC_BYTES or b"\0" in raw:
        raise ConfigError(f"expected {accepted}, got {len(raw)} bytes")
    return text


TOPIC = Kind("1 to 255 bytes, no NUL", _topic)


def _directory(value: Any) -> Path:
    """A directory path: it may not exist yet (it is created), but it may not be a file."""
    accepted = "a directory path (created if missing)"
    path = Path(_text(value, accepted)) if not isinstance(value, Path) else value
    if str(path) == "":
        raise ConfigError(f"expected {accepted}, got an empty path")
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{str(path)!r} exists and is not a directory")
    return path


DIRECTORY = Kind("a directory path", _directory)


def _optional_text(value: Any) -> str:
    return _text(value, "a string")


OPTIONAL_TEXT = Kind("a string", _optional_text)
