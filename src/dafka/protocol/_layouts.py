"""The byte layout of each data command, shared by the encoder and the decoder.

Frame 0 of every data command is ``ID | prefix | 0x00 | 0x01 | string fields | integers``
(``../shared/PROTOCOL.md`` section 1): a layout names the message attribute that goes into the
inline ZeroMQ topic (*prefix*), the attributes written as 1-byte-length ``string`` fields, in
order, and the fixed-size integers at the end. Writing it down once keeps the two directions
from drifting apart; the hot paths are hand-written on top of it for speed.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from dafka.protocol._ids import (
    ACK_ID,
    CONSUMER_HELLO_ID,
    DIRECT_HEAD_ID,
    DIRECT_RECORD_ID,
    FETCH_ID,
    GET_HEADS_ID,
    HEAD_ID,
    HEADS_END_ID,
    LOG_START_ID,
    MEMBER_ID,
    RECORD_ID,
    STORE_HELLO_ID,
)
from dafka.protocol.messages import (
    Ack,
    ConsumerHello,
    DataMessage,
    DirectHead,
    DirectRecord,
    Fetch,
    GetHeads,
    Head,
    HeadsEnd,
    LogStart,
    MemberBeat,
    Record,
    StoreHello,
)

SEQUENCE = struct.Struct(">Q")
SEQUENCE_COUNT = struct.Struct(">QL")
SEQUENCE_EPOCH = struct.Struct(">QQQ")
"""A RECORD's or DIRECT-RECORD's sequence followed by its run trailer (epoch, run start)."""
EPOCH_TRAILER = 16
"""Bytes the run trailer adds to frame 0 (docs/protocol.md, "Run epochs")."""
FENCE_TRAILER = struct.Struct(">QL")
"""A fencing GET-HEADS' trailer: the resuming run's epoch and its partition count."""
UINT32 = struct.Struct(">L")
COUNT_STORES = struct.Struct(">LL")
NO_INTEGERS = struct.Struct("")

PREFIX_END = b"\x00\x01"
"""The topic terminator followed by the version byte: always together in frame 0."""


@dataclass(frozen=True, slots=True)
class Layout:
    """Where each attribute of one message class sits in frame 0."""

    name: str
    """The RFC's name of the command, for errors and logs."""
    command_id: bytes
    prefix: str
    """Attribute that is the inline ZeroMQ topic."""
    strings: tuple[str, ...]
    """Attributes written as ``string`` fields (1-byte length), in wire order."""
    integers: tuple[str, ...]
    """Attributes packed with ``tail`` after the strings."""
    tail: struct.Struct
    content: bool = False
    """Whether the message has frame 1 (RECORD and DIRECT-RECORD)."""


RECORD = Layout("RECORD", RECORD_ID, "topic", ("producer", "topic"), ("sequence",), SEQUENCE, True)
DIRECT_RECORD = Layout(
    "DIRECT-RECORD",
    DIRECT_RECORD_ID,
    "recipient",
    ("producer", "topic"),
    ("sequence",),
    SEQUENCE,
    True,
)
FETCH = Layout(
    "FETCH",
    FETCH_ID,
    "producer",
    ("requester", "topic"),
    ("sequence", "count"),
    SEQUENCE_COUNT,
)
ACK = Layout("ACK", ACK_ID, "producer", ("topic",), ("sequence",), SEQUENCE)
HEAD = Layout("HEAD", HEAD_ID, "topic", ("producer", "topic"), ("sequence",), SEQUENCE)
DIRECT_HEAD = Layout(
    "DIRECT-HEAD", DIRECT_HEAD_ID, "recipient", ("producer", "topic"), ("sequence",), SEQUENCE
)
GET_HEADS = Layout("GET-HEADS", GET_HEADS_ID, "topic", ("requester",), (), NO_INTEGERS)
CONSUMER_HELLO = Layout(
    "CONSUMER-HELLO", CONSUMER_HELLO_ID, "store", ("consumer",), (), NO_INTEGERS
)
"""Followed by ``topics`` as ``strings`` (4-byte count, then 4-byte-length strings)."""
STORE_HELLO = Layout("STORE-HELLO", STORE_HELLO_ID, "consumer", ("store",), (), NO_INTEGERS)
MEMBER = Layout("MEMBER", MEMBER_ID, "group", ("member",), ("sequence",), SEQUENCE, True)
"""Frame 1 is the member's state (canonical JSON, ``_member.py``), not a ``content``."""
HEADS_END = Layout(
    "HEADS-END",
    HEADS_END_ID,
    "recipient",
    ("topic", "store", "writer"),
    ("count", "stores"),
    COUNT_STORES,
)
LOG_START = Layout(
    "LOG-START",
    LOG_START_ID,
    "recipient",
    ("topic", "producer", "store"),
    ("sequence",),
    SEQUENCE,
)

LAYOUTS: Mapping[type[DataMessage], Layout] = MappingProxyType(
    {
        Record: RECORD,
        DirectRecord: DIRECT_RECORD,
        Fetch: FETCH,
        Ack: ACK,
        Head: HEAD,
        DirectHead: DIRECT_HEAD,
        GetHeads: GET_HEADS,
        ConsumerHello: CONSUMER_HELLO,
        StoreHello: STORE_HELLO,
        MemberBeat: MEMBER,
        HeadsEnd: HEADS_END,
        LogStart: LOG_START,
    }
)
"""The layout of each data message class."""

INTEGER_BITS = {
    "sequence": 64,
    "count": 32,
    "stores": 32,
    "epoch": 64,
    "run_start": 64,
    "partitions": 32,
}
"""Width of each integer attribute, for error messages."""

__all__ = [
    "ACK",
    "CONSUMER_HELLO",
    "COUNT_STORES",
    "DIRECT_HEAD",
    "DIRECT_RECORD",
    "EPOCH_TRAILER",
    "FENCE_TRAILER",
    "FETCH",
    "GET_HEADS",
    "HEAD",
    "HEADS_END",
    "INTEGER_BITS",
    "LAYOUTS",
    "LOG_START",
    "MEMBER",
    "NO_INTEGERS",
    "PREFIX_END",
    "RECORD",
    "SEQUENCE",
    "SEQUENCE_COUNT",
    "SEQUENCE_EPOCH",
    "STORE_HELLO",
    "UINT32",
    "Layout",
]
