"""What a node state machine asks its driver to do, and the interface every machine offers.

The machines in :mod:`dafka.node` are pure (h11 style): they are fed decoded messages, timer
ticks and events from the driver, always with ``now`` from an injected monotonic clock (seconds,
``float``), and they never touch a socket, a file or the real clock. What they want done
accumulates in an outbox that the driver empties with :meth:`NodeMachine.take_actions` after
each *batch* of inputs: this is what lets a store turn a burst of RECORDs into one
:class:`Persist` (one write) and one ACK per partition, as the C reference does.

The driver (:mod:`dafka.transport`) executes the actions in order:

* :class:`Send` - encode and publish on the node's data PUB socket. A store has two PUB
  sockets (writer and reader); the message type says which: FETCH, ACK and GET-HEADS leave
  from the writer, DIRECT-RECORD, DIRECT-HEAD and STORE-HELLO from the reader
  (``STORE_WRITER_SENDS``);
* :class:`SendRecords` - a producer's run of RECORDs (consecutive sequences of one
  partition): exactly the ``Send(Record(...))`` of each record in order, as one action so
  that the producer's hot path builds no ``Send`` and ``Record`` per record (the driver
  sends it as it sends ``SendDirectRecords``);
* :class:`SendDirectRecords` - a run of DIRECT-RECORDs of one partition to one recipient (a
  slice of a store's FETCH reply): exactly the ``Send(DirectRecord(...))`` of each record in
  order, as one action so that the driver checks and encodes the frame-0 header once per run
  and sends the frames without a Python object per record (``messages()`` gives the
  per-record form, for simulated networks and tests);
* :class:`Subscribe` / :class:`Unsubscribe` - change the data SUB socket's prefixes. For a
  store the command ID (first byte) says which SUB: ``D``, ``M``, ``H``, ``E`` are the writer's,
  ``F``, ``G``, ``W`` the reader's (see ``STORE_WRITER_PREFIXES``);
* :class:`Deliver` - hand a *run* of consecutive records of one partition to the application
  (consumers). It is a batch, like :class:`Persist`, so that the consumer's hot path does not
  build one action object per record;
* :class:`Persist` - write to the store's log (at its end, into a hole, or after records
  that are gone: ``placement``); the driver later reports what became durable through the
  store machine's ``on_durable`` so that ACKs cover only durable records;
* :class:`KeepRuns` - record which run of its producer wrote a partition's records, and set
  an older run's records aside where a newer run resumed (store; executed in order with
  the :class:`Persist` actions around it);
* :class:`Connect` / :class:`Disconnect` / :class:`SendBeacon` - discovery
  (:class:`dafka.node.Discovery`): connect the data SUB to a peer's endpoint, drop it, and
  publish our own beacon now.

Besides :class:`NodeMachine`, a machine may offer driver events of its own. Each is a
*capability*, a typed protocol below that the machine declares by subclassing it and that a
driver tests with ``isinstance`` (never ``getattr``): :class:`RecordRuns` (runs of RECORDs,
store and consumer), :class:`DirectRecordRuns` (runs of DIRECT-RECORDs, consumer),
:class:`RunRecords` and :class:`RunDirectRecords` (runs that name their producer's run,
store and consumer),
:class:`SubscriptionNotices` (XPUB notices, store), :class:`DurableNotices` (what the driver
made durable, store), :class:`HoleNotices` (the holes of a partition's log, store),
:class:`PeerNotices` (a new peer is connected) and :class:`AttributedMessages` (each message
with the peer that sent it, producer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from dafka.protocol import Ack, DataMessage, DirectRecord, Fetch, GetHeads, Record


@dataclass(frozen=True, slots=True)
class Send:
    """Publish ``message`` on the data PUB socket."""

    message: DataMessage


@dataclass(frozen=True, slots=True)
class SendRecords:
    """Publish RECORDs: ``contents[i]`` at ``first_sequence + i`` of partition ``producer``
    of ``topic``. Same wire messages, same order as one ``Send(Record(...))`` per record
    (see :meth:`messages`)."""

    topic: str
    producer: str
    first_sequence: int
    contents: Sequence[bytes]
    epoch: int = 0
    """The producer's run (``Record.epoch``: 0, none said), the same for every record."""
    run_start: int = 0

    def messages(self) -> list[Record]:
        """The run as one :class:`Record` per record, in order."""
        topic, producer, first = self.topic, self.producer, self.first_sequence
        epoch, start = self.epoch, self.run_start
        return [
            Record(topic, producer, first + i, c, epoch, start) for i, c in enumerate(self.contents)
        ]


