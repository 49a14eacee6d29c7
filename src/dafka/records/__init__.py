"""dafka.records: what the bytes of a RECORD mean, and how committed records are read.

Pure, like ``protocol`` and ``message``: no sockets, no files, no threads. Everything here
imports only :mod:`dafka.errors`, :mod:`dafka.message` and itself, so the clients, the Spark
connector and the tools share one definition of each format:

* the batch format (many messages in one RECORD; layout at the top of ``_batch.py``) and the
  column views a consumer hands out (:class:`RecordColumns`);
* :class:`Record` / :class:`RecordMetadata`, what consumers deliver and producers resolve;
* the transaction log's records (``_txn_log.py``): EPOCH, INTENT, RECOVERED, and the fold a
  successor uses to resolve what its predecessors left;
* the commit records of consumer groups (``_offsets.py``) and the fold that reads a group's
  committed offsets from them;
* :class:`CommittedFilter`, the read-committed filter over a stream of records (the message
  layer's sequencer);
* their errors (:class:`CorruptBatchError`, :class:`TransactionError`...).

The Arrow form of the records is the public submodule :mod:`dafka.records.arrow`, imported
only by who asks for Arrow: pyarrow is an optional dependency (``dafka[arrow]``).
"""

from dafka.records._batch import (
    BATCH_OF_ONE,
    HEADER_OVERHEAD,
    HEADER_SIZE,
    MAGIC,
    MAX_TIMESTAMP,
    MESSAGE_OVERHEAD,
    NO_UUID,
    UUID_SIZE,
    BatchColumns,
    BatchLayout,
    check_batch,
    control_indexes,
    decode_batch,
    drop_notice,
    encode_batch,
    is_batch,
)
from dafka.records._columns import (
    ARROW_EXTRA,
    BatchSlice,
    CheckedBatch,
    Part,
    PlainRun,
    RecordColumns,
    RecordRun,
)
from dafka.records._committed import CHECKPOINT_VERSION, CommittedFilter, ReplayFunc
from dafka.records._deletes import DELETE_TOPIC, TopicDelete, decode_delete, encode_delete
from dafka.records._errors import (
    CorruptBatchError,
    CorruptLogError,
    DroppedRecordError,
    ProducerFencedError,
    TransactionError,
)
from dafka.records._offsets import (
    OFFSETS_TOPIC,
    CommitRecord,
    CommittedOffset,
    CorruptCommitError,
    TxnRef,
    commit_group,
    commit_partition,
    decode_commit,
    encode_commit,
    fenced_decisions,
    fold_commits,
    next_version,
    undecided_logs,
    visible_offsets,
)
from dafka.records._record import Record, RecordMetadata, plain_record
from dafka.records._txn_log import (
    TXN_TOPIC,
    EpochRecord,
    InstanceState,
    IntentRecord,
    LogRecord,
    Pin,
    RecoveredRecord,
    ack_uuid,
    decode_at,
    decode_record,
    encode_record,
    instance_state,
    is_shared_log,
    log_owner,
    log_partition,
    log_segments,
    obligations,
    segment_offset,
    shared_log_partition,
)

__all__ = [
    "ARROW_EXTRA",
    "BATCH_OF_ONE",
    "CHECKPOINT_VERSION",
    "DELETE_TOPIC",
    "HEADER_OVERHEAD",
    "HEADER_SIZE",
    "MAGIC",
    "MAX_TIMESTAMP",
    "MESSAGE_OVERHEAD",
    "NO_UUID",
    "OFFSETS_TOPIC",
    "TXN_TOPIC",
    "UUID_SIZE",
    "BatchColumns",
    "BatchLayout",
    "BatchSlice",
    "CheckedBatch",
    "CommitRecord",
    "CommittedFilter",
    "CommittedOffset",
    "CorruptBatchError",
    "CorruptCommitError",
    "CorruptLogError",
    "DroppedRecordError",
    "EpochRecord",
    "InstanceState",
    "IntentRecord",
    "LogRecord",
    "Part",
    "Pin",
    "PlainRun",
    "ProducerFencedError",
    "Record",
    "RecordColumns",
    "RecordMetadata",
    "RecordRun",
    "RecoveredRecord",
    "ReplayFunc",
    "TopicDelete",
    "TransactionError",
    "TxnRef",
    "ack_uuid",
    "check_batch",
    "commit_group",
    "commit_partition",
    "control_indexes",
    "decode_at",
    "decode_batch",
    "decode_commit",
    "decode_delete",
    "decode_record",
    "drop_notice",
    "encode_batch",
    "encode_commit",
    "encode_delete",
    "encode_record",
    "fenced_decisions",
    "fold_commits",
    "instance_state",
    "is_batch",
    "is_shared_log",
    "log_owner",
    "log_partition",
    "log_segments",
    "next_version",
    "obligations",
    "plain_record",
    "segment_offset",
    "shared_log_partition",
    "undecided_logs",
    "visible_offsets",
]
