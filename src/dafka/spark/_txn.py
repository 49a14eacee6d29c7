"""The exactly-once sink's transactions: names, clocks, control records (pure; no pyspark).

See ``docs/spark.md`` ("Sink") for the design this module implements. In short: a task writes
its rows as CONTINUE_TXN messages to its own partition ``f"{sink}.{task}.0"`` of the output
topic; the driver's commit records every ACK of the micro-batch in one control record (the
commit point) and then appends each ACK to its partition. Clocks are a function of the batch
id and the task attempt, so that they grow across batches and attempts without any state
in the tasks but the last ACK clock of each partition, which the driver hands them.

Clock layout of batch ``b`` (Gazette clocks are uint64; readers only compare them)::

    W(b)      = (b + 1) << 32              base of the batch (a new partition's opening ACK)
    CONTINUE  = W(b) + (attempt << 24) + i + 1    i = row index in the attempt, < 2**24
    C(b)      = W(b) + 2**32 - 1  = W(b + 1) - 1   the batch's commit ACK
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dafka.errors import DafkaError
from dafka.message import Flags, ProducerID, build_uuid

CONTROL_TOPIC = "__dafka_spark"
"""Topic of the sinks' control partitions (one partition per sink, written by its driver)."""

ROWS_PER_ATTEMPT = 1 << 24
ATTEMPTS = 1 << 8


class SinkError(DafkaError):
    """The exactly-once sink cannot go on (a bound of its clock layout, a corrupt record)."""


def batch_base(batch: int) -> int:
    return (batch + 1) << 32


def commit_clock(batch: int) -> int:
    return batch_base(batch + 1) - 1


def continue_clock(batch: int, attempt: int, row: int) -> int:
    if not 0 <= attempt < ATTEMPTS:
        raise SinkError(f"task attempt {attempt} is beyond the sink's {ATTEMPTS} attempts")
    if not 0 <= row < ROWS_PER_ATTEMPT - 1:
        raise SinkError(
            f"a task writes at most {ROWS_PER_ATTEMPT - 2} rows per micro-batch to one "
            "partition: use more Spark partitions (repartition) or smaller triggers"
        )
    return batch_base(batch) + (attempt << 24) + row + 1


def task_partition(sink: str, task: int) -> tuple[str, str]:
    """(producer name, partition name) of Spark task partition ``task`` of ``sink``."""
    name = f"{sink}.{task}"
    return name, f"{name}.0"


def control_partition(sink: str) -> tuple[str, str]:
    name = f"{sink}.ctl"
    return name, f"{name}.0"


def producer_id(sink: str, topic: str, partition: str) -> ProducerID:
    """The Gazette ProducerID of one sink partition: stable across batches, attempts, runs."""
    digest = bytearray(hashlib.sha256(f"{sink}\0{topic}\0{partition}".encode()).digest()[:6])
    digest[0] |= 0x01  # the multicast bit, as new_producer_id: never a real MAC, never zero
    return ProducerID(bytes(digest))


def uuid_bytes(pid: bytes, clock: int, flags: Flags) -> bytes:
    return build_uuid(pid, clock, flags).bytes


def uuid_run(pid: bytes, first_clock: int, count: int, flags: Flags) -> list[bytes]:
    """``uuid_bytes`` of the clocks ``first_clock .. first_clock + count - 1``, in bulk.

    The layout is ``build_uuid``'s (a unit test holds them equal); the parts that do not
    depend on the clock are computed once, so a row costs a few shifts, not a UUID object.
    """
    if count <= 0:
        return []
    uuid_bytes(pid, first_clock + count - 1, flags)  # checks the arguments and the range
    fixed = 0x1000 << 64 | (0x8000 | int(flags)) << 48 | int.from_bytes(pid, "big")
    return [
        (
            ((c >> 4) & 0xFFFFFFFF) << 96
            | ((c >> 36) & 0xFFFF) << 80
            | ((c >> 52) & 0x0FFF) << 64
            | (c & 0xF) << 58
            | fixed
        ).to_bytes(16, "big")
        for c in range(first_clock, first_clock + count)
    ]


Key = tuple[str, str]
"""(topic, partition)."""


@dataclass(frozen=True, slots=True)
class Touched:
    """A partition a micro-batch wrote, and the ACK that commits it."""

    topic: str
    partition: str
    producer: str  # ProducerID, hex
    clock: int


@dataclass(frozen=True, slots=True)
class ControlState:
    """The last control record of a sink: its last committed batch and every last ACK."""

    batch: int = -1
    touched: tuple[Touched, ...] = ()
    last_acks: Mapping[Key, int] = field(default_factory=dict)

    def next(self, batch: int, touched: Iterable[Touched]) -> ControlState:
        acks = dict(self.last_acks)
        items = tuple(touched)
        for t in items:
            acks[(t.topic, t.partition)] = t.clock
        return ControlState(batch, items, acks)


def encode_control(state: ControlState) -> bytes:
    doc = {
        "v": 1,
        "batch": state.batch,
        "touched": [[t.topic, t.partition, t.producer, t.clock] for t in state.touched],
        "acks": [[t, p, c] for (t, p), c in sorted(state.last_acks.items())],
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_control(content: bytes) -> ControlState:
    try:
        doc = json.loads(content)
        if doc.get("v") != 1:
            raise SinkError(f"control record of unknown version {doc.get('v')!r}")
        touched = tuple(Touched(str(t), str(p), str(h), int(c)) for t, p, h, c in doc["touched"])
        acks = {(str(t), str(p)): int(c) for t, p, c in doc["acks"]}
        return ControlState(int(doc["batch"]), touched, acks)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SinkError(f"corrupt sink control record: {exc}") from None


__all__ = [
    "CONTROL_TOPIC",
    "ControlState",
    "SinkError",
    "Touched",
    "batch_base",
    "commit_clock",
    "continue_clock",
    "control_partition",
    "decode_control",
    "encode_control",
    "producer_id",
    "task_partition",
    "uuid_bytes",
    "uuid_run",
]
