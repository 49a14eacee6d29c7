"""The exactly-once sink's transactions: names, clocks, control records (pure; no pyspark).

See ``docs/spark.md`` ("Sink") for the design this module implements. In short: a task writes
its rows as CONTINUE_TXN messages to its own partition ``f"{sink}.{task}.0"`` of the output
topic; the driver's commit records every ACK of the micro-batch in one control record (the
commit point) and then appends each ACK to its partition. Clocks are a function of the batch
id and the task attempt, so that they grow across batches and attempts without any state
in the tasks but the last ACK clock of each partition, which the driver hands them.

Batches are the sink's own, numbered across the queries that write it: a Spark query's
micro-batch ``n`` is sink batch ``base + n``, where ``base`` is fixed when the query first
meets the sink (one past the last batch any query committed). A query is Spark's query id,
which its checkpoint keeps: a restart from the same checkpoint is the same query and finds
its committed batches; a fresh checkpoint is a new query, whose batches are all new, even at
the same checkpoint path, where the sink's name (and so its partitions) is the same
(:func:`plan_batch`).

Clock layout of sink batch ``b`` (Gazette clocks are uint64; readers only compare them)::

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
    """The last control record of a sink: its last committed batch, the query that committed
    it (Spark's query id; None for a record of the first version, which named none) and that
    query's ``base``, and every partition's last ACK clock."""

    batch: int = -1
    touched: tuple[Touched, ...] = ()
    last_acks: Mapping[Key, int] = field(default_factory=dict)
    query: str | None = None
    base: int = 0

    def next(self, query: str, base: int, batch: int, touched: Iterable[Touched]) -> ControlState:
        acks = dict(self.last_acks)
        items = tuple(touched)
        for t in items:
            acks[(t.topic, t.partition)] = t.clock
        return ControlState(batch, items, acks, query, base)


@dataclass(frozen=True, slots=True)
class Planned:
    """Where a query's micro-batch stands in the sink (:func:`plan_batch`)."""

    batch: int
    """The sink batch (clocks are a function of it)."""
    committed: bool
    """Whether the query already committed it (a re-run after a restart: write nothing)."""
    new_query: bool
    """Whether the query has committed nothing to this sink yet."""


def plan_batch(state: ControlState, query: str, spark_batch: int) -> Planned:
    """The sink batch of micro-batch ``spark_batch`` of ``query``, given the sink's state.

    The query that committed the last record finds its batches at ``base + spark_batch``,
    and those up to the last one committed. Any other query is new (a fresh checkpoint: its
    own id, from batch 0; a record that names no query belongs to none): its batches go after
    the last committed one, and none of them is committed. Never a silent skip: a batch
    counts as committed only if this very query committed it.
    """
    if spark_batch < 0:
        raise SinkError(f"micro-batch id {spark_batch} < 0")
    if state.query is not None and state.query == query:
        batch = state.base + spark_batch
        return Planned(batch, batch <= state.batch, False)
    return Planned(state.batch + 1 + spark_batch, False, True)


def encode_control(state: ControlState) -> bytes:
    if state.query is None:
        raise SinkError("a control record names the query that commits it")
    doc = {
        "v": 2,
        "query": state.query,
        "base": state.base,
        "batch": state.batch,
        "touched": [[t.topic, t.partition, t.producer, t.clock] for t in state.touched],
        "acks": [[t, p, c] for (t, p), c in sorted(state.last_acks.items())],
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_control(content: bytes) -> ControlState:
    """A control record: version 2, or version 1 (no query: every query is new to it)."""
    try:
        doc = json.loads(content)
        version = doc.get("v")
        if version not in (1, 2):
            raise SinkError(f"control record of unknown version {version!r}")
        touched = tuple(Touched(str(t), str(p), str(h), int(c)) for t, p, h, c in doc["touched"])
        acks = {(str(t), str(p)): int(c) for t, p, c in doc["acks"]}
        if version == 1:
            return ControlState(int(doc["batch"]), touched, acks)
        return ControlState(int(doc["batch"]), touched, acks, str(doc["query"]), int(doc["base"]))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SinkError(f"corrupt sink control record: {exc}") from None


__all__ = [
    "CONTROL_TOPIC",
    "ControlState",
    "Planned",
    "SinkError",
    "Touched",
    "batch_base",
    "commit_clock",
    "continue_clock",
    "control_partition",
    "decode_control",
    "encode_control",
    "plan_batch",
    "producer_id",
    "task_partition",
    "uuid_bytes",
    "uuid_run",
]
