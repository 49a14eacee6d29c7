"""The dafka sink: ``df.writeStream.format("dafka")`` and ``df.write.format("dafka")``.

Exactly-once, by Gazette transactions (design: ``docs/spark.md``, "Sink"; clocks and names:
:mod:`dafka.spark._txn`):

* on the driver, when Spark creates the writer for a micro-batch: read the sink's control
  state (its last control record) and hand it to the tasks in the pickled writer;
* in each task: place the micro-batch among the sink's batches by Spark's query id
  (:func:`~dafka.spark._txn.plan_batch`: a fresh checkpoint is a new query, whose batches
  are all new); if this query committed it already, write nothing; else, for each output
  topic, resume the task's own partition, re-send its last ACK (rolls back what a failed
  earlier attempt left), write the rows as CONTINUE_TXN messages, flush, and report
  (topic, partition, ProducerID) in the commit message;
* on the driver's commit: if this query committed this batch already, re-append its ACKs
  (idempotent) and stop; else append a control record with the batch's ACKs and the query
  and wait until stores hold it (the commit point), then append each ACK to its partition.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    StringType,
    StructType,
)

from dafka.client import Consumer, ConsumerSettings, HeadWatcher, Producer
from dafka.errors import ConfigError
from dafka.message import Flags, ProducerID
from dafka.records import ack_uuid, encode_batch
from dafka.spark._options import SinkOptions, parse_sink_options
from dafka.spark._read import FETCH_RETRY_INITIAL
from dafka.spark._txn import (
    CONTROL_TOPIC,
    ControlState,
    SinkError,
    Touched,
    batch_base,
    commit_clock,
    continue_clock,
    control_partition,
    decode_control,
    encode_control,
    plan_batch,
    producer_id,
    task_partition,
    uuid_run,
)


class SinkFault(Protocol):
    """A fault injected into the sink's tasks (the writers' ``fault``; tests install
    ``dafka.testing.fail_sink_task``): called after each Arrow batch a task sent, with the
    micro-batch, the task, its attempt and the rows it sent; True makes the task store what
    it sent and fail (the partial output a crashed task leaves). The micro-batch is Spark's
    id (0 for ``df.write``). Pickled to the executors with the writer."""

    def __call__(self, batch: int, task: int, attempt: int, rows: int) -> bool: ...


ROWS_PER_RECORD = 2048
BYTES_PER_RECORD = 256 * 1024
_FLUSH_TIMEOUT = 60.0
_READ_TIMEOUT = 30.0
"""Seconds the control record may take to arrive (a ``DataLossError`` then says it is gone)."""
QUERY_ID_PROPERTY = "sql.streaming.queryId"
"""The task-local property with Spark's query id: kept by the checkpoint, new with a new one."""
BATCH_ID_PROPERTY = "streaming.sql.batchId"
"""The task-local property with the micro-batch id."""

log = logging.getLogger(__name__)


# -- schema ----------------------------------------------------------------------------------


def check_schema(schema: StructType, options: SinkOptions) -> None:
    """Columns: ``value`` (required), ``key``, ``headers``, ``topic`` (or the option)."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    allowed = {
        "value": (BinaryType, StringType),
        "key": (BinaryType, StringType),
        "topic": (StringType,),
        "headers": (ArrayType,),
    }
    unknown = sorted(set(types) - set(allowed))
    if unknown:
        raise ConfigError(
            f"the dafka sink takes columns value, key, headers, topic; got also {unknown}"
        )
    if "value" not in types:
        raise ConfigError("the dafka sink needs a 'value' column (binary or string)")
    for name, data_type in types.items():
        if not isinstance(data_type, allowed[name]):
            raise ConfigError(f"sink column {name!r} cannot be {data_type.simpleString()}")
    if options.topic is None and "topic" not in types:
        raise ConfigError("the dafka sink needs the option 'topic' or a 'topic' column")


# -- the control partition (driver) ----------------------------------------------------------


@dataclass(frozen=True)
class Control:
    """A sink's control state and where it was read: the offset of its record in the
    control partition (-1: none, a new sink). A record never changes once stored (its
    producer always resumes after the stored head, and a store keeps the first RECORD of a
    sequence), so (partition, offset) names one state for good: a state read at offset
    ``o`` is the current one exactly when the partition's head is still ``o``."""

    state: ControlState
    offset: int


