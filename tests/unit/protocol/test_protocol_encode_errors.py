"""Encode refuses what cannot go on the wire, with EncodeError naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from dafka.errors import DafkaError
from dafka.protocol import (
    Ack,
    Beacon,
    ConsumerHello,
    DirectHead,
    DirectRecord,
    EncodeError,
    Fetch,
    GetHeads,
    Head,
    PeerEndpoint,
    Record,
    StoreHello,
    decode,
    encode,
)

P = "0123456789ABCDEF0123456789ABCDEF"
TOO_LONG = "x" * 256
TOO_LONG_UTF8 = "é" * 128  # 256 bytes once encoded

VALID: dict[type, dict[str, Any]] = {
    Record: {"topic": "t", "producer": P, "sequence": 1, "content": b"c"},
    DirectRecord: {"recipient": "C", "topic": "t", "producer": P, "sequence": 1, "content": b""},
    Fetch: {"producer": P, "requester": "C", "topic": "t", "sequence": 1, "count": 10},
    Ack: {"producer": P, "topic": "t", "sequence": 1},
    Head: {"topic": "t", "producer": P, "sequence": 1},
    DirectHead: {"recipient": "C", "topic": "t", "producer": P, "sequence": 1},
    GetHeads: {"topic": "t", "requester": "C"},
    ConsumerHello: {"store": "S", "consumer": "C", "topics": ("t",)},
    StoreHello: {"consumer": "C", "store": "S"},
}
NAME_FIELDS = [
    (cls, field)
    for cls, fields in VALID.items()
    for field, value in fields.items()
    if isinstance(value, str)
]


def _with(cls: type, **changes: Any) -> Any:
    return cls(**{**VALID[cls], **changes})


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (TOO_LONG, "256 bytes long"),
        (TOO_LONG_UTF8, "256 bytes long"),
        ("", "must not be empty"),
        ("a\0b", "NUL"),
        ("\ud800", "not encodable"),
        (42, "must be a str"),
        (None, "must be a str"),
    ],
)
@pytest.mark.parametrize(("cls", "field"), NAME_FIELDS, ids=lambda x: getattr(x, "__name__", x))
def test_every_name_field_is_checked(cls: type, field: str, bad: object, reason: str) -> None:
    message = _with(cls, **{field: bad})
    with pytest.raises(EncodeError, match=reason) as info:
        encode(message)
    assert field in str(info.value)


def test_longest_name_and_non_utf8_bytes_are_fine() -> None:
    odd = b"\xff\x80abc".decode("utf-8", "surrogateescape")
    message = Record("x" * 255, odd, 0, b"")
    assert decode(encode(message)) == message


@pytest.mark.parametrize(
    ("cls", "field", "bad", "reason"),
    [
        (Record, "sequence", -1, "outside uint64"),
        (Record, "sequence", 1 << 64, "outside uint64"),
        (DirectRecord, "sequence", -5, "outside uint64"),
        (Ack, "sequence", 1 << 64, "outside uint64"),
        (Head, "sequence", -1, "outside uint64"),
        (DirectHead, "sequence", 1 << 70, "outside uint64"),
        (Fetch, "sequence", -1, "outside uint64"),
        (Fetch, "count", -1, "outside uint32"),
        (Fetch, "count", 1 << 32, "outside uint32"),
        (Record, "sequence", "5", "must be an int"),
        (Ack, "sequence", 1.0, "must be an int"),
        (Fetch, "count", None, "must be an int"),
        (Record, "content", "text", "content must be bytes"),
        (DirectRecord, "content", bytearray(b"x"), "content must be bytes"),
        (Record, "content", None, "content must be bytes"),
    ],
)
def test_integers_and_content_are_checked(cls: type, field: str, bad: object, reason: str) -> None:
    with pytest.raises(EncodeError, match=reason):
        encode(_with(cls, **{field: bad}))


def test_largest_integers_are_fine() -> None:
    fetch = Fetch(P, "C", "t", (1 << 64) - 1, (1 << 32) - 1)
    assert decode(encode(fetch)) == fetch


def test_checks_still_apply_once_a_header_is_cached() -> None:
    encode(Record("cached", P, 1, b""))  # now the header of ("cached", P) is remembered
    with pytest.raises(EncodeError, match="outside uint64"):
        encode(Record("cached", P, -1, b""))
    with pytest.raises(EncodeError, match="content must be bytes"):
        encode(Record("cached", P, 1, "text"))  # type: ignore[arg-type]
    encode(Ack(P, "cached", 1))
    with pytest.raises(EncodeError, match="outside uint64"):
        encode(Ack(P, "cached", 1 << 64))
    encode(Fetch(P, "C", "cached", 1, 1))
    with pytest.raises(EncodeError, match="outside uint32"):
        encode(Fetch(P, "C", "cached", 1, -1))


@pytest.mark.parametrize(
    ("topics", "reason"),
    [
        (("ok", ""), "must not be empty"),
        (("ok", TOO_LONG), "256 bytes long"),
        (("a\0",), "NUL"),
        ((1,), "must be a str"),
        ("hello", "must be a tuple"),
        (None, "must be a tuple"),
    ],
)
def test_consumer_hello_topics_are_checked(topics: object, reason: str) -> None:
    with pytest.raises(EncodeError, match=reason):
        encode(ConsumerHello("S", "C", topics))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (Beacon(P, "", -1), "outside 0..65535"),
        (Beacon(P, "", 65536), "outside 0..65535"),
        (Beacon(P, "", "5556"), "port must be an int"),  # type: ignore[arg-type]
        (Beacon("", "", 5556), "node_id must not be empty"),
        (Beacon(TOO_LONG, "", 5556), "256 bytes"),
        (Beacon(P, "a\0b", 5556), "host .* NUL"),
        (PeerEndpoint(P, ""), "endpoint must not be empty"),
        (PeerEndpoint(P, "tcp://\0"), "NUL"),
        (PeerEndpoint("", "tcp://h:1"), "node_id must not be empty"),
    ],
)
def test_discovery_fields_are_checked(message: object, reason: str) -> None:
    with pytest.raises(EncodeError, match=reason):
        encode(message)  # type: ignore[arg-type]


@pytest.mark.parametrize("thing", [object(), b"M", None, ("M", "t")])
def test_non_messages_are_refused(thing: object) -> None:
    with pytest.raises(EncodeError, match="not a Dafka message"):
        encode(thing)  # type: ignore[arg-type]


def test_encode_error_is_a_dafka_error_and_a_value_error() -> None:
    with pytest.raises(EncodeError) as info:
        encode(Ack("", "t", 1))
    assert isinstance(info.value, DafkaError)
    assert isinstance(info.value, ValueError)