@dataclass(frozen=True, slots=True)
class SendDirectRecords:
    """Publish DIRECT-RECORDs to ``recipient``: ``contents[i]`` at ``first_sequence + i`` of
    partition ``producer`` of ``topic``. Same wire messages, same order as one
    ``Send(DirectRecord(...))`` per record (see :meth:`messages`)."""

    recipient: str
    topic: str
    producer: str
    first_sequence: int
    contents: tuple[bytes, ...]
    epoch: int = 0
    """The run the records belong to (``DirectRecord.epoch``), the same for all of them."""
    run_start: int = 0

    def messages(self) -> list[DirectRecord]:
        """The run as one :class:`DirectRecord` per record, in order."""
        recipient, topic, producer, first = (
            self.recipient,
            self.topic,
            self.producer,
            self.first_sequence,
        )
        epoch, start = self.epoch, self.run_start
        return [
            DirectRecord(recipient, topic, producer, first + i, content, epoch, start)
            for i, content in enumerate(self.contents)
        ]


@dataclass(frozen=True, slots=True)
class Subscribe:
    """Add ``prefix`` (command ID + topic bytes) to the data SUB socket."""

    prefix: bytes


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    """Remove ``prefix`` from the data SUB socket."""

    prefix: bytes


@dataclass(frozen=True, slots=True)
class Deliver:
    """Hand records to the application, in order and exactly once per consumer.

    ``contents[i]`` is the record at sequence ``first_sequence + i`` of partition ``producer``
    of ``topic``. One action covers a run of consecutive records received in one batch of
    inputs; runs of one partition follow each other in sequence order, without overlap,
    except where the application moved the position (``seek``) or records removed by
    retention were skipped (counted in the consumer's ``skipped_records``).
    """

    topic: str
    producer: str
    first_sequence: int
    contents: tuple[bytes, ...]


Placement = Literal["append", "fill", "after_gap"]
"""Where a :class:`Persist` goes: ``"append"`` continues the log at its end; ``"fill"`` goes
into the hole of the log that starts at ``first_sequence`` (records a peer still held);
``"after_gap"`` continues the log at ``first_sequence`` although the sequences between its end
and there are missing: no peer holds them, the log keeps them as a hole (``dafka.storage``)."""


@dataclass(frozen=True, slots=True)
class Persist:
    """Write ``contents`` at sequences ``first_sequence, first_sequence + 1, ...``."""

    topic: str
    producer: str
    first_sequence: int
    contents: tuple[bytes, ...]
    placement: Placement = "append"


@dataclass(frozen=True, slots=True)
class KeepRuns:
    """Record the runs of a partition (``runs``: (epoch, first sequence) pairs, ascending)
    and, when ``supersede_from`` is set, first set the log's records from that sequence on
    aside: a newer run of the producer resumed there, so they are an older run's records
    that were never acknowledged where the newer run's belong (docs/guarantees.md, "A
    reused sequence: run epochs"). The driver keeps what it sets aside (quarantine) and
    logs it; it never deletes it."""

    topic: str
    producer: str
    runs: tuple[tuple[int, int], ...]
    supersede_from: int | None = None


@dataclass(frozen=True, slots=True)
class Connect:
    """Connect the data SUB socket to a newly discovered peer's ``endpoint``."""

    node_id: str
    endpoint: str


@dataclass(frozen=True, slots=True)
class Disconnect:
    """Disconnect the data SUB socket from ``endpoint`` (the peer expired or moved)."""

    node_id: str
    endpoint: str


@dataclass(frozen=True, slots=True)
class SendBeacon:
    """Publish our beacon (``B | id | host | port``) to the towers now."""


Action = (
    Send
    | SendRecords
    | SendDirectRecords
    | Subscribe
    | Unsubscribe
    | Deliver
    | Persist
    | KeepRuns
    | Connect
    | Disconnect
    | SendBeacon
)

STORE_WRITER_PREFIXES = frozenset(b"DMHE")
"""Command IDs subscribed on a store's writer SUB; the rest (F, G, W) are the reader's.

``E`` (DIRECT-HEAD to the writer id) is ours: the writer's own GET-HEADS are answered there."""

STORE_WRITER_SENDS: tuple[type[DataMessage], ...] = (Fetch, Ack, GetHeads)
"""Message types a store sends from its writer PUB; the others leave from its reader PUB."""


class NodeMachine(Protocol):
    """The surface every node machine offers its driver."""

    def on_message(self, message: DataMessage, now: float) -> None:
        """Feed one decoded message received on the data SUB socket."""

    def on_timer(self, now: float) -> None:
        """Run whatever timers are due at ``now``."""

    def next_deadline(self) -> float | None:
        """When ``on_timer`` should next be called (monotonic seconds), or None."""

    def take_actions(self) -> list[Action]:
        """Return and clear the outbox."""


