"""Command IDs: the first byte of frame 0, which is what ZeroMQ SUB prefix matching sees.

The IDs are the C reference's (``../shared/PROTOCOL.md`` section 1); they are ``bytes`` of
length 1 so that a subscription prefix is just ``ID + topic``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

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

RECORD_ID = b"M"
DIRECT_RECORD_ID = b"D"
FETCH_ID = b"F"
ACK_ID = b"K"
HEAD_ID = b"H"
DIRECT_HEAD_ID = b"E"
GET_HEADS_ID = b"G"
CONSUMER_HELLO_ID = b"W"
STORE_HELLO_ID = b"L"
MEMBER_ID = b"Y"
"""MEMBER: dafka's own (consumer groups); no C node subscribes to it."""
HEADS_END_ID = b"A"
"""HEADS-END: dafka's own ("that is all" after a store's DIRECT-HEADs); no C node
subscribes to it."""
LOG_START_ID = b"S"
"""LOG-START: dafka's own (a FETCH below a store's first record); no C node subscribes to
it."""

BEACON_ID = b"B"
"""First frame of a node beacon and of a beacon forwarded by a tower (beacon sockets only)."""

WELCOME_ID = b"W"
"""The tower XPUB's welcome frame; it shares its byte with CONSUMER-HELLO, on other sockets."""

VERSION = 1
"""The only protocol version; a message with another version byte is dropped."""

COMMAND_IDS: Mapping[type[DataMessage], bytes] = MappingProxyType(
    {
        Record: RECORD_ID,
        DirectRecord: DIRECT_RECORD_ID,
        Fetch: FETCH_ID,
        Ack: ACK_ID,
        Head: HEAD_ID,
        DirectHead: DIRECT_HEAD_ID,
        GetHeads: GET_HEADS_ID,
        ConsumerHello: CONSUMER_HELLO_ID,
        StoreHello: STORE_HELLO_ID,
        MemberBeat: MEMBER_ID,
        HeadsEnd: HEADS_END_ID,
        LogStart: LOG_START_ID,
    }
)
"""The command ID of each data message class."""

COMMAND_NAMES: Mapping[int, str] = MappingProxyType(
    {
        RECORD_ID[0]: "RECORD",
        DIRECT_RECORD_ID[0]: "DIRECT-RECORD",
        FETCH_ID[0]: "FETCH",
        ACK_ID[0]: "ACK",
        HEAD_ID[0]: "HEAD",
        DIRECT_HEAD_ID[0]: "DIRECT-HEAD",
        GET_HEADS_ID[0]: "GET-HEADS",
        CONSUMER_HELLO_ID[0]: "CONSUMER-HELLO",
        STORE_HELLO_ID[0]: "STORE-HELLO",
        MEMBER_ID[0]: "MEMBER",
        HEADS_END_ID[0]: "HEADS-END",
        LOG_START_ID[0]: "LOG-START",
    }
)
"""The RFC name of each command, by ID byte (as ``frame[0]`` gives it), for logs and errors."""

__all__ = [
    "ACK_ID",
    "BEACON_ID",
    "COMMAND_IDS",
    "COMMAND_NAMES",
    "CONSUMER_HELLO_ID",
    "DIRECT_HEAD_ID",
    "DIRECT_RECORD_ID",
    "FETCH_ID",
    "GET_HEADS_ID",
    "HEADS_END_ID",
    "HEAD_ID",
    "LOG_START_ID",
    "MEMBER_ID",
    "RECORD_ID",
    "STORE_HELLO_ID",
    "VERSION",
    "WELCOME_ID",
]
