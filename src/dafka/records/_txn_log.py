"""The transaction log: its records, and what a successor must append (pure, no I/O).

See docs/exactly-once.md. Each instance of a transactional producer owns one log partition
in :data:`TXN_TOPIC`, named ``f"{tid}~{nonce}.0"`` (a named producer's partition 0), and
writes JSON records to it:

* :class:`EpochRecord` - first record: the instance's epoch, ProducerIDs, partitions, its
  opening clock ``c0``, and the predecessors whose leftovers it must resolve, each pinned at
  the log head it saw (records of a predecessor after its pin are void for everyone);
* :class:`IntentRecord` - the commit point of a transaction: the ACK of every partition it
  wrote, the exact UUID bytes that are appended;
* :class:`RecoveredRecord` - the pinned predecessors are resolved.

:func:`instance_state` folds a log into an :class:`InstanceState`; its
:meth:`~InstanceState.resolving_acks` are the ACKs a successor appends: per partition the
instance's last ACK (its ``c0`` opening ACK, or the one of its latest INTENT). Appending it
finishes a commit whose ACK never arrived and rolls back a span left open; where the ACK
did arrive it is a no-op for readers. This is the one rule that makes recovery idempotent:
the same bytes, whatever state the instance died in.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dafka.errors import DafkaError
from dafka.message import Flags, ProducerID, build_uuids
from dafka.records._errors import CorruptLogError

TXN_TOPIC = "__dafka_txn"
"""The topic that holds every transaction log."""

_SEPARATOR = "~"


def log_partition(transactional_id: str, nonce: str) -> str:
    """The log partition of one instance (``name`` ``f"{tid}~{nonce}"``, partition 0)."""
    return f"{transactional_id}{_SEPARATOR}{nonce}.0"


def shared_log_partition(transactional_id: str) -> str:
    """The log partition every instance of an id writes: ``f"{tid}~.0"``.

    Each instance resumes it as a new run of one named producer, so its fencing resume
    (docs/guarantees.md, "Fencing resume") fences every earlier instance's writes at each
    store's head before the new instance reads the log: nothing an earlier instance got
    stored is missed, nothing it sends later is taken (docs/exactly-once.md, "Fencing")."""
    return f"{transactional_id}{_SEPARATOR}.0"


def is_shared_log(partition: str) -> bool:
    """Whether ``partition`` is a :func:`shared_log_partition` (else one instance's log of
    the earlier layout, :func:`log_partition`)."""
    return partition.endswith(f"{_SEPARATOR}.0")


def log_segments(
    log: str, contents: Sequence[bytes], first: int = 0
) -> list[tuple[str, list[bytes]]]:
    """The instances of a shared log, in log order: each EPOCH record starts one, named
    ``f"{log}@{offset}"`` (its EPOCH's offset), with the records up to the next EPOCH -
    each is an instance's log for :func:`instance_state` and :func:`obligations`.
    ``contents`` are the log's records from offset ``first`` on: from 0, the log must start
    with an EPOCH (else :class:`CorruptLogError`); from later, the records before the first
    EPOCH among them belong to an instance that began earlier, not read here (decoded all
    the same, so a record that does not decode is never passed over). :class:`CorruptLogError`
    if a record does not decode (naming it, :func:`decode_at`)."""
    out: list[tuple[str, list[bytes]]] = []
    for at, content in enumerate(contents, first):
        if isinstance(decode_at(log, at, content), EpochRecord):
            out.append((f"{log}@{at}", [content]))
        elif out:
            out[-1][1].append(content)
        elif first == 0:
            raise CorruptLogError(f"log {log} does not start with an EPOCH record")
    return out


def segment_offset(log: str, segment: str) -> int | None:
    """The EPOCH offset of ``segment`` if it is one of the shared log ``log``
    (``f"{log}@{offset}"``), else None (a log of the earlier layout)."""
    prefix = f"{log}@"
    if not segment.startswith(prefix):
        return None
    text = segment[len(prefix) :]
    if not (text.isascii() and text.isdigit() and len(text) <= 20):
        raise CorruptLogError(f"log {log}: a pin names {segment!r}, not an instance of it")
    return int(text)


def log_owner(partition: str) -> str | None:
    """The transactional id of a log partition name, or None if it is not one."""
    if not partition.endswith(".0") or _SEPARATOR not in partition:
        return None
    return partition[:-2].rsplit(_SEPARATOR, 1)[0]


@dataclass(frozen=True, slots=True)
class Pin:
    """A predecessor instance's log partition, up to ``head`` (-1: the whole log).

    The transactional producer writes -1: a segment of the shared log ends at the next
    EPOCH (the fencing resume puts it after everything the predecessor got stored); a log
    of the earlier layout is read after one lease, when its instance has stopped writing,
    so everything in it counts."""

    log: str
    head: int

    def to_json(self) -> dict[str, Any]:
        return {"log": self.log, "head": self.head}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Pin:
        return cls(str(doc["log"]), int(doc["head"]))


@dataclass(frozen=True, slots=True)
class EpochRecord:
    epoch: int
    nonce: str
    topic: str
    partitions: tuple[str, ...]
    p_txn: ProducerID
    p_out: ProducerID
    c0: int
    pins: tuple[Pin, ...] = ()


@dataclass(frozen=True, slots=True)
class IntentRecord:
    txn: int
    acks: tuple[tuple[str, bytes], ...]
    """(partition, 16 UUID bytes of its ACK), in fan-out order."""


@dataclass(frozen=True, slots=True)
class RecoveredRecord:
    logs: tuple[str, ...]


LogRecord = EpochRecord | IntentRecord | RecoveredRecord


def encode_record(record: LogRecord) -> bytes:
    """The RECORD content of a log record (compact JSON)."""
    doc: dict[str, Any]
    if isinstance(record, EpochRecord):
        doc = {
            "type": "epoch",
            "epoch": record.epoch,
            "nonce": record.nonce,
            "topic": record.topic,
            "partitions": list(record.partitions),
            "p_txn": record.p_txn.hex(),
            "p_out": record.p_out.hex(),
            "c0": record.c0,
            "pins": [p.to_json() for p in record.pins],
        }
    elif isinstance(record, IntentRecord):
        doc = {"type": "intent", "txn": record.txn, "acks": [[p, u.hex()] for p, u in record.acks]}
    else:
        doc = {"type": "recovered", "logs": list(record.logs)}
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_record(content: bytes) -> LogRecord:
    """Inverse of :func:`encode_record`; :class:`CorruptLogError` for anything else."""
    try:
        doc = json.loads(content)
        kind = doc["type"]
        if kind == "epoch":
            return EpochRecord(
                int(doc["epoch"]),
                str(doc["nonce"]),
                str(doc["topic"]),
                tuple(str(p) for p in doc["partitions"]),
                ProducerID.fromhex(doc["p_txn"]),
                ProducerID.fromhex(doc["p_out"]),
                int(doc["c0"]),
                tuple(Pin.from_json(p) for p in doc["pins"]),
            )
        if kind == "intent":
            acks = tuple((str(p), bytes.fromhex(u)) for p, u in doc["acks"])
            if any(len(u) != 16 for _, u in acks):
                raise ValueError("an ACK UUID is 16 bytes")
            return IntentRecord(int(doc["txn"]), acks)
        if kind == "recovered":
            return RecoveredRecord(tuple(str(x) for x in doc["logs"]))
        raise ValueError(f"unknown record type {kind!r}")
    except (ValueError, KeyError, TypeError, DafkaError) as exc:
        raise CorruptLogError(f"transaction log record does not decode: {exc}") from None


def decode_at(log: str, offset: int, content: bytes) -> LogRecord:
    """:func:`decode_record` of the record at ``offset`` of ``log``, whose
    :class:`CorruptLogError` names it. The one rule for a record of a shared log that does
    not decode: it is never skipped - it may be an INTENT (skipping it would roll back a
    committed transaction whose ACKs readers saw) or a later instance's EPOCH (skipping it
    would let two instances write) - so whoever reads it stops and names it: a starting
    instance raises this, a running one stops as fenced (docs/exactly-once.md,
    "Recovery")."""
    try:
        return decode_record(content)
    except CorruptLogError as exc:
        raise CorruptLogError(
            f"{exc} (record {offset} of {log}); an instance of its id cannot tell what it "
            'decided, so none runs until it is repaired (docs/exactly-once.md, "Recovery")'
        ) from None


def ack_uuid(producer: ProducerID, clock: int) -> bytes:
    """The 16 UUID bytes of ``producer``'s ACK at ``clock`` (``build_uuid``'s bytes, by
    ``build_uuids``: no ``uuid.UUID`` and 128-bit int per ACK - a pipelined commit of a
    transaction of 100 messages over 4 partitions mints 4)."""
    return build_uuids(producer, int(clock), 1, Flags.ACK_TXN)[0]


@dataclass(slots=True)
class InstanceState:
    """What one instance's log says (up to a pin): enough to resolve what it left."""

    log: str
    epoch: EpochRecord
    last_acks: dict[str, bytes] = field(default_factory=dict)
    """Partition -> UUID bytes of the instance's last ACK there (opening or committed)."""
    last_txn: int = -1
    recovered: bool = False

    @property
    def unresolved_pins(self) -> tuple[Pin, ...]:
        """The predecessors this instance had to resolve and did not say it had."""
        return () if self.recovered else self.epoch.pins

    def resolving_acks(self) -> list[tuple[str, bytes]]:
        """One ACK per partition: finishes its last commit, rolls back an open span."""
        return [(p, self.last_acks[p]) for p in self.epoch.partitions]

    def key(self) -> tuple[int, str]:
        """Instances of one id are ordered by (epoch, nonce): the greatest one owns it."""
        return (self.epoch.epoch, self.epoch.nonce)