@runtime_checkable
class RecordRuns(Protocol):
    """Takes consecutive RECORDs of one partition in one call (the driver's run grouping)."""

    def on_records(
        self, topic: str, producer: str, first_sequence: int, contents: Sequence[bytes], now: float
    ) -> None:
        """``contents[i]`` is RECORD ``first_sequence + i``: exactly what feeding each one
        to ``on_message`` in order would do."""


@runtime_checkable
class RunRecords(Protocol):
    """Takes a run of RECORDs that name their producer's run (``Record.epoch`` > 0): the
    store, which keeps the runs apart (docs/guarantees.md, "A reused sequence: run
    epochs"). A machine without it gets such runs through :class:`RecordRuns`, the epoch
    left out."""

    def on_run_records(
        self,
        topic: str,
        producer: str,
        first_sequence: int,
        contents: Sequence[bytes],
        epoch: int,
        run_start: int,
        now: float,
    ) -> None:
        """``contents[i]`` is RECORD ``first_sequence + i`` of run ``epoch`` (which started
        at ``run_start``): exactly what feeding each one to ``on_message`` does."""


@runtime_checkable
class RunDirectRecords(Protocol):
    """Takes a run of DIRECT-RECORDs that name their producer's run (the consumer). A
    machine without it gets such runs through :class:`DirectRecordRuns`, the epoch left
    out."""

    def on_run_direct_records(
        self,
        recipient: str,
        topic: str,
        producer: str,
        first_sequence: int,
        contents: Sequence[bytes],
        epoch: int,
        run_start: int,
        now: float,
    ) -> None:
        """As :meth:`RunRecords.on_run_records`, for a FETCH reply to ``recipient``."""


@runtime_checkable
class DirectRecordRuns(Protocol):
    """Takes consecutive DIRECT-RECORDs of one partition to one recipient in one call."""

    def on_direct_records(
        self,
        recipient: str,
        topic: str,
        producer: str,
        first_sequence: int,
        contents: Sequence[bytes],
        now: float,
    ) -> None:
        """As :meth:`RecordRuns.on_records`, for a FETCH reply to ``recipient``."""


@runtime_checkable
class SubscriptionNotices(Protocol):
    """Sees peers (un)subscribe on its XPUB (a store greets consumers with STORE-HELLO)."""

    def on_subscription(self, prefix: bytes, subscribed: bool, now: float) -> None:
        """``prefix`` without ZeroMQ's 0x01/0x00 byte; ``subscribed`` False: it left."""


@runtime_checkable
class DurableNotices(Protocol):
    """Is told what the driver made durable after its :class:`Persist` actions."""

    def on_durable(self, topic: str, producer: str, sequence: int, now: float) -> None:
        """Everything up to ``sequence`` of the partition is durable."""


@runtime_checkable
class HoleNotices(Protocol):
    """Is told the holes of a partition's log whenever they may have changed (damage found,
    a hole filled, records recorded as gone): the driver's storage is the truth."""

    def on_holes(
        self, topic: str, producer: str, holes: Sequence[tuple[int, int]], now: float
    ) -> None:
        """``holes``: every ``[first, end)`` range below the head the log does not hold."""


@runtime_checkable
class PeerNotices(Protocol):
    """Is told when the driver connected to a new peer."""

    def on_peer(self, node_id: str, now: float) -> None:
        """``node_id``'s endpoint is now connected."""


@runtime_checkable
class AttributedMessages(Protocol):
    """Must know which peer sent each message (a producer: ACKs count only from the stores
    that greeted it; ../shared/PROTOCOL.md: an ACK names no store).

    ZeroMQ does not say who sent a message, but it delivers on the socket connected to the
    sender: the driver reads each peer on a socket of its own and feeds what it reads there
    to :meth:`on_message_from` (never to ``on_message``), with the peer's node id from its
    beacon. ``rejected`` grows by one per message refused for its sender or its content,
    ``last_rejection`` says why: the driver counts and logs them, rate-limited."""

    rejected: int
    last_rejection: str

    def on_message_from(self, message: DataMessage, now: float, sender: str) -> None:
        """``message`` as ``on_message`` takes it, read from ``sender``'s socket."""


__all__ = [
    "STORE_WRITER_PREFIXES",
    "STORE_WRITER_SENDS",
    "Action",
    "AttributedMessages",
    "Connect",
    "Deliver",
    "DirectRecordRuns",
    "Disconnect",
    "DurableNotices",
    "HoleNotices",
    "KeepRuns",
    "NodeMachine",
    "PeerNotices",
    "Persist",
    "Placement",
    "RecordRuns",
    "RunDirectRecords",
    "RunRecords",
    "Send",
    "SendBeacon",
    "SendDirectRecords",
    "SendRecords",
    "Subscribe",
    "SubscriptionNotices",
    "Unsubscribe",
]