_CONTROL_QUIET = 0.3
"""The control-state reader's heads are complete once every store that greeted it said
"that is all" (HEADS-END: ``HeadWatcher.refresh``, a round trip); with a store that never
says so (a C store), once nothing new came for this many seconds after the ask. Were a
slower store to hold a later control record, the commit finds out from its control
producer's resume and re-reads; it refuses the batch if the tasks' rollbacks depended on
the difference (:func:`_check_rollbacks`)."""
_FIRST_STORE_TIMEOUT = 10.0
"""Seconds the control-state reader waits for a store's greeting before it fails."""


def read_control(options: SinkOptions, sink: str) -> Control:
    """The sink's last control record (an empty state for a new sink)."""
    _, partition = control_partition(sink)
    with HeadWatcher([CONTROL_TOPIC], options.transport) as watcher:
        watcher.wait_for(lambda _heads: watcher.stores >= 1, _FIRST_STORE_TIMEOUT)
        if watcher.stores < 1:
            raise SinkError("no dafka store answered: cannot read the sink's control state")
        heads = watcher.refresh(_CONTROL_QUIET, _FIRST_STORE_TIMEOUT)
    return read_control_at(options, sink, heads.get((CONTROL_TOPIC, partition), -1))


def read_control_at(options: SinkOptions, sink: str, offset: int) -> Control:
    """The control record at ``offset`` of the sink's control partition (-1: the empty
    state of a new sink)."""
    if offset < 0:
        return Control(ControlState(), -1)
    _, partition = control_partition(sink)
    key = (CONTROL_TOPIC, partition)
    settings = ConsumerSettings(
        towers=options.towers,
        **options.security.fields(),
        latest_settle=0.0,
        fetch_retry_initial=FETCH_RETRY_INITIAL,  # as a task's read: 0.5 s less per batch
        fetch_retry_max=2.0,
        fail_on_data_loss=True,
    )
    with Consumer(assign={key: offset}, end_offsets={key: offset + 1}, settings=settings) as reader:
        for columns in reader.read_to_end(_READ_TIMEOUT):
            return Control(decode_control(columns.values[-1]), offset)
    raise SinkError(f"control record {offset} of {partition} could not be read")


RESUME_BEACON_INTERVAL = 1 / 3
"""The beacon interval of the sink's producers (the clients' default is 1 s). A named
producer resumes ``max(0.5, 1.5 * beacon_interval)`` seconds after the last new store
greeted it - 1.5 s at the default, on the critical path of every micro-batch twice (the
tasks' producers, then the commit's). Stores greet a newcomer within a round trip (a node
beacons back at once when it hears a new peer), and a beacon of ours that a store missed
comes again within a third of a second, so the resume's floor of 0.5 s still covers every
live store; the peers' expiry stays the default's (``BEACON_TIMEOUT``)."""
BEACON_TIMEOUT = 4.0
"""The sink's producers forget a store not heard of for this long (the default: 4 x 1 s)."""


def _producer(
    options: SinkOptions, topic: str, name: str, next_sequence: int | None = None
) -> Producer:
    """The one-partition producer ``f"{name}.0"``: resumed after its stored head, or, with
    ``next_sequence``, continuing there at once (the caller is its one writer and knows)."""
    return Producer(
        topic,
        towers=options.towers,
        **options.security.fields(),
        name=name,
        partitions=1,
        batching=False,
        beacon_interval=RESUME_BEACON_INTERVAL,
        beacon_timeout=BEACON_TIMEOUT,
        next_sequences=None if next_sequence is None else {f"{name}.0": next_sequence},
    )


def _append(producer: Producer, content: bytes) -> None:
    producer.send(content)
    left = producer.flush(_FLUSH_TIMEOUT)
    if left:
        raise SinkError(f"{producer.topic}/{producer.partitions[0]}: record not stored in time")


def fan_out(
    options: SinkOptions,
    touched: Sequence[Touched],
    heads: Mapping[tuple[str, str], int] | None = None,
) -> None:
    """Append each ACK to its partition (in parallel: one writer per partition).

    ``heads``: the last sequence each partition's task stored (its commit message): the
    commit is the partition's next and only writer (the batch's tasks are over, the next
    batch's not begun), so the ACK goes right after it without a resume. A partition
    without one (a commit re-run after a crash) is resumed from the stores."""
    known = heads or {}

    def ack(t: Touched) -> None:
        content = encode_batch([b""], uuids=[ack_uuid(ProducerID.fromhex(t.producer), t.clock)])
        head = known.get((t.topic, t.partition))
        name = t.partition.rsplit(".", 1)[0]
        with _producer(options, t.topic, name, None if head is None else head + 1) as producer:
            _append(producer, content)

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        for future in [pool.submit(ack, t) for t in touched]:
            future.result()


