"""How ``dafka consume`` writes records: raw values, JSON lines, or a kcat-like template.

Pure functions from a :class:`Record` to bytes, so that they are tested without a cluster.

JSON lines carry ``topic, partition, offset, index, key, value, headers, timestamp``; a key,
value or header value that is valid UTF-8 is written as text, anything else as base64 with a
``*_encoding: "base64"`` field beside it (``key_encoding``, ``value_encoding``, or
``encoding`` in a header object), so that no byte is lost and text stays readable.

Templates (``-f``) follow kcat: ``%t`` topic, ``%p`` partition, ``%o`` offset, ``%i`` index in
its batch, ``%k`` key, ``%s`` value, ``%K``/``%S`` key/value length in bytes (-1 if no key),
``%T`` timestamp in ms (-1 if none), ``%h`` headers as ``name=value,...``, ``%%`` a percent;
``\\n``, ``\\t``, ``\\r``, ``\\0`` and ``\\\\`` escapes. Nothing is appended: end the template
with ``\\n`` for one record per line.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any

from dafka.errors import ConfigError
from dafka.records import Record

Formatter = Callable[[Record], bytes]

_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "0": b"\0", "\\": b"\\"}
_TOKEN = re.compile(r"%[tpoikKsSTh%]|%.?|\\.?|[^%\\]+", re.DOTALL)


def _text_or_b64(raw: bytes) -> tuple[str, bool]:
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode("ascii"), True


def json_line(record: Record) -> bytes:
    """One JSON object and a newline."""
    out: dict[str, Any] = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "index": record.index,
    }
    if record.key is None:
        out["key"] = None
    else:
        out["key"], b64 = _text_or_b64(record.key)
        if b64:
            out["key_encoding"] = "base64"
    out["value"], b64 = _text_or_b64(record.value)
    if b64:
        out["value_encoding"] = "base64"
    headers = []
    for name, raw in record.headers:
        text, b64 = _text_or_b64(raw)
        headers.append({"name": name, "value": text, **({"encoding": "base64"} if b64 else {})})
    out["headers"] = headers
    out["timestamp"] = record.timestamp
    return json.dumps(out, ensure_ascii=False).encode("utf-8", "surrogateescape") + b"\n"


def raw(delimiter: bytes) -> Formatter:
    """The value followed by ``delimiter``."""
    return lambda record: record.value + delimiter


def template(spec: str) -> Formatter:
    """A formatter for a kcat ``-f`` template; :class:`ConfigError` for an unknown ``%x``."""
    parts: list[Callable[[Record], bytes]] = []
    for token in _TOKEN.findall(spec):
        parts.append(_part(token))
    if not parts:
        raise ConfigError("the format is empty")

    def render(record: Record) -> bytes:
        return b"".join(part(record) for part in parts)

    return render


def _part(token: str) -> Callable[[Record], bytes]:
    fields: dict[str, Callable[[Record], bytes]] = {
        "%t": lambda r: r.topic.encode("utf-8", "surrogateescape"),
        "%p": lambda r: r.partition.encode("utf-8", "surrogateescape"),
        "%o": lambda r: b"%d" % r.offset,
        "%i": lambda r: b"%d" % r.index,
        "%k": lambda r: r.key or b"",
        "%K": lambda r: b"%d" % (len(r.key) if r.key is not None else -1),
        "%s": lambda r: r.value,
        "%S": lambda r: b"%d" % len(r.value),
        "%T": lambda r: b"%d" % (r.timestamp if r.timestamp is not None else -1),
        "%h": lambda r: b",".join(n.encode() + b"=" + v for n, v in r.headers),
        "%%": lambda _r: b"%",
    }
    if token in fields:
        return fields[token]
    if token.startswith("%"):
        raise ConfigError(
            f"unknown field {token!r} in the format (known: %t %p %o %i %k %K %s %S %T %h %%)"
        )
    if token.startswith("\\"):
        if token[1:] not in _ESCAPES:
            raise ConfigError(f"unknown escape {token!r} in the format")
        literal = _ESCAPES[token[1:]]
    else:
        literal = token.encode()
    return lambda _r: literal


def offsets(spec: str, topics: tuple[str, ...]) -> dict[tuple[str, str], int]:
    """``--offset`` JSON: ``{"topic": {"partition": offset}}``, or ``{"partition": offset}``
    when one topic is consumed; offsets are the next sequence to read (>= 0)."""
    try:
        table = json.loads(spec)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"--offset {spec!r}: expected earliest, latest or JSON ({exc.msg})"
        ) from None
    if not isinstance(table, dict):
        raise ConfigError("--offset JSON must be an object")
    if table and all(isinstance(v, int) for v in table.values()):
        if len(topics) != 1:
            raise ConfigError('--offset {"partition": N} needs one topic; use {"topic": {...}}')
        table = {topics[0]: table}
    out: dict[tuple[str, str], int] = {}
    for topic, partitions in table.items():
        if topic not in topics:
            raise ConfigError(f"--offset names topic {topic!r}, which is not consumed")
        if not isinstance(partitions, dict):
            raise ConfigError(f"--offset: {topic!r} must map partitions to offsets")
        for partition, offset in partitions.items():
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise ConfigError(
                    f"--offset: {topic}/{partition}: {offset!r} is not an offset >= 0"
                )
            out[(topic, partition)] = offset
    return out


__all__ = ["Formatter", "json_line", "offsets", "raw", "template"]
