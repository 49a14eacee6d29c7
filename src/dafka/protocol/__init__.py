"""The Dafka wire codec: ZeroMQ frames <-> typed messages. Pure: no zmq import.

Byte-exact with the C reference implementation as described in ``../shared/PROTOCOL.md``::

    frames = encode(Record("hello", producer_id, 5, b"CONTENT"))   # [frame 0, content]
    message = decode_data(frames)                                  # Record(...)

* :func:`encode` - any message to its frames; :class:`EncodeError` if a field cannot go on
  the wire (a name longer than 255 bytes, an empty node id, a sequence outside uint64...).
* :func:`decode_data` (data sockets), :func:`decode_discovery` (beacon sockets) and
  :func:`decode` (either) - frames to a message; :class:`DecodeError`, and nothing else, for
  bad input.
* :func:`new_node_id` - a fresh node id as the C reference makes them.
* :data:`MAX_MESSAGE_BYTES` - the default (and largest) ``max_message_bytes``, the limit on
  a RECORD's content every node applies (``_limits``).
* Subscription prefixes per node and XPUB notices: :func:`subscription_prefix`,
  :func:`producer_subscriptions`..., :func:`parse_subscription_notice`.
"""

from dafka.protocol._construct import constructor
from dafka.protocol._decode import decode, decode_data
from dafka.protocol._discovery import decode_discovery
from dafka.protocol._encode import encode
from dafka.protocol._errors import DecodeError, EncodeError
from dafka.protocol._ids import (
    ACK_ID,
    BEACON_ID,
    COMMAND_IDS,
    COMMAND_NAMES,
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
    VERSION,
    WELCOME_ID,
)
from dafka.protocol._layouts import LAYOUTS, Layout
from dafka.protocol._limits import MAX_MESSAGE_BYTES, MIN_MESSAGE_BYTES, message_limit_problem
from dafka.protocol._names import MAX_NAME, name_problem
from dafka.protocol._node_ids import new_node_id
from dafka.protocol._subscriptions import (
    consumer_subscriptions,
    consumer_topic_subscriptions,
    parse_prefix,
    parse_subscription_notice,
    producer_subscriptions,
    store_hello_subscriber,
    store_reader_subscriptions,
    store_writer_subscriptions,
    subscription_notice,
    subscription_prefix,
)
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
    HeadsEnd,
    LogStart,
    MemberBeat,
    Message,
    PeerEndpoint,
    Record,
    StoreHello,
    Welcome,
)

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
    "LAYOUTS",
    "LOG_START_ID",
    "MAX_MESSAGE_BYTES",
    "MAX_NAME",
    "MEMBER_ID",
    "MIN_MESSAGE_BYTES",
    "RECORD_ID",
    "STORE_HELLO_ID",
    "VERSION",
    "WELCOME_ID",
    "Ack",
    "Beacon",
    "ConsumerHello",
    "DataMessage",
    "DecodeError",
    "DirectHead",
    "DirectRecord",
    "DiscoveryMessage",
    "EncodeError",
    "Fetch",
    "GetHeads",
    "Head",
    "HeadsEnd",
    "Layout",
    "LogStart",
    "MemberBeat",
    "Message",
    "PeerEndpoint",
    "Record",
    "StoreHello",
    "Welcome",
    "constructor",
    "consumer_subscriptions",
    "consumer_topic_subscriptions",
    "decode",
    "decode_data",
    "decode_discovery",
    "encode",
    "message_limit_problem",
    "name_problem",
    "new_node_id",
    "parse_prefix",
    "parse_subscription_notice",
    "producer_subscriptions",
    "store_hello_subscriber",
    "store_reader_subscriptions",
    "store_writer_subscriptions",
    "subscription_notice",
    "subscription_prefix",
]