def commit_batch(
    options: SinkOptions,
    sink: str,
    spark_batch: int,
    messages: Sequence[WriterCommitMessage | None],
) -> None:
    """Commit micro-batch ``spark_batch`` of the query the tasks name (see the module)."""
    commits = [m for m in messages if isinstance(m, TaskCommit)]
    queries = {m.query for m in commits}
    if not queries:
        return  # no task ran: nothing was written, nothing to commit
    if len(queries) > 1:
        raise SinkError(f"sink {sink}: tasks of one micro-batch name several queries {queries}")
    query = queries.pop()
    name, partition = control_partition(sink)
    with _producer(options, CONTROL_TOPIC, name) as control:  # resumed: the stored head
        head = control.start_offsets[partition] - 1
        read = commits[0].control
        if read.offset != head or any(m.control.offset != head for m in commits):
            read = read_control_at(options, sink, head)  # it moved since the tasks' read
            _check_rollbacks(sink, spark_batch, commits, read.state)
        _commit(options, sink, spark_batch, commits, query, read.state, control)


def _check_rollbacks(
    sink: str, spark_batch: int, commits: Sequence[TaskCommit], state: ControlState
) -> None:
    """Refuse to commit a batch whose tasks opened a partition with another last ACK clock
    than the control state now has: their opening ACK could not roll back what an earlier
    attempt left (the state they read was not the last one). Not committed, the batch is
    written again after a restart, from a fresh read."""
    for m in commits:
        for t in m.touched:
            key = (t.topic, t.partition)
            if m.control.state.last_acks.get(key) != state.last_acks.get(key):
                raise SinkError(
                    f"sink {sink}: micro-batch {spark_batch} was written from control record "
                    f"{m.control.offset}, but the last one is now another: {key} was opened "
                    "with an outdated ACK clock; not committed (a restart writes it again)"
                )


def _commit(
    options: SinkOptions,
    sink: str,
    spark_batch: int,
    commits: Sequence[TaskCommit],
    query: str,
    state: ControlState,
    control: Producer,
) -> None:
    """:func:`commit_batch` once the current control state is known (``control``: the
    control partition's producer, resumed after the record ``state`` was read from)."""
    planned = plan_batch(state, query, spark_batch)
    if planned.committed:
        if planned.batch == state.batch:
            fan_out(options, state.touched)  # finish a fan-out a crash may have cut short
        return
    written = {m.batch for m in commits}
    if written != {planned.batch} or any(m.skipped for m in commits):
        raise SinkError(
            f"sink {sink}: micro-batch {spark_batch} of query {query} was written as sink "
            f"batch(es) {sorted(written)}, but the control state now places it at "
            f"{planned.batch}: another query writes this sink (one query per sink at a time)"
        )
    if planned.new_query and state.batch >= 0:
        log.warning(
            "dafka sink %s: query %s is new to it (a fresh checkpoint; the last committed "
            "batch was query %s's): its output is written from its micro-batch %d on, as "
            "sink batch %d; rows the earlier query already wrote stay (read again, they are "
            "written again, as Kafka's sink would)",
            sink,
            query,
            state.query,
            spark_batch,
            planned.batch,
        )
    touched = [t for m in commits for t in m.touched]
    new = state.next(query, planned.batch - spark_batch, planned.batch, touched)
    _append(control, encode_control(new))  # the commit point
    fan_out(options, new.touched, {k: h for m in commits for k, h in m.heads})


# -- the tasks -------------------------------------------------------------------------------


@dataclass
class TaskCommit(WriterCommitMessage):
    """What a task wrote: one entry per output topic, with its commit ACK; the query and the
    sink batch it wrote as (or, ``skipped``, found committed already)."""

    query: str
    batch: int
    touched: list[Touched]
    rows: int
    control: Control
    """The control state the task planned with (the driver's commit checks it is current)."""
    heads: tuple[tuple[tuple[str, str], int], ...] = ()
    """((topic, partition), last sequence stored) of each partition the task wrote."""
    skipped: bool = False
    spark_batch: int = 0
    """Spark's micro-batch the task wrote (0 for a plain ``df.write``)."""


