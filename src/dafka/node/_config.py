"""Settings of the node machines: small frozen dataclasses, times in seconds.

The C reference keeps its settings in a zconfig tree with millisecond values; each field notes
the C key it stands for (``../shared/PROTOCOL.md`` section 6) so that a loader can map a C
configuration file onto these classes (divide milliseconds by 1000). Fields without a C key are
ours: they bound memory and make catch-up robust where the C nodes stall.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dafka.errors import ConfigError
from dafka.protocol import MAX_MESSAGE_BYTES, message_limit_problem

OffsetReset = Literal["earliest", "latest"]
BackpressurePolicy = Literal["block", "error"]
AcksFrom = Literal["stores", "any"]


def _message_limit(owner: str, value: object) -> None:
    problem = message_limit_problem(value)
    if problem is not None:
        raise ConfigError(f"{owner} max_message_bytes {problem}")


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ConfigError(f"{name} must be > 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    """How a consumer or a store writer fetches what it missed (no C keys: C never retries).

    ``window``: records asked for per FETCH; the next window is asked for as soon as the
    previous one has arrived, until the known head is reached - or, with ``pipeline``, as
    soon as half of it has arrived (the FETCH for ``[fetch_end, fetch_end + window)`` is sent
    to the same replier while the rest of the current window is on its way, so that the
    replier is not idle between windows). ``retry_initial``: how long a
    FETCH may go without progress before it is sent again; each retry without progress doubles
    the wait up to ``retry_max``, and any progress resets it.
    """

    window: int = 10_000
    retry_initial: float = 0.5
    retry_max: float = 5.0
    pipeline: bool = True

    def __post_init__(self) -> None:
        _positive("fetch window", self.window)
        _positive("fetch retry_initial", self.retry_initial)
        if self.retry_max < self.retry_initial:
            raise ConfigError("fetch retry_max must be >= retry_initial")


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """Producer settings.

    * ``head_interval`` - ``producer/head_interval`` (C: 1000 ms): HEAD period once there is a
      last sequence.
    * ``min_stores`` - the README's "minimum number of stores" (never implemented in C): a
      record is released once this many *distinct* stores have ACKed it. See docs/nodes.md:
      above 1 the driver must tell ACK senders apart (``ProducerMachine.on_ack``).
    * ``max_unacked_records`` / ``max_unacked_bytes`` - bound on the records held until ACKed
      (C holds them without limit). ``backpressure`` says what the *driver* does when
      ``publish`` raises :class:`BackpressureError`: ``"block"`` waits until
      ``can_publish()`` (ACKs arrive), ``"error"`` lets the error through to the caller.
    * ``max_message_bytes`` - the largest RECORD content a driver publishes (the cluster-wide
      limit, ``dafka.protocol.MAX_MESSAGE_BYTES`` by default): a driver refuses a larger one
      in the caller's thread (``PartitionProducer.publish``); the machine does not look.
    * ``acks_from`` - whose ACKs count (no C key: C takes any). ``"stores"``: only an ACK
      the driver attributes to a store that greeted this producer (STORE-HELLO naming the
      store's writer id; see ``ProducerMachine`` and docs/nodes.md). ``"any"``: every ACK,
      attributed or not - for clusters with C stores, whose writers never introduce
      themselves; a forged or stray ACK then marks records stored. Either way an ACK counts
      only up to the last sequence this producer has sent.
    """

    head_interval: float = 1.0
    min_stores: int = 1
    max_unacked_records: int = 1_000_000
    max_unacked_bytes: int = 512 * 1024 * 1024
    backpressure: BackpressurePolicy = "block"
    max_message_bytes: int = MAX_MESSAGE_BYTES
    acks_from: AcksFrom = "stores"

    def __post_init__(self) -> None:
        _message_limit("producer", self.max_message_bytes)
        _positive("producer head_interval", self.head_interval)
        _positive("producer min_stores", self.min_stores)
        _positive("producer max_unacked_records", self.max_unacked_records)
        _positive("producer max_unacked_bytes", self.max_unacked_bytes)
        if self.backpressure not in ("block", "error"):
            raise ConfigError(
                f"producer backpressure must be 'block' or 'error', got {self.backpressure!r}"
            )
        if self.acks_from not in ("stores", "any"):
            raise ConfigError(
                f"producer acks_from must be 'stores' or 'any', got {self.acks_from!r}"
            )


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """Consumer settings.

    * ``offset_reset`` - ``consumer/offset/reset`` (C default ``latest``): where a partition
      with no explicit start position begins. ``latest`` starts after the first head or record
      seen, ``earliest`` at sequence 0.
    * ``fetch`` - gap filling and catch-up (:class:`FetchPolicy`).
    * ``heads_refresh`` - period of GET-HEADS for every subscribed or assigned topic after the
      one sent at subscription (None: never). Without it a consumer that lost a partition's
      last records never hears of them once the producer is gone (no more HEADs); C has no
      such refresh.
    * ``skip_unavailable_after`` - FETCH retries in a row answered only from beyond the gap
      after which the consumer skips to the first record still available (retention removed
      the rest, or damage no store could repair; counted in ``skipped_records``). This is
      how a consumer knows no store holds them: the client turns a skip past a position it
      knows into ``DataLossError`` (``fail_on_data_loss``). None: wait forever, as C does.
    * ``latest_settle`` - seconds after subscribing during which a partition first heard of
      counts as existing at start (``latest`` reads it from its head on); one first heard of
      later is new and read from its beginning. Also the least time before ``at_end``.
    * ``single_store_fetch`` - address each FETCH to one store (``requester@store``, see
      ``dafka.node._stores``) instead of letting every store answer it; ``store_suspect_time``
      - how long a store whose FETCH went unanswered is passed over.
    """

    offset_reset: OffsetReset = "latest"
    fetch: FetchPolicy = FetchPolicy()
    heads_refresh: float | None = 10.0
    skip_unavailable_after: int | None = 10
    latest_settle: float = 1.0
    single_store_fetch: bool = True
    store_suspect_time: float = 10.0

    def __post_init__(self) -> None:
        if not self.latest_settle >= 0:
            raise ConfigError(f"consumer latest_settle must be >= 0, got {self.latest_settle!r}")
        _positive("consumer store_suspect_time", self.store_suspect_time)
        if self.skip_unavailable_after is not None:
            _positive("consumer skip_unavailable_after", self.skip_unavailable_after)
        if self.heads_refresh is not None:
            _positive("consumer heads_refresh", self.heads_refresh)
        if self.offset_reset not in ("earliest", "latest"):
            raise ConfigError(
                f"consumer/offset/reset must be 'earliest' or 'latest', got {self.offset_reset!r}"
            )


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Store settings (the C ``store/db`` path belongs to the storage engine, not here).

    * ``fetch`` - how the writer fills gaps and replicates from producers and other stores.
    * ``max_fetch_reply`` - most DIRECT-RECORDs the reader sends for one FETCH (bounds the
      memory of one answer; our consumers and writers fetch again for the rest). The default
      matches the largest window a C consumer asks for.
    * ``heads_refresh`` - period of the writer's GET-HEADS for every topic it holds, answered
      by the other stores' readers (None: never). It is how a store that lost a partition's
      tail learns of it after the producer is gone; a restarted store sends them at once.
    * ``fetch_reply_slice`` - DIRECT-RECORDs a FETCH reply sends per runner turn (replies
      stream); ``fetch_reply_wait`` - how long a reply whose range goes on past what is
      durable waits for the next of its records to become durable before it ends.
    * ``append_retry_initial`` / ``append_retry_max`` - after a failed append (a full disk)
      the partition takes nothing for this long, doubling per failure in a row up to the
      max, then fetches what it dropped and tries again.
    * ``skip_unavailable_after`` - FETCH retries in a row answered only from beyond the gap
      (by the producer and every other store) after which the writer records the missing
      sequences as a hole of its log and goes on from the first one still available
      (``holes_recorded``); it keeps trying to fill the hole. None: wait forever (the log
      then holds nothing past the gap).
    * ``hole_retry_max`` - holes of the log (damage found by a read or the scrub, records
      recorded as gone) are fetched from the peers like any gap, but their retries back off
      up to this (a hole no peer can fill costs one small FETCH per this period).
    * ``max_message_bytes`` - the largest RECORD content the store keeps (the cluster-wide
      limit): a larger one (a foreign producer's) is kept as a drop notice instead, counted
      and logged by the store's driver (``dafka.server.StorePersistence``).
    * ``max_partitions`` - the most partitions the store tracks (those it holds count): a
      RECORD or HEAD of a new partition beyond is refused (nothing stored, no ACK) and
      counted (``partitions_refused``). Each partition costs memory and a directory; this
      bounds what one peer inventing partitions can cost (limits against strangers,
      docs/nodes.md).
    * ``ask_topics`` - topics whose heads the writer asks the others for even when it holds
      nothing of them (the control topic of topic deletes: a store that was down during a
      delete learns of its tombstone when it comes back, docs/storage.md).
    * ``peers_settle`` - seconds after its start before the reader ends its heads answers
      with HEADS-END ("that is all", docs/protocol.md), whose count of live stores askers
      trust: the time to hear every live store's beacon and subscriptions (two beacon
      intervals; None: 2 s, two default beacon intervals, and ``dafka.server.StoreNode``
      makes it two of its own). Before, askers fall back to their settle window, as with a
      C store.
    * ``stores_remembered`` - seconds a store that left (its ``W`` subscription ended) is
      still counted in HEADS-END: askers then wait for its answer or their settle window
      rather than trust the others' lower heads (a store paused for a moment, or cut off).
    * ``max_fence_ahead`` - seconds a fencing GET-HEADS' epoch (a new run's start, wall
      clock ms) may be past this store's wall clock: a later one is refused (counted
      ``fences_refused``, logged; the heads are answered), so that a fence naming run
      2**64-1 cannot fence a producer's every later run (docs/guarantees.md, "Fencing
      resume"). Hosts kept in time by NTP differ by far less.
    """

    fetch: FetchPolicy = FetchPolicy()
    max_fetch_reply: int = 100_000
    heads_refresh: float | None = 10.0
    fetch_reply_slice: int = 2048
    fetch_reply_wait: float = 1.0
    append_retry_initial: float = 0.25
    append_retry_max: float = 5.0
    skip_unavailable_after: int | None = 10
    hole_retry_max: float = 30.0
    max_message_bytes: int = MAX_MESSAGE_BYTES
    max_partitions: int = 100_000
    ask_topics: tuple[str, ...] = ()
    peers_settle: float | None = None
    stores_remembered: float = 60.0
    max_fence_ahead: float = 60.0

    def __post_init__(self) -> None:
        _message_limit("store", self.max_message_bytes)
        if not self.max_fence_ahead >= 0:
            raise ConfigError(f"store max_fence_ahead must be >= 0, got {self.max_fence_ahead!r}")
        if self.peers_settle is not None and not self.peers_settle >= 0:
            raise ConfigError(f"store peers_settle must be >= 0, got {self.peers_settle!r}")
        _positive("store stores_remembered", self.stores_remembered)
        _positive("store max_partitions", self.max_partitions)
        _positive("store append_retry_initial", self.append_retry_initial)
        if self.skip_unavailable_after is not None:
            _positive("store skip_unavailable_after", self.skip_unavailable_after)
        if self.hole_retry_max < self.fetch.retry_initial:
            raise ConfigError(
                f"store hole_retry_max ({self.hole_retry_max}) must be >= the fetch "
                f"retry_initial ({self.fetch.retry_initial})"
            )
        if self.append_retry_max < self.append_retry_initial:
            raise ConfigError(
                f"store append_retry_max ({self.append_retry_max}) must be >= "
                f"append_retry_initial ({self.append_retry_initial})"
            )
        _positive("store fetch_reply_slice", self.fetch_reply_slice)
        _positive("store fetch_reply_wait", self.fetch_reply_wait)
        if self.heads_refresh is not None:
            _positive("store heads_refresh", self.heads_refresh)
        _positive("store max_fetch_reply", self.max_fetch_reply)


@dataclass(frozen=True, slots=True)
class DiscoveryConfig:
    """Beacon settings: ``beacon/interval`` (C: 1000 ms) and ``beacon/timeout`` (C: 4000 ms)."""

    interval: float = 1.0
    timeout: float = 4.0
    listen_first: float = 0.0
    """Seconds to listen to the others' beacons (and connect to them) before the first beacon
    of our own: a watcher's subscriptions are then in place on every peer by the time the
    peers discover it and greet it (a store sends GET-HEADS for all its topics to a new peer
    at once; before our SUB reached it, that question would be lost)."""
    max_peers: int = 1024
    """The most peer endpoints tracked (and connected to) at once; a new id beyond is refused
    and counted, a known id's new endpoint replaces its own least recently heard one
    (``Discovery``: limits against strangers, docs/nodes.md)."""
    new_peers_per_interval: int = 64
    """New ids admitted at their first beacon per ``interval``; beyond (a flood of fresh
    ids), a new id is admitted only at its second beacon within two intervals."""
    max_probation: int = 65_536
    """The most once-heard ids remembered while waiting for their second beacon."""

    def __post_init__(self) -> None:
        _positive("beacon/interval", self.interval)
        _positive("beacon/timeout", self.timeout)
        for key in ("max_peers", "new_peers_per_interval", "max_probation"):
            value = getattr(self, key)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"{key} must be an int >= 1, got {value!r}")
        if not 0 <= self.listen_first <= 3600:
            raise ConfigError(f"listen_first must be 0..3600 seconds, got {self.listen_first!r}")


__all__ = [
    "BackpressurePolicy",
    "ConsumerConfig",
    "DiscoveryConfig",
    "FetchPolicy",
    "OffsetReset",
    "ProducerConfig",
    "StoreConfig",
]
