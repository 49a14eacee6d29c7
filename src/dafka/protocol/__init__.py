"""The Dafka wire codec: ZeroMQ frames <-> typed messages. Pure: no zmq import.

Byte-exact with the C reference implementation as described in ``../shared/PROTOCOL.md``.
"""

from dafka.protocol.messages import (
    Ack,
    Beacon,
    ConsumerHello,
    DataMessage,
    DirectHead,
    DirectRecord,
    DiscoveryMessage,
    Fetch,
    GetHeads,
    Head,
    Message,
    PeerEndpoint,
    Record,
    StoreHello,
    Welcome,
)

__all__ = [
    "Ack",
    "Beacon",
    "ConsumerHello",
    "DataMessage",
    "DirectHead",
    "DirectRecord",
    "DiscoveryMessage",
    "Fetch",
    "GetHeads",
    "Head",
    "Message",
    "PeerEndpoint",
    "Record",
    "StoreHello",
    "Welcome",
]