class _TopicWriter:
    """One task's transaction on one topic: its own partition, resumed, rows as CONTINUEs."""

    def __init__(
        self, options: SinkOptions, sink: str, topic: str, task: int, state: ControlState
    ) -> None:
        self.topic = topic
        self.name, self.partition = task_partition(sink, task)
        self.pid = producer_id(sink, topic, self.partition)
        self.producer = _producer(options, topic, self.name)  # resumed: the stored head
        self.records = 0
        self.rows = 0
        self.values: list[bytes] = []
        self.keys: list[bytes | None] = []
        self.headers: list[list[tuple[str, bytes]] | None] = []
        self.uuids: list[bytes] = []
        self.size = 0
        self.state = state

    def begin(self, batch: int) -> None:
        last = self.state.last_acks.get((self.topic, self.partition), batch_base(batch))
        rollback = ack_uuid(self.pid, last)
        self.producer.send(encode_batch([b""], uuids=[rollback]))
        self.records += 1

    def add_many(
        self,
        batch: int,
        attempt: int,
        values: list[bytes],
        keys: list[bytes | None] | None,
        headers: list[list[tuple[str, bytes]] | None] | None,
    ) -> None:
        """Rows in bulk: values, and keys / headers (None: no row has any)."""
        n = len(values)
        if n == 0:
            return
        first = continue_clock(batch, attempt, self.rows)
        continue_clock(batch, attempt, self.rows + n - 1)  # the attempt's row bound
        self.values += values
        self.keys += keys if keys is not None else [None] * n
        self.headers += headers if headers is not None else [None] * n
        self.uuids += uuid_run(self.pid, first, n, Flags.CONTINUE_TXN)
        self.rows += n
        self.size += sum(map(len, values)) + 40 * n
        if keys is not None:
            self.size += sum(len(k) for k in keys if k)
        while len(self.values) >= ROWS_PER_RECORD or self.size >= BYTES_PER_RECORD:
            self.send(ROWS_PER_RECORD)

    def send(self, most: int | None = None) -> None:
        """One RECORD of the pending rows (at most ``most`` of them)."""
        if not self.values:
            return
        n = len(self.values) if most is None else min(most, len(self.values))
        values, keys, headers = self.values[:n], self.keys[:n], self.headers[:n]
        now = int(time.time() * 1000)
        content = encode_batch(
            values,
            keys if any(k is not None for k in keys) else None,
            headers if any(headers) else None,
            [now] * n,
            self.uuids[:n],
        )
        self.producer.send(content)
        self.records += 1
        del self.values[:n], self.keys[:n], self.headers[:n], self.uuids[:n]
        self.size = sum(map(len, self.values)) + 40 * len(self.values) if self.values else 0

    def finish(self, batch: int) -> tuple[Touched, int]:
        """The partition's commit ACK and the last sequence stored (every RECORD is)."""
        self.send()
        left = self.producer.flush(_FLUSH_TIMEOUT)
        self.producer.close()
        if left:
            raise SinkError(f"{self.topic}/{self.partition}: {left} record(s) not stored in time")
        last = self.producer.start_offsets[self.partition] + self.records - 1
        return Touched(self.topic, self.partition, self.pid.hex(), commit_clock(batch)), last

    def abandon(self) -> None:
        self.producer.close(timeout=0)


