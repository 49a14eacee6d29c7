"""Typed, immutable Dafka wire messages.

One frozen dataclass per command (see ``../shared/PROTOCOL.md`` section 1 for the bytes) and
for the discovery messages of towers and beacons (section 3). Field names say what a field
*means* rather than echo the C codec's generic ``address``/``subject``:

========================  =====================  ===================================
command (ID)              ZeroMQ prefix field     other fields
========================  =====================  ===================================
Record (``M``)            ``topic``               producer, sequence, content
DirectRecord (``D``)      ``recipient``           topic, producer, sequence, content
Fetch (``F``)             ``producer``            requester, topic, sequence, count
Ack (``K``)               ``producer``            topic, sequence
Head (``H``)              ``topic``               producer, sequence
DirectHead (``E``)        ``recipient``           topic, producer, sequence
GetHeads (``G``)          ``topic``               requester
ConsumerHello (``W``)     ``store``               consumer, topics
StoreHello (``L``)        ``consumer``            store
MemberBeat (``Y``)        ``group``               member, sequence, state (frame 1)
HeadsEnd (``A``)          ``recipient``           topic, store, writer, count, stores
LogStart (``S``)          ``recipient``           topic, producer, store, sequence
========================  =====================  ===================================

MEMBER (``Y``), HEADS-END (``A``) and LOG-START (``S``) are dafka's own (consumer groups,
docs/groups.md; a store's "that is all" and log-start answers, docs/protocol.md): no C node
subscribes to those prefixes, so a C peer never receives one (its XPUB filters it out before
it is sent).

*Run epochs.* A RECORD, DIRECT-RECORD, HEAD or DIRECT-HEAD may end frame 0 with two more
u64 after the sequence: ``epoch`` (which run of a named producer wrote the record, > 0,
growing from run to run) and ``run_start`` (the sequence that run resumed at; for a record
<= its sequence). C nodes
read the fields they know and ignore the rest of frame 0, so they interoperate unchanged;
``epoch`` 0 means "not said" and is sent without the trailer (docs/guarantees.md, "A reused
sequence: run epochs").

For RECORD and HEAD the wire carries the topic twice (prefix and subject); a C peer always
sends them equal, and so do we.

Strings are ``str``: wire bytes are decoded as UTF-8 with ``surrogateescape`` so that any
byte string a C peer sends round-trips exactly and decoding never fails on encoding.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Record:
    """RECORD: a producer publishes one record of its partition to stores and consumers."""

    topic: str
    producer: str
    sequence: int
    content: bytes
    epoch: int = 0
    """The run of the partition's producer that wrote it (0: not said). See the module docstring."""
    run_start: int = 0
    """The first sequence that run published (0 when ``epoch`` is 0)."""


@dataclass(frozen=True, slots=True)
class DirectRecord:
    """DIRECT-RECORD: a record sent to one node, in answer to its FETCH."""

    recipient: str
    topic: str
    producer: str
    sequence: int
    content: bytes
    epoch: int = 0
    """As :attr:`Record.epoch`: a store answers with the epoch it holds the record under."""
    run_start: int = 0
    """As :attr:`Record.run_start`."""


@dataclass(frozen=True, slots=True)
class Fetch:
    """FETCH: ask a partition's producer and stores for ``count`` records from ``sequence``."""

    producer: str
    requester: str
    topic: str
    sequence: int
    count: int


@dataclass(frozen=True, slots=True)
class Ack:
    """ACK: a store tells a producer it stored everything up to ``sequence`` (cumulative)."""

    producer: str
    topic: str
    sequence: int
    epoch: int = 0
    """The run that wrote the record at ``sequence`` as the store holds it (0: not said): a
    producer counts only its own run's ACKs, and one naming a newer run means it is fenced."""
    run_start: int = 0
    """The first sequence of that run."""


@dataclass(frozen=True, slots=True)
class Head:
    """HEAD: a producer announces the last sequence it published."""

    topic: str
    producer: str
    sequence: int
    epoch: int = 0
    """The producer's run (0: not said), as :attr:`Record.epoch`."""
    run_start: int = 0
    """The first sequence of that run; ``sequence + 1`` while it has published nothing."""


@dataclass(frozen=True, slots=True)
class DirectHead:
    """DIRECT-HEAD: a store tells one consumer the last sequence it holds of a partition."""

    recipient: str
    topic: str
    producer: str
    sequence: int
    epoch: int = 0
    """The run that wrote the record at ``sequence`` as the store holds it (0: not said)."""
    run_start: int = 0
    """The first sequence of that run."""


@dataclass(frozen=True, slots=True)
class GetHeads:
    """GET-HEADS: a consumer asks stores for the heads of every partition of a topic.

    A named producer's resume fences its older runs with it (dafka's own, docs/protocol.md
    "Fencing resume"): ``epoch`` (> 0) is its new run's and ``partitions`` how many it
    writes, ``requester`` its partition 0 (``f"{name}.0"``); before a store answers it
    takes no record of an older run of ``f"{name}.{i}"``, ``i < partitions``, past what it
    holds. 0 and 0: not said (C's form)."""

    topic: str
    requester: str
    epoch: int = 0
    partitions: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerHello:
    """CONSUMER-HELLO: a consumer tells a store (by its reader id) which topics it reads."""

    store: str
    consumer: str
    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StoreHello:
    """STORE-HELLO: a store greets a consumer it saw subscribe to ``L`` + consumer id."""

    consumer: str
    store: str


