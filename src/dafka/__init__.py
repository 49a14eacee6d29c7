"""dafka: a decentralized, durable streaming platform over ZeroMQ.

The front door (docs/client.md): applications import from here only::

    from dafka import Producer, Consumer, LocalCluster

Layers (see docs/architecture.md): ``protocol`` (wire codec) -> ``node`` (pure state machines)
-> ``transport`` (the only zmq user) -> ``client`` / ``cli``. ``storage`` is the store's
segmented log and ``message`` is Gazette's exactly-once layer; both are pure of networking.
"""

from dafka.client import (
    Admin,
    AsyncConsumer,
    AsyncProducer,
    CommitError,
    CommitFailedError,
    Consumer,
    ConsumerRebalanceListener,
    ConsumerSettings,
    DeliveryError,
    FencedMemberError,
    NoStoreError,
    PartitionInfo,
    Producer,
    ProducerSettings,
    ReadCommittedConsumer,
    RunFencedError,
    TopicInfo,
    TransactionalProducer,
)
from dafka.errors import (
    ConfigError,
    DafkaError,
    DataLossError,
    MessageTooLargeError,
    NodeFailedError,
)
from dafka.node import BackpressureError, NodeArgumentError
from dafka.records import (
    CommittedOffset,
    CorruptBatchError,
    CorruptLogError,
    ProducerFencedError,
    Record,
    RecordColumns,
    RecordMetadata,
    TransactionError,
)
from dafka.server import ClusterError, LocalCluster
from dafka.transport.runner import NodeNotReadyError

__all__ = [
    "Admin",
    "AsyncConsumer",
    "AsyncProducer",
    "BackpressureError",
    "ClusterError",
    "CommitError",
    "CommitFailedError",
    "CommittedOffset",
    "ConfigError",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerSettings",
    "CorruptBatchError",
    "CorruptLogError",
    "DafkaError",
    "DataLossError",
    "DeliveryError",
    "FencedMemberError",
    "LocalCluster",
    "MessageTooLargeError",
    "NoStoreError",
    "NodeArgumentError",
    "NodeFailedError",
    "NodeNotReadyError",
    "PartitionInfo",
    "Producer",
    "ProducerFencedError",
    "ProducerSettings",
    "ReadCommittedConsumer",
    "Record",
    "RecordColumns",
    "RecordMetadata",
    "RunFencedError",
    "TopicInfo",
    "TransactionError",
    "TransactionalProducer",
    "__version__",
]
__version__ = "0.1.0"
