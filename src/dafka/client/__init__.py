"""The client API: producers, consumers, their settings and watchers (see docs/client.md).

Applications import from :mod:`dafka` (the front door); this package is where the clients
live. What they hand out and read - records, batches, columns, the transaction log, the
committed-read filter - is the pure :mod:`dafka.records`.
"""

from dafka.client._admin import Admin, PartitionInfo, TopicInfo
from dafka.client._async_consumer import AsyncConsumer
from dafka.client._async_producer import AsyncProducer
from dafka.client._cluster import ClusterSnapshot, ClusterWatcher
from dafka.client._consumer import Consumer, PollStatistics
from dafka.client._errors import (
    DeliveryError,
    FencedMemberError,
    NoStoreError,
    RunFencedError,
)
from dafka.client._heads import HeadWatcher
from dafka.client._members import MemberWatcher
from dafka.client._membership import ConsumerRebalanceListener, RebalanceListener
from dafka.client._metrics import ConsumerMetrics, LatencySnapshot, ProducerMetrics
from dafka.client._offsets import CommitError, CommitFailedError, CommitReader, GroupOffsets
from dafka.client._partition_producer import PartitionProducer
from dafka.client._producer import Producer
from dafka.client._read_committed import ReadCommittedConsumer, replay_from_stores
from dafka.client._settings import ConsumerSettings, ProducerSettings
from dafka.client._timestamps import TimestampSearch
from dafka.client._transactions import TransactionalProducer
from dafka.client._txn_state import TransactionState

__all__ = [
    "Admin",
    "AsyncConsumer",
    "AsyncProducer",
    "ClusterSnapshot",
    "ClusterWatcher",
    "CommitError",
    "CommitFailedError",
    "CommitReader",
    "Consumer",
    "ConsumerMetrics",
    "ConsumerRebalanceListener",
    "ConsumerSettings",
    "DeliveryError",
    "FencedMemberError",
    "GroupOffsets",
    "HeadWatcher",
    "LatencySnapshot",
    "MemberWatcher",
    "NoStoreError",
    "PartitionInfo",
    "PartitionProducer",
    "PollStatistics",
    "Producer",
    "ProducerMetrics",
    "ProducerSettings",
    "ReadCommittedConsumer",
    "RebalanceListener",
    "RunFencedError",
    "TimestampSearch",
    "TopicInfo",
    "TransactionState",
    "TransactionalProducer",
    "replay_from_stores",
]