@dataclass(frozen=True, slots=True)
class HeadsEnd:
    """HEADS-END (dafka's own): a store's "that is all" after its answer to a heads query.

    Sent by a store's reader to ``recipient`` right after the ``count`` DIRECT-HEADs it
    sent for ``topic`` in answer to a GET-HEADS or CONSUMER-HELLO (``count`` 0: it holds
    nothing of the topic, which before was silence that only a settle window could tell
    from a late answer). ``store`` is the reader's id, ``writer`` the writer's (a producer
    is greeted under both); ``stores`` is how many live stores the store knows, itself
    included, so that an asker can tell it has not heard from all of them yet."""

    recipient: str
    topic: str
    store: str
    writer: str
    count: int
    stores: int


@dataclass(frozen=True, slots=True)
class LogStart:
    """LOG-START (dafka's own): a store's answer to a FETCH below the first record it holds.

    ``sequence`` is the first sequence of (``topic``, ``producer``) the store ``store``
    (reader id) still holds - retention or a topic delete removed those before it; the
    partition's next sequence when it holds none of it any more. Sent to the FETCH's
    requester, before the DIRECT-RECORDs it can send (if any)."""

    recipient: str
    topic: str
    producer: str
    store: str
    sequence: int


@dataclass(frozen=True, slots=True)
class MemberBeat:
    """MEMBER: a consumer group member announces itself to the group's other members.

    Frame 0 is ``Y | group | 0x00 | 0x01 | member | sequence (8)``; frame 1 is the member's
    state as canonical JSON (sorted keys, no spaces): ``instance`` (its static
    ``group_instance_id``, "" if none), ``topics`` it reads, ``view`` (the member keys it
    counts as alive, itself included), ``claims`` (the partitions it reads, ``[topic,
    partition]`` pairs), ``leaving``, ``started`` (ms since the epoch, its incarnation),
    ``generation`` (grows whenever its view or the partitions it knows change), ``digest``
    (of that view and those partitions: equal digests, equal assignment) and ``acks`` (the
    generation of each member it last heard, by member id). ``sequence`` grows by one per
    beat of a member: a late beat is told from a fresh one.
    """

    group: str
    member: str
    sequence: int
    instance: str = ""
    topics: tuple[str, ...] = ()
    view: tuple[str, ...] = ()
    claims: tuple[tuple[str, str], ...] = ()
    leaving: bool = False
    started: int = 0
    generation: int = 0
    digest: str = ""
    acks: tuple[tuple[str, int], ...] = ()
    handed: tuple[tuple[str, str, int, int, int], ...] = ()
    """Recent handovers: (topic, partition, offset, index, version) of each partition this
    member gave up with a commit - where the next owner starts, without reading the
    commits (docs/groups.md, "Handover")."""
    tenure: int = 0
    """The highest tenure this member gave a take of its own or heard of (its tenure
    clock): a member that takes a partition after hearing it gives the take a higher one,
    so its commits rank above the earlier owner's (docs/groups.md, "Tenures")."""


@dataclass(frozen=True, slots=True)
class Beacon:
    """A node's beacon to a tower: frames ``B | node id | advertised host | port``."""

    node_id: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class PeerEndpoint:
    """A beacon as a tower forwards it: frames ``B | node id | tcp://host:port``.

    A secured tower (CURVE) adds a 4th frame, ``public_key``: the Z85 public key (40 ASCII
    characters) that the beacon's connection authenticated with, so that peers connect to
    ``endpoint`` expecting that key. Plaintext towers never add it (C's format).
    """

    node_id: str
    endpoint: str
    public_key: str = ""


@dataclass(frozen=True, slots=True)
class Welcome:
    """The tower XPUB's welcome: a single frame ``W`` sent to every new subscriber."""


DataMessage = (
    Record
    | DirectRecord
    | Fetch
    | Ack
    | Head
    | DirectHead
    | GetHeads
    | ConsumerHello
    | StoreHello
    | MemberBeat
    | HeadsEnd
    | LogStart
)
"""Everything that travels on the data sockets."""

DiscoveryMessage = Beacon | PeerEndpoint | Welcome
"""Everything that travels on the beacon sockets."""

Message = DataMessage | DiscoveryMessage

__all__ = [
    "Ack",
    "Beacon",
    "ConsumerHello",
    "DataMessage",
    "DirectHead",
    "DirectRecord",
    "DiscoveryMessage",
    "Fetch",
    "GetHeads",
    "Head",
    "HeadsEnd",
    "LogStart",
    "MemberBeat",
    "Message",
    "PeerEndpoint",
    "Record",
    "StoreHello",
    "Welcome",
]
