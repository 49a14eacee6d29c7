"""dafka.node: the pure node state machines (see docs/nodes.md).

No sockets, no files, no clock: messages, timer ticks and driver events in, actions
(:mod:`dafka.node.actions`) out, drained once per batch with ``take_actions()``.
"""

from dafka.node._cluster import ClusterMachine, ClusterView, StoreView
from dafka.node._config import (
    AcksFrom,
    BackpressurePolicy,
    ConsumerConfig,
    DiscoveryConfig,
    FetchPolicy,
    OffsetReset,
    ProducerConfig,
    StoreConfig,
)
from dafka.node._consumer import ConsumerMachine, ConsumerStatistics, PartitionPosition
from dafka.node._discovery import Discovery, DiscoveryStatistics
from dafka.node._endpoint import endpoint_problem, host_problem, port_problem
from dafka.node._errors import BackpressureError, NodeArgumentError, check_name
from dafka.node._group import (
    GroupConfig,
    GroupEvent,
    GroupMember,
    GroupStatistics,
    assign,
    rendezvous,
)
from dafka.node._group_consumer import GroupConsumerMachine
from dafka.node._group_watch import GroupWatchMachine, SeenMember
from dafka.node._heads import ROUND_ASK_INTERVAL, HeadsMachine, HeadsStatistics
from dafka.node._latency import LATENCY_BUCKETS, LatencyHistogram, LatencySnapshot
from dafka.node._probe import ProbeKey, ProbeMachine
from dafka.node._producer import ProducerMachine, ProducerStatistics
from dafka.node._store import LogStarts, RecordReader, StoreMachine, StoreStatistics
from dafka.node.actions import (
    STORE_WRITER_PREFIXES,
    STORE_WRITER_SENDS,
    Action,
    AttributedMessages,
    Connect,
    Deliver,
    DirectRecordRuns,
    Disconnect,
    DurableNotices,
    HoleNotices,
    KeepRuns,
    NodeMachine,
    PeerNotices,
    Persist,
    Placement,
    RecordRuns,
    RunDirectRecords,
    RunRecords,
    Send,
    SendBeacon,
    SendDirectRecords,
    SendRecords,
    Subscribe,
    SubscriptionNotices,
    Unsubscribe,
)

__all__ = [
    "LATENCY_BUCKETS",
    "ROUND_ASK_INTERVAL",
    "STORE_WRITER_PREFIXES",
    "STORE_WRITER_SENDS",
    "AcksFrom",
    "Action",
    "AttributedMessages",
    "BackpressureError",
    "BackpressurePolicy",
    "ClusterMachine",
    "ClusterView",
    "Connect",
    "ConsumerConfig",
    "ConsumerMachine",
    "ConsumerStatistics",
    "Deliver",
    "DirectRecordRuns",
    "Disconnect",
    "Discovery",
    "DiscoveryConfig",
    "DiscoveryStatistics",
    "DurableNotices",
    "FetchPolicy",
    "GroupConfig",
    "GroupConsumerMachine",
    "GroupEvent",
    "GroupMember",
    "GroupStatistics",
    "GroupWatchMachine",
    "HeadsMachine",
    "HeadsStatistics",
    "HoleNotices",
    "KeepRuns",
    "LatencyHistogram",
    "LatencySnapshot",
    "LogStarts",
    "NodeArgumentError",
    "NodeMachine",
    "OffsetReset",
    "PartitionPosition",
    "PeerNotices",
    "Persist",
    "Placement",
    "ProbeKey",
    "ProbeMachine",
    "ProducerConfig",
    "ProducerMachine",
    "ProducerStatistics",
    "RecordReader",
    "RecordRuns",
    "RunDirectRecords",
    "RunRecords",
    "SeenMember",
    "Send",
    "SendBeacon",
    "SendDirectRecords",
    "SendRecords",
    "StoreConfig",
    "StoreMachine",
    "StoreStatistics",
    "StoreView",
    "Subscribe",
    "SubscriptionNotices",
    "Unsubscribe",
    "assign",
    "check_name",
    "endpoint_problem",
    "host_problem",
    "port_problem",
    "rendezvous",
]
