"""The message classes: immutable, hashable, equal by value, also when built by the decoder."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given

from dafka.protocol import (
    Ack,
    DataMessage,
    DirectRecord,
    Fetch,
    Head,
    Record,
    decode_data,
    encode,
)
from tests.unit.protocol.protocol_strategies import data_messages

P = "0123456789ABCDEF0123456789ABCDEF"


@given(data_messages)
def test_decoded_messages_are_ordinary_instances(message: DataMessage) -> None:
    decoded = decode_data(encode(message))
    assert decoded == message
    assert hash(decoded) == hash(message)
    assert repr(decoded) == repr(message)
    assert dataclasses.astuple(decoded) == dataclasses.astuple(message)
    assert dataclasses.replace(decoded) == message


@pytest.mark.parametrize(
    "message",
    [
        Record("t", P, 1, b"c"),
        DirectRecord("C", "t", P, 1, b"c"),
        Fetch(P, "C", "t", 1, 2),
        Ack(P, "t", 1),
        Head("t", P, 1),
    ],
    ids=lambda m: type(m).__name__,
)
def test_decoded_messages_are_frozen(message: DataMessage) -> None:
    decoded = decode_data(encode(message))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(decoded, "sequence", 2)  # noqa: B010
    with pytest.raises((AttributeError, TypeError)):
        setattr(decoded, "extra", 1)  # noqa: B010


def test_equality_is_by_class_and_value() -> None:
    assert Ack(P, "t", 1) == Ack(P, "t", 1)
    assert Ack(P, "t", 1) != Ack(P, "t", 2)
    ack: object = Ack("t", P, 1)
    assert ack != Head("t", P, 1)  # same values, different command
    assert len({Ack(P, "t", 1), Ack(P, "t", 1), Head(P, "t", 1)}) == 2


def test_positional_construction_keeps_the_field_order() -> None:
    record = Record("hello", P, 5, b"x")
    assert (record.topic, record.producer, record.sequence, record.content) == (
        "hello",
        P,
        5,
        b"x",
    )
    assert decode_data(encode(record)) == record
