"""dafka.message: Gazette's exactly-once message layer, pure Python, no sockets.

Producers stamp every message with a v1 UUID carrying their ProducerID, a monotonic clock
and transaction flags (:mod:`._uuid`); the :class:`Publisher` stamps them in append order
per partition and builds ACK intents for transactions. Readers turn an at-least-once log
into exactly-once delivery with a :class:`Sequencer` (de-duplication, transactions held
until their ACK, rollbacks, replays requested from the caller, checkpoints). Framings lay
messages out in bytes (JSON lines, CSV, fixed binary frames) and mappings pick a partition.

See ``docs/message.md`` for a walk-through and ``shared/EXACTLY-ONCE.md`` for the rules.
"""

from dafka.message._csv_framing import CSV_CONTENT_TYPE, CsvFrameable, CsvFraming, encode_csv_record
from dafka.message._errors import (
    DesyncError,
    EmptyPartitionsError,
    FramingError,
    MappingError,
    MessageError,
    MustStartReplay,
    ReplayError,
    ReplayFailure,
    SequencerError,
    UnknownContentTypeError,
    UUIDError,
)
from dafka.message._fixed_framing import (
    FIXED_CONTENT_TYPE,
    FIXED_FRAME_HEADER_LENGTH,
    FIXED_FRAME_WORD,
    BytesFrameable,
    FixedFraming,
    encode_fixed_frame,
)
from dafka.message._framing import (
    FrameDecoder,
    Framing,
    StreamDecoder,
    framing_by_content_type,
    register_framing,
    registered_content_types,
)
from dafka.message._json_framing import JSON_CONTENT_TYPE, JsonFrameable, JsonFraming
from dafka.message._mapping import (
    KeyFunc,
    PartitionsFunc,
    fnv1a32,
    modulo_mapping,
    random_mapping,
    rendezvous_mapping,
)
from dafka.message._publisher import AckIntent, AppendFunc, MappingFunc, Publisher
from dafka.message._reader import ReadCommittedIter, ReadUncommittedIter, ReplayFunc
from dafka.message._sequencer import (
    Anomaly,
    ProducerState,
    QueueOutcome,
    ReplayedRun,
    ReplayRange,
    Sequencer,
    SequencerCheckpoint,
    SplitRun,
)
from dafka.message._types import BinaryMessage, CsvRecord, Envelope, JsonMessage, Message
from dafka.message._uuid import (
    NIL_UUID,
    Clock,
    Flags,
    ProducerID,
    build_uuid,
    build_uuids,
    clock_as_time,
    clock_to_unix_ns,
    get_clock,
    get_flags,
    get_producer_id,
    new_producer_id,
    unix_ns_to_clock,
)

register_framing(JsonFraming())  # type: ignore[arg-type]
register_framing(CsvFraming())  # type: ignore[arg-type]
register_framing(FixedFraming())  # type: ignore[arg-type]

__all__ = [
    "CSV_CONTENT_TYPE",
    "FIXED_CONTENT_TYPE",
    "FIXED_FRAME_HEADER_LENGTH",
    "FIXED_FRAME_WORD",
    "JSON_CONTENT_TYPE",
    "NIL_UUID",
    "AckIntent",
    "Anomaly",
    "AppendFunc",
    "BinaryMessage",
    "BytesFrameable",
    "Clock",
    "CsvFrameable",
    "CsvFraming",
    "CsvRecord",
    "DesyncError",
    "EmptyPartitionsError",
    "Envelope",
    "FixedFraming",
    "Flags",
    "FrameDecoder",
    "Framing",
    "FramingError",
    "JsonFrameable",
    "JsonFraming",
    "JsonMessage",
    "KeyFunc",
    "MappingError",
    "MappingFunc",
    "Message",
    "MessageError",
    "MustStartReplay",
    "PartitionsFunc",
    "ProducerID",
    "ProducerState",
    "Publisher",
    "QueueOutcome",
    "ReadCommittedIter",
    "ReadUncommittedIter",
    "ReplayError",
    "ReplayFailure",
    "ReplayFunc",
    "ReplayRange",
    "ReplayedRun",
    "Sequencer",
    "SequencerCheckpoint",
    "SequencerError",
    "SplitRun",
    "StreamDecoder",
    "UUIDError",
    "UnknownContentTypeError",
    "build_uuid",
    "build_uuids",
    "clock_as_time",
    "clock_to_unix_ns",
    "encode_csv_record",
    "encode_fixed_frame",
    "fnv1a32",
    "framing_by_content_type",
    "get_clock",
    "get_flags",
    "get_producer_id",
    "modulo_mapping",
    "new_producer_id",
    "random_mapping",
    "register_framing",
    "registered_content_types",
    "rendezvous_mapping",
    "unix_ns_to_clock",
]
