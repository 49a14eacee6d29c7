"""SUB prefixes and XPUB subscription notices (``../shared/PROTOCOL.md`` section 2).

A data SUB subscribes to ``command ID + topic`` with no terminator, so ZeroMQ's prefix match
lets ``hello2`` through a subscription to ``hello``: receivers filter by exact subject after
decoding. The per-node sets below are the C reference's, so a C peer publishing to us and a C
peer reading from us see the subscriptions they expect.
"""

from __future__ import annotations

from dafka.protocol._errors import DecodeError, EncodeError
from dafka.protocol._frames import preview
from dafka.protocol._ids import (
    ACK_ID,
    COMMAND_IDS,
    COMMAND_NAMES,
    CONSUMER_HELLO_ID,
    DIRECT_HEAD_ID,
    DIRECT_RECORD_ID,
    FETCH_ID,
    GET_HEADS_ID,
    HEAD_ID,
    RECORD_ID,
    STORE_HELLO_ID,
)
from dafka.protocol._names import MAX_NAME, name, text
from dafka.protocol.messages import DataMessage

SUBSCRIBE = 1
UNSUBSCRIBE = 0


def _command_id(command: bytes | str | type[DataMessage]) -> bytes:
    if isinstance(command, type):
        try:
            return COMMAND_IDS[command]
        except KeyError:
            raise EncodeError(f"{command.__name__} is not a data command") from None
    raw = command.encode("ascii", "replace") if isinstance(command, str) else command
    if not isinstance(raw, bytes) or len(raw) != 1 or raw[0] not in COMMAND_NAMES:
        raise EncodeError(f"{command!r} is not a command ID")
    return raw


def subscription_prefix(command: bytes | str | type[DataMessage], topic: str = "") -> bytes:
    """The SUB prefix ``ID + topic``: ``subscription_prefix(Record, "hello") == b"Mhello"``.

    ``command`` is an ID (``b"M"`` or ``"M"``) or a message class; ``topic`` is whatever that
    command carries inline (a topic name or a node id), or ``""`` for every message of the
    command. Raises :class:`EncodeError` for an unknown command or a bad topic.
    """
    command_id = _command_id(command)
    if topic == "":
        return command_id
    return command_id + name(topic, "topic")


def parse_prefix(prefix: bytes) -> tuple[bytes, str]:
    """``(command ID, topic)`` of a subscription prefix; ``topic`` may be ``""``.

    Raises :class:`DecodeError` if the prefix does not start with a command ID or its topic
    could not be on the wire (longer than 255 bytes or containing a NUL).
    """
    if not isinstance(prefix, bytes):
        raise DecodeError(f"a prefix is bytes, not {type(prefix).__name__}", "SUBSCRIPTION")
    if not prefix or prefix[0] not in COMMAND_NAMES:
        raise DecodeError(
            f"prefix {preview(prefix)} does not start with a command ID", "SUBSCRIPTION"
        )
    topic = prefix[1:]
    if len(topic) > MAX_NAME or b"\0" in topic:
        raise DecodeError(f"prefix topic {preview(topic)} cannot be on the wire", "SUBSCRIPTION")
    return prefix[:1], text(topic)


def parse_subscription_notice(frame: bytes) -> tuple[bool, bytes]:
    """``(subscribed, prefix)`` of what an XPUB receives: ``0x01 + prefix`` or ``0x00 + prefix``.

    Raises :class:`DecodeError` for an empty frame or another first byte (ZeroMQ only sends
    these two, but a peer speaking another protocol could send anything).
    """
    if not isinstance(frame, bytes):
        raise DecodeError(f"a notice is bytes, not {type(frame).__name__}", "SUBSCRIPTION")
    if not frame:
        raise DecodeError("empty subscription notice", "SUBSCRIPTION")
    flag = frame[0]
    if flag not in (SUBSCRIBE, UNSUBSCRIBE):
        raise DecodeError(f"notice starts with 0x{flag:02x}, expected 0x01 or 0x00", "SUBSCRIPTION")
    return flag == SUBSCRIBE, frame[1:]


def subscription_notice(subscribed: bool, prefix: bytes) -> bytes:
    """The XPUB notice for ``prefix`` (what an XSUB sends upstream to (un)subscribe)."""
    if not isinstance(prefix, bytes):
        raise EncodeError(f"prefix must be bytes, got {type(prefix).__name__}")
    return (b"\x01" if subscribed else b"\x00") + prefix


def _own(command_id: bytes, node_id: str) -> bytes:
    return command_id + name(node_id, "node id")


def producer_subscriptions(producer_id: str) -> tuple[bytes, ...]:
    """ACKs and FETCHes addressed to the producer's partition."""
    return (_own(ACK_ID, producer_id), _own(FETCH_ID, producer_id))


def consumer_subscriptions(consumer_id: str) -> tuple[bytes, ...]:
    """DIRECT-RECORDs, DIRECT-HEADs and STORE-HELLOs addressed to the consumer."""
    return (
        _own(DIRECT_RECORD_ID, consumer_id),
        _own(DIRECT_HEAD_ID, consumer_id),
        _own(STORE_HELLO_ID, consumer_id),
    )


def consumer_topic_subscriptions(topic: str) -> tuple[bytes, ...]:
    """RECORDs and HEADs of one topic (added per topic the consumer reads)."""
    raw = name(topic, "topic")
    return (RECORD_ID + raw, HEAD_ID + raw)


def store_writer_subscriptions(writer_id: str) -> tuple[bytes, ...]:
    """Replies to the writer's FETCHes, and every RECORD and HEAD of every topic."""
    return (_own(DIRECT_RECORD_ID, writer_id), RECORD_ID, HEAD_ID)


def store_reader_subscriptions(reader_id: str) -> tuple[bytes, ...]:
    """Every FETCH and GET-HEADS, and CONSUMER-HELLOs addressed to the reader."""
    return (FETCH_ID, GET_HEADS_ID, _own(CONSUMER_HELLO_ID, reader_id))


def store_hello_subscriber(prefix: bytes) -> str | None:
    """The consumer id in a ``L`` + consumer id prefix, else ``None``.

    A store reader greets each consumer whose SUB it sees subscribe to STORE-HELLO; this
    picks those out of the subscription notices of its XPUB.
    """
    if len(prefix) > 1 and prefix[:1] == STORE_HELLO_ID:
        node = prefix[1:]
        if len(node) <= MAX_NAME and b"\0" not in node:
            return text(node)
    return None


__all__ = [
    "SUBSCRIBE",
    "UNSUBSCRIBE",
    "consumer_subscriptions",
    "consumer_topic_subscriptions",
    "parse_prefix",
    "parse_subscription_notice",
    "producer_subscriptions",
    "store_hello_subscriber",
    "store_reader_subscriptions",
    "store_writer_subscriptions",
    "subscription_notice",
    "subscription_prefix",
]