def instance_state(log: str, contents: Iterable[bytes]) -> InstanceState | None:
    """Fold a log's records (from sequence 0, in order); None if it has no EPOCH yet."""
    state: InstanceState | None = None
    for content in contents:
        record = decode_record(content)
        if state is None:
            if not isinstance(record, EpochRecord):
                raise CorruptLogError(f"log {log} does not start with an EPOCH record")
            opening = ack_uuid(record.p_txn, record.c0)
            state = InstanceState(log, record, dict.fromkeys(record.partitions, opening))
        elif isinstance(record, IntentRecord):
            for partition, uuid in record.acks:
                if partition not in state.last_acks:
                    raise CorruptLogError(f"log {log}: INTENT for a foreign partition {partition}")
                state.last_acks[partition] = uuid
            state.last_txn = record.txn
        elif isinstance(record, RecoveredRecord):
            state.recovered = True
        else:
            raise CorruptLogError(f"log {log}: a second EPOCH record")
    return state


def obligations(
    predecessor: InstanceState,
    pinned_logs: Mapping[str, Sequence[bytes]],
    _within: frozenset[str] = frozenset(),
) -> list[InstanceState]:
    """The instances a successor of ``predecessor`` resolves, oldest first.

    ``predecessor`` itself always (it may have died anywhere); and, if it never wrote
    RECOVERED, the ones it had to resolve, read from ``pinned_logs`` (each log's contents,
    already cut at its pin), recursively. A pin back to an instance already on the way
    (no instance pins itself or a later one) is :class:`CorruptLogError` (it recursed until
    Python's limit: a RecursionError out of the producer's constructor).
    """
    within = _within | {predecessor.log}
    out: list[InstanceState] = []
    for pin in predecessor.unresolved_pins:
        if pin.log in within:
            raise CorruptLogError(
                f"transaction log {predecessor.log} pins {pin.log}, which is itself or pins it"
            )
        contents = pinned_logs.get(pin.log)
        if contents is None:
            raise CorruptLogError(f"transaction log {pin.log} could not be read")
        state = instance_state(pin.log, contents if pin.head < 0 else contents[: pin.head + 1])
        if state is not None:
            out.extend(obligations(state, pinned_logs, within))
    out.append(predecessor)
    return out


__all__ = [
    "TXN_TOPIC",
    "EpochRecord",
    "InstanceState",
    "IntentRecord",
    "LogRecord",
    "Pin",
    "RecoveredRecord",
    "ack_uuid",
    "decode_at",
    "decode_record",
    "encode_record",
    "instance_state",
    "is_shared_log",
    "log_owner",
    "log_partition",
    "log_segments",
    "obligations",
    "segment_offset",
    "shared_log_partition",
]