def _binary(column: pa.Array) -> list[bytes | None]:
    """A binary or string column as bytes (strings cast by Arrow, not row by row)."""
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    elif not (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
        raise SinkError(f"sink values must be binary or string, got {column.type}")
    return column.to_pylist()  # type: ignore[no-any-return]


Rows = tuple[
    str, list[bytes], list[bytes | None] | None, list[list[tuple[str, bytes]] | None] | None
]
"""(topic, values, keys or None, headers or None) of some rows."""


def _rows_by_topic(record_batch: pa.RecordBatch, default_topic: str | None) -> list[Rows]:
    """The rows of an Arrow batch, column by column, grouped by output topic."""
    columns = {
        name.lower(): record_batch.column(i) for i, name in enumerate(record_batch.schema.names)
    }
    n = record_batch.num_rows
    value = columns["value"]
    if value.null_count:
        raise SinkError("a row has a null 'value'")
    values: list[bytes] = _binary(value)  # type: ignore[assignment]
    key = columns.get("key")
    keys = _binary(key) if key is not None and key.null_count < n else None
    header = columns.get("headers")
    headers = None
    if header is not None and header.null_count < n:
        headers = [
            [(h["key"], h["value"] or b"") for h in row] if row else None
            for row in header.to_pylist()
        ]
    topic = columns.get("topic")
    if topic is None or topic.null_count == n:
        if default_topic is None:
            raise SinkError("a row has no topic (null 'topic' and no 'topic' option)")
        return [(default_topic, values, keys, headers)]
    topics = topic.to_pylist()
    if default_topic is not None:
        topics = [t or default_topic for t in topics]
    elif None in topics:
        raise SinkError("a row has no topic (null 'topic' and no 'topic' option)")
    if len(set(topics)) == 1:
        return [(topics[0], values, keys, headers)]
    rows: dict[str, list[int]] = {}
    for i, t in enumerate(topics):
        rows.setdefault(t, []).append(i)
    return [
        (
            t,
            [values[i] for i in at],
            None if keys is None else [keys[i] for i in at],
            None if headers is None else [headers[i] for i in at],
        )
        for t, at in rows.items()
    ]


def write_task(
    options: SinkOptions,
    sink: str,
    control: Control,
    query: str,
    spark_batch: int,
    data: Iterator[pa.RecordBatch],
    fault: SinkFault | None = None,
) -> TaskCommit:
    """What one Spark task does with its rows (see the module docstring)."""
    ctx = TaskContext.get()
    task = ctx.partitionId() if ctx is not None else 0
    attempt = ctx.attemptNumber() if ctx is not None else 0
    state = control.state
    planned = plan_batch(state, query, spark_batch)
    batch = planned.batch
    if planned.committed:
        for _ in data:  # this query committed it already (a re-run after a restart)
            pass
        return TaskCommit(query, batch, [], 0, control, skipped=True, spark_batch=spark_batch)
    writers: dict[str, _TopicWriter] = {}
    try:
        for record_batch in data:
            for topic, values, keys, headers in _rows_by_topic(record_batch, options.topic):
                writer = writers.get(topic)
                if writer is None:
                    writer = writers[topic] = _TopicWriter(options, sink, topic, task, state)
                    writer.begin(batch)
                writer.add_many(batch, attempt, values, keys, headers)
            for writer in writers.values():
                writer.send()  # one RECORD per Arrow batch at most: rows leave as they come
            if fault is not None:
                rows = sum(w.rows for w in writers.values())
                if fault(spark_batch, task, attempt, rows):
                    for writer in writers.values():
                        writer.producer.flush(_FLUSH_TIMEOUT)
                    raise SinkError(
                        f"injected failure in micro-batch {spark_batch} after {rows} rows"
                    )
        finished = [w.finish(batch) for w in writers.values()]
    except BaseException:
        for w in writers.values():
            w.abandon()
        raise
    return TaskCommit(
        query,
        batch,
        [t for t, _ in finished],
        sum(w.rows for w in writers.values()),
        control,
        tuple(((t.topic, t.partition), last) for t, last in finished),
        spark_batch=spark_batch,
    )


# -- pyspark writers -------------------------------------------------------------------------


def sink_name(options: SinkOptions, raw: dict[str, str], *, once: bool = False) -> str:
    """The sink's stable id: option ``name``, else derived from the checkpoint location,
    else (``once``: a ``df.write``) an identity of its own.

    It names the sink's partitions and control record, not the query: which batches are
    committed is per Spark query id (a fresh checkpoint at the same path is a new query).
    A ``df.write`` without ``name`` is a one-shot job: new partitions, written once; give it
    a ``name`` to re-run it idempotently into the same partitions. A streaming writer is
    made again for every micro-batch, so it cannot make up a name: its checkpoint names it."""
    if options.name is not None:
        return options.name
    location = {k.lower(): v for k, v in raw.items()}.get("checkpointlocation")
    if location:
        return "spark-" + hashlib.sha256(location.encode()).hexdigest()[:16]
    if once:
        return f"write-{uuid.uuid4().hex[:16]}"
    raise ConfigError(
        "the dafka sink needs the option 'name' (a stable id of the query's output; one "
        "writer at a time) or a checkpointLocation to derive it from"
    )


def streaming_batch() -> tuple[str, int] | None:
    """(Spark's query id, micro-batch id) when this task runs inside a streaming micro-batch
    (a ``df.write`` in ``foreachBatch`` inherits the query's local properties), else None."""
    ctx = TaskContext.get()
    if ctx is None:
        return None
    query = ctx.getLocalProperty(QUERY_ID_PROPERTY)
    raw = ctx.getLocalProperty(BATCH_ID_PROPERTY)
    if not query or raw is None:
        return None
    return query, int(raw)


def foreach_batch(**options: str) -> Callable[[DataFrame, int], None]:
    """The dafka sink as a ``foreachBatch`` function: how a query in ``update`` output mode
    writes to dafka, exactly once per micro-batch::

        counts.writeStream.outputMode("update").foreachBatch(
            dafka.spark.foreach_batch(towers="h:5556", topic="counts")
        ).option("checkpointLocation", "/ckpt/counts").start()

    Spark's Python Data Source API cannot take ``update`` itself (its JVM write builder
    lacks ``SupportsStreamingUpdateAsAppend``: "dafka does not support Update mode").
    Each micro-batch is a ``df.write`` whose tasks see the query's id and batch id (local
    properties), so a batch replayed after a driver crash is found committed, as with
    ``format("dafka")``. ``options`` are the sink's (checked here, at once); ``name``
    defaults to one derived from the query id (kept by the checkpoint)."""
    parse_sink_options(options)  # a bad option fails here, at once
    given = {k.lower() for k in options}

    def write(df: DataFrame, batch_id: int) -> None:
        del batch_id  # the tasks read it from their local properties
        writer = df.write.format("dafka").mode("append")
        for key, value in options.items():
            writer = writer.option(key, value)
        if "name" not in given:
            query = df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
            if not query:
                raise SinkError("foreach_batch runs outside a streaming query: give 'name'")
            writer = writer.option(
                "name", "spark-" + hashlib.sha256(query.encode()).hexdigest()[:16]
            )
        writer.save()

    return write


class DafkaStreamWriter(DataSourceStreamArrowWriter):
    """Created on the driver per micro-batch; ``write`` runs in the tasks."""

    def __init__(
        self, options: SinkOptions, sink: str, schema: StructType, fault: SinkFault | None = None
    ) -> None:
        check_schema(schema, options)
        self.options = options
        self.sink = sink
        self.fault = fault
        self._control: Control | None = None

    @property
    def control(self) -> Control:
        """The control state the tasks plan with: read once, on the driver, when the writer
        is pickled for them (the instance Spark makes to ``commit`` never reads it)."""
        if self._control is None:
            self._control = read_control(self.options, self.sink)
        return self._control

    def __getstate__(self) -> dict[str, object]:
        self.control  # noqa: B018  (read before the writer leaves for the tasks)
        return dict(self.__dict__)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        found = streaming_batch()
        if found is None:
            raise SinkError("no streaming batch id or query id in the task context")
        query, spark_batch = found
        return write_task(
            self.options, self.sink, self.control, query, spark_batch, iterator, self.fault
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        commit_batch(self.options, self.sink, batchId, messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: uncommitted rows are never visible to read-committed readers, and
        the next attempt's first ACK rolls them back."""


class DafkaBatchWriter(DataSourceArrowWriter):
    """``df.write``: one transaction, numbered after the sink's last committed batch (a
    query of one batch, with an id of its own)."""

    def __init__(
        self, options: SinkOptions, sink: str, schema: StructType, fault: SinkFault | None = None
    ) -> None:
        check_schema(schema, options)
        self.options = options
        self.sink = sink
        self.control = read_control(options, sink)
        self.query = f"write-{uuid.uuid4()}"
        self.fault = fault

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        """A task's rows; inside a streaming micro-batch (``foreachBatch``, which is how a
        query in ``update`` mode reaches this sink) as that query's micro-batch, so that a
        replay after a driver crash finds it committed (exactly once per batch)."""
        query, spark_batch = streaming_batch() or (self.query, 0)
        return write_task(
            self.options, self.sink, self.control, query, spark_batch, iterator, self.fault
        )

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        batches = {m.spark_batch for m in messages if isinstance(m, TaskCommit)}
        commit_batch(self.options, self.sink, batches.pop() if len(batches) == 1 else 0, messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """As the stream writer's: nothing to undo."""


__all__ = [
    "DafkaBatchWriter",
    "DafkaStreamWriter",
    "SinkFault",
    "TaskCommit",
    "foreach_batch",
    "sink_name",
]
