"""The client API: producers, consumers, their records and settings (see docs/client.md).

Applications import from :mod:`dafka` (the front door); this package is where they live.
"""

from dafka.client._async_consumer import AsyncConsumer
from dafka.client._async_producer import AsyncProducer
from dafka.client._batch import BatchColumns, decode_batch, encode_batch, is_batch
from dafka.client._cluster import ClusterSnapshot, ClusterWatcher
from dafka.client._columns import RecordColumns
from dafka.client._consumer import Consumer, PollStatistics
from dafka.client._errors import CorruptBatchError, DeliveryError
from dafka.client._metrics import ConsumerMetrics, LatencySnapshot, ProducerMetrics
from dafka.client._partition_producer import PartitionProducer
from dafka.client._producer import Producer
from dafka.client._read_committed import ReadCommittedConsumer
from dafka.client._records import Record, RecordMetadata, plain_record
from dafka.client._settings import ConsumerSettings, ProducerSettings
from dafka.client._transactions import TransactionalProducer
from dafka.client._txn_log import ProducerFencedError, TransactionError

__all__ = [
    "AsyncConsumer",
    "AsyncProducer",
    "BatchColumns",
    "ClusterSnapshot",
    "ClusterWatcher",
    "Consumer",
    "ConsumerMetrics",
    "ConsumerSettings",
    "CorruptBatchError",
    "DeliveryError",
    "LatencySnapshot",
    "PartitionProducer",
    "PollStatistics",
    "Producer",
    "ProducerFencedError",
    "ProducerMetrics",
    "ProducerSettings",
    "ReadCommittedConsumer",
    "Record",
    "RecordColumns",
    "RecordMetadata",
    "TransactionError",
    "TransactionalProducer",
    "decode_batch",
    "encode_batch",
    "is_batch",
    "plain_record",
]
