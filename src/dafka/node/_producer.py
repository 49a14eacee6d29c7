"""The producer: owns one partition (named by its id) of one topic.

Theory. Every published record gets the next sequence (from 0, or from where a restarted
producer left off) and goes out as a RECORD to stores and consumers. The producer keeps each
record until enough stores have ACKed it, so that it can answer FETCHes from consumers and
stores that missed it; ACKs are cumulative. HEAD (the last sequence) goes out every
``head_interval`` so that readers who missed the tail notice.

Held records are a list with a dead prefix (``_skip``) compacted now and then, so that
releasing is O(1) amortised and a FETCH reads an exact slice: the record sent for sequence
``s`` is always the one published as ``s`` (the C producer sent wrong content after a
partial ACK).

Whose ACKs count. An ACK releases records: believing a forged or stray one drops records
no store holds. ACKs carry no store identity on the wire (PROTOCOL.md section 1), so the
machine is an :class:`~dafka.node.actions.AttributedMessages`: the driver reads each peer on
a socket of its own and names the sender (a store's ACK comes from its *writer* id). Stores
introduce themselves: it subscribes to ``L`` + its id, and a store's reader that sees it
subscribe to its ACKs (``K`` + id) sends STORE-HELLO naming the store's writer
(``StoreMachine.on_subscription``). With ``acks_from="stores"`` (the default) an ACK counts
only from a sender that greeted it so; with ``"any"`` (C stores, which never introduce their
writer) every ACK does. Either way an ACK counts only up to the last sequence sent: one
beyond it is no store's record of this run (a forgery, or a store holding what an earlier
run of this id sent past our resume point). Refused ACKs are counted (``acks_from_unknown``,
``acks_beyond_sent``) and reported through ``rejected`` / ``last_rejection``, which the
driver logs, rate-limited. A greeting can be lost (a PUB drops what exceeds its high-water
mark; a simulated network drops anything): so an ACK refused from a sender it does not know
makes the producer ask the stores to greet it again - it unsubscribes and subscribes to ``L``
+ its id, which every store sees as a new notice - at most once per ``head_interval``. A
store not yet known then introduces itself, and its next ACK counts (stores ACK again on each
HEAD). A store's greeting comes from its reader and its ACKs from its writer, two sockets,
so its first ACK can overtake its greeting: an ACK from a named sender not yet greeted is
*held* (the highest per sender, at most ``MAX_STORES`` senders) for one ``head_interval``
without being refused, and counts the moment that sender greets; only after that grace is
an ACK from it refused and reported (an ordinary produce logs no refusal). Authenticating
peers is another matter: a peer that greets as a store is believed (issue 18 is about what
the producer believes, not who may speak).

``min_stores`` counts distinct senders of accepted ACKs through :meth:`ProducerMachine.on_ack`
(its ``store`` argument); ACKs without a sender (``acks_from="any"`` with a driver that does
not attribute) count as one store, so a larger value never releases records early. See
docs/nodes.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat

from dafka.node._config import ProducerConfig
from dafka.node._errors import BackpressureError, check_name, check_sequence
from dafka.node.actions import (
    Action,
    AttributedMessages,
    Send,
    SendRecords,
    Subscribe,
    Unsubscribe,
)
from dafka.protocol import (
    Ack,
    DataMessage,
    DirectHead,
    DirectRecord,
    Fetch,
    GetHeads,
    Head,
    Record,
    StoreHello,
    constructor,
)

_COMPACT_AT = 4096
MAX_STORES = 1024
"""Stores remembered per partition: greetings beyond it are dropped (a peer greeting under
ever new ids must not grow the producer without bound)."""

# A frozen dataclass ``__init__`` sets each field through ``object.__setattr__``: for the
# two objects built per published record that was a third of ``publish``. The values are
# the machine's own (checked at construction) or the application's content, which the
# encoder still checks, so the unchecked constructors lose nothing.
_new_send = constructor(Send)
_new_send_records = constructor(SendRecords)
_new_record = constructor(Record)
_new_direct_record = constructor(DirectRecord)


@dataclass(frozen=True, slots=True)
class ProducerStatistics:
    """Counters of a :class:`ProducerMachine` (a snapshot)."""

    published: int
    published_bytes: int
    unacked_records: int
    unacked_bytes: int
    acked_through: int
    acks_received: int
    heads_sent: int
    fetches_answered: int
    records_resent: int
    get_heads_answered: int
    dropped_messages: int
    stores_known: int
    """Stores that greeted this producer (their ACKs count with ``acks_from="stores"``)."""
    acks_from_unknown: int
    """ACKs refused: their sender is not a store that greeted us (or is not known at all)."""
    acks_beyond_sent: int
    """ACKs refused: beyond the last sequence this producer sent."""
    acks_other_run: int
    """ACKs not counted: they name another run of this producer (docs/guarantees.md,
    "A fenced producer")."""
    fenced_by: tuple[int, int] | None
    """The newer run ``(epoch, run_start)`` of this partition an ACK named: this run is
    fenced and its held records are never reported delivered; None while not fenced."""


class ProducerMachine(AttributedMessages):
    """Pure state machine of a producer; see the module docstring and docs/nodes.md."""

    def __init__(
        self,
        topic: str,
        producer_id: str,
        config: ProducerConfig | None = None,
        *,
        next_sequence: int = 0,
        now: float | None = None,
        epoch: int = 0,
    ) -> None:
        """``next_sequence``: where a restarted producer (same id) continues. Its earlier
        records are not held here: stores answer FETCHes for them. A restarted producer
        announces its HEAD at once; ``now`` (the construction time) lets it schedule the
        following HEADs before its first publish.

        ``epoch`` (> 0): this run of a named producer, greater than any earlier run's. Every
        RECORD, FETCH answer, HEAD and heads answer then names it and ``next_sequence`` (the
        run's start), so that stores replace an earlier run's unacknowledged records at the
        sequences this run reuses and refuse that run's records from here on
        (docs/guarantees.md, "A reused sequence: run epochs"). 0: none said (C's form).
        """
        check_sequence("next_sequence", next_sequence)
        check_sequence("epoch", epoch)
        self.epoch = epoch
        self.run_start = next_sequence if epoch else 0
        """The first sequence of this run, as its records say it (0 without an epoch)."""
        topic_raw = check_name("topic", topic)
        self.topic = topic
        self.producer_id = producer_id
        self.config = config or ProducerConfig()
        self._out: list[Action] = []
        self._next = next_sequence
        self._records: list[bytes] = []
        self._skip = 0
        self._first_held = next_sequence
        self._held_bytes = 0
        self._acked_by: dict[str | None, int] = {}
        self._head_due: float | None = None
        self._published = 0
        self._published_bytes = 0
        self._acks = 0
        self._heads = 0
        self._fetches = 0
        self._resent = 0
        self._get_heads = 0
        self._dropped = 0
        self._stores: set[str] = set()
        self._any_sender = self.config.acks_from == "any"
        self._acks_unknown = 0
        self._acks_beyond = 0
        self._acks_other_run = 0
        self.fenced_by: tuple[int, int] | None = None
        """The newer run ``(epoch, run_start)`` that fenced this one (see ``on_ack``)."""
        self._regreet_at = float("-inf")
        self._early: dict[str, tuple[float, int]] = {}  # ungreeted sender: (first, highest)
        self.rejected = 0
        self.last_rejection = ""
        pid = check_name("producer id", producer_id)
        out = self._out
        out.append(Subscribe(b"K" + pid))
        out.append(Subscribe(b"F" + pid))
        self._hello_prefix = b"L" + pid
        out.append(Subscribe(self._hello_prefix))  # stores greet us: whose ACKs count
        # C producers ignore GET-HEADS; we answer them (PROTOCOL.md section 5).
        out.append(Subscribe(b"G" + topic_raw))
        if next_sequence > 0:
            self._send_head()
            if now is not None:
                self._head_due = now + self.config.head_interval

    # -- application side ------------------------------------------------------------------

    @property
    def next_sequence(self) -> int:
        """The sequence the next published record gets."""
        return self._next

    @property
    def unacked(self) -> int:
        """How many records are held until stores ACK them."""
        return len(self._records) - self._skip

    def can_publish(self, size: int = 0) -> bool:
        """Whether a record of ``size`` bytes would be accepted now (see BackpressureError)."""
        held = len(self._records) - self._skip
        if held == 0:
            return True
        config = self.config
        return (
            held < config.max_unacked_records
            and self._held_bytes + size <= config.max_unacked_bytes
        )

    def publish(self, content: bytes, now: float) -> int:
        """Publish one record; returns its sequence. Raises :class:`BackpressureError` when full."""
        records = self._records
        held = len(records) - self._skip
        size = len(content)
        if held and (
            held >= self.config.max_unacked_records
            or self._held_bytes + size > self.config.max_unacked_bytes
        ):
            raise BackpressureError(held, self._held_bytes)
        sequence = self._next
        self._next = sequence + 1
        records.append(content)
        self._held_bytes += size
        self._published += 1
        self._published_bytes += size
        self._out.append(
            _new_send(
                _new_record(
                    self.topic, self.producer_id, sequence, content, self.epoch, self.run_start
                )
            )
        )
        if self._head_due is None:
            self._head_due = now + self.config.head_interval
        return sequence

    def publish_many(self, contents: list[bytes], now: float) -> int:
        """Publish a prefix of ``contents`` as consecutive records: as many as the bounds
        admit one by one, exactly what that many :meth:`publish` calls would publish before
        the first :class:`BackpressureError`. Returns how many (0: none fitted; this never
        raises). The first gets :attr:`next_sequence` as it was before the call.

        One :class:`SendRecords` action for them all: per record only an append, no action
        or message object (the producer's unbatched hot path). ``contents`` is handed over:
        the action keeps it, the caller must not change it."""
        count = len(contents)
        if not count:
            return 0
        records = self._records
        held = len(records) - self._skip
        config = self.config
        size = sum(map(len, contents))
        if (
            held + count > config.max_unacked_records
            or self._held_bytes + size > config.max_unacked_bytes
        ):
            count = self._fitting(contents, held)
            if not count:
                return 0
            contents = contents[:count]
            size = sum(map(len, contents))
        first = self._next
        self._next = first + count
        records += contents
        self._held_bytes += size
        self._published += count
        self._published_bytes += size
        self._out.append(
            _new_send_records(
                self.topic, self.producer_id, first, contents, self.epoch, self.run_start
            )
        )
        if self._head_due is None:
            self._head_due = now + config.head_interval
        return count

    def _fitting(self, contents: list[bytes], held: int) -> int:
        """How many of ``contents`` successive :meth:`publish` calls would accept."""
        config = self.config
        held_bytes = self._held_bytes
        count = 0
        for content in contents:
            if held and (
                held >= config.max_unacked_records
                or held_bytes + len(content) > config.max_unacked_bytes
            ):
                break
            held += 1
            held_bytes += len(content)
            count += 1
        return count

    # -- NodeMachine -----------------------------------------------------------------------

    def on_message(self, message: DataMessage, now: float) -> None:
        """A message whose sender the driver does not know (an ACK then counts only with
        ``acks_from="any"``)."""
        if type(message) is Ack:
            self.on_ack(message, now)
        elif type(message) is Fetch:
            self._on_fetch(message)
        elif type(message) is GetHeads:
            self._on_get_heads(message)
        elif type(message) is StoreHello:
            self._on_store_hello(message, now)
        else:
            self._dropped += 1
        if self._head_due is None and self._next > 0:
            self._head_due = now + self.config.head_interval

    def on_message_from(self, message: DataMessage, now: float, sender: str) -> None:
        """A message read from ``sender``'s socket: an ACK is that store's."""
        if type(message) is Ack:
            self.on_ack(message, now, sender)
        else:
            self.on_message(message, now)

    @property
    def stores(self) -> frozenset[str]:
        """The stores (writer ids) that greeted this producer."""
        return frozenset(self._stores)

    def on_ack(self, ack: Ack, now: float, store: str | None = None) -> None:
        """An ACK, with the store that sent it when the driver can tell (see module doc)."""
        if ack.producer != self.producer_id or ack.topic != self.topic:
            self._dropped += 1  # prefix leak or a stray ACK
            return
        if not self._any_sender and (store is None or store not in self._stores):
            if store is not None and self._hold_early(store, ack.sequence, now):
                return
            self._acks_unknown += 1
            self.rejected += 1
            self.last_rejection = (
                f"ACK of {ack.topic}/{ack.producer} through {ack.sequence} from "
                f"{'an unknown sender' if store is None else repr(store)}: "
                "not a store that greeted this producer"
            )
            if store is not None and now >= self._regreet_at:  # its greeting may be lost
                self._regreet_at = now + self.config.head_interval
                self._out += [Unsubscribe(self._hello_prefix), Subscribe(self._hello_prefix)]
            return
        if ack.epoch != self.epoch and ack.epoch and self.epoch:
            self._on_other_run(ack, store)
            return
        if ack.sequence >= self._next:
            self._acks_beyond += 1
            self.rejected += 1
            self.last_rejection = (
                f"ACK of {ack.topic}/{ack.producer} through {ack.sequence} from "
                f"{'an unknown sender' if store is None else repr(store)}: beyond the last "
                f"sequence sent ({self._next - 1}); a store holding more than this run sent "
                "means it resumed behind that store's head"
            )
            return
        self._acks += 1
        sequence = ack.sequence
        acked_by = self._acked_by
        if sequence <= acked_by.get(store, -1):
            return
        acked_by[store] = sequence
        needed = self.config.min_stores
        if needed == 1:
            through = max(acked_by.values())
        elif len(acked_by) < needed:
            return
        else:
            through = sorted(acked_by.values(), reverse=True)[needed - 1]
        self._release_through(through)

    def _on_other_run(self, ack: Ack, store: str | None) -> None:
        """An ACK naming another run of this producer is never counted: the record the
        store acknowledged at that sequence is that run's, not ours. An older run's is a
        late one (below our start, or one the store refuses from our start on); a newer
        run's means a newer run of this producer is alive and stores take its records over
        ours: this run is fenced (Kafka's ProducerFencedException) - counted, and
        ``fenced_by`` names the newer run so that the client fails instead of reporting
        our held records delivered."""
        self._acks_other_run += 1
        if ack.epoch < self.epoch:
            return
        if self.fenced_by is None or ack.epoch > self.fenced_by[0]:
            self.fenced_by = (ack.epoch, ack.run_start)
        self.rejected += 1
        self.last_rejection = (
            f"ACK of {ack.topic}/{ack.producer} through {ack.sequence} from "
            f"{'an unknown sender' if store is None else repr(store)} names run "
            f"(epoch {ack.epoch}, start {ack.run_start}), newer than this producer's run "
            f"(epoch {self.epoch}, start {self.run_start}): this run is fenced"
        )

    def on_timer(self, now: float) -> None:
        due = self._head_due
        if due is None:
            if self._next > 0:
                self._head_due = now + self.config.head_interval
            return
        if due <= now:
            self._send_head()
            interval = self.config.head_interval
            due += interval
            if due <= now:  # the driver was late: do not send a burst of HEADs
                due = now + interval
            self._head_due = due

    def next_deadline(self) -> float | None:
        return self._head_due

    def take_actions(self) -> list[Action]:
        out = self._out
        self._out = []
        return out

    def statistics(self) -> ProducerStatistics:
        return ProducerStatistics(
            published=self._published,
            published_bytes=self._published_bytes,
            unacked_records=self.unacked,
            unacked_bytes=self._held_bytes,
            acked_through=self._first_held - 1,
            acks_received=self._acks,
            heads_sent=self._heads,
            fetches_answered=self._fetches,
            records_resent=self._resent,
            get_heads_answered=self._get_heads,
            dropped_messages=self._dropped,
            stores_known=len(self._stores),
            acks_from_unknown=self._acks_unknown,
            acks_beyond_sent=self._acks_beyond,
            acks_other_run=self._acks_other_run,
            fenced_by=self.fenced_by,
        )

    # -- internals -------------------------------------------------------------------------

    def _send_head(self) -> None:
        self._heads += 1
        self._out.append(
            Send(Head(self.topic, self.producer_id, self._next - 1, self.epoch, self.run_start))
        )

    def _release_through(self, sequence: int) -> None:
        first = self._first_held
        if sequence < first:
            return
        records = self._records
        start = self._skip
        stop = start + (sequence - first + 1)
        self._held_bytes -= sum(map(len, records[start:stop]))
        self._first_held = sequence + 1
        if stop >= len(records):
            self._records = []
            self._skip = 0
        elif stop >= _COMPACT_AT and stop * 2 >= len(records):
            del records[:stop]
            self._skip = 0
        else:
            records[start:stop] = repeat(b"", stop - start)  # let the contents go now,
            self._skip = stop  # compact later

    def _on_fetch(self, fetch: Fetch) -> None:
        if fetch.producer != self.producer_id or fetch.topic != self.topic:
            self._dropped += 1
            return
        self._fetches += 1
        first = max(fetch.sequence, self._first_held)
        stop = min(fetch.sequence + fetch.count, self._next)
        if first >= stop:
            return
        base = self._skip - self._first_held
        records = self._records
        out = self._out
        requester, topic, pid = fetch.requester, self.topic, self.producer_id
        epoch, start = self.epoch, self.run_start
        for sequence in range(first, stop):
            out.append(
                _new_send(
                    _new_direct_record(
                        requester, topic, pid, sequence, records[base + sequence], epoch, start
                    )
                )
            )
        self._resent += stop - first

    def _hold_early(self, store: str, sequence: int, now: float) -> bool:
        """Hold an ACK from ``store``, not (yet) greeted, if it is within its grace (see
        module doc); False: refuse it."""
        early = self._early.get(store)
        if early is None:
            if len(self._early) >= MAX_STORES:
                return False
            early = (now, sequence)
        elif now - early[0] > self.config.head_interval:
            return False
        self._early[store] = (early[0], max(early[1], sequence))
        if now >= self._regreet_at:  # ask for its greeting again: it may be lost
            self._regreet_at = now + self.config.head_interval
            self._out += [Unsubscribe(self._hello_prefix), Subscribe(self._hello_prefix)]
        return True

    def _on_store_hello(self, hello: StoreHello, now: float) -> None:
        if hello.consumer != self.producer_id:
            self._dropped += 1  # prefix leak: ``L`` + ``w.1`` also receives ``w.10``'s
            return
        if hello.store not in self._stores:
            if len(self._stores) >= MAX_STORES:
                self._dropped += 1
                return
            self._stores.add(hello.store)
            early = self._early.pop(hello.store, None)
            if early is not None:  # its ACK overtook its greeting
                self.on_ack(Ack(self.producer_id, self.topic, early[1]), now, hello.store)

    def _on_get_heads(self, request: GetHeads) -> None:
        if request.topic != self.topic or self._next == 0:
            if request.topic != self.topic:
                self._dropped += 1
            return
        if (
            request.epoch > self.epoch > 0
            and request.requester[:-1] == self.producer_id[: len(request.requester) - 1]
            and self.producer_id[len(request.requester) - 1 :].isdigit()
        ):
            # a newer run of this producer's name resumes (a fencing GET-HEADS): its heads
            # come from the stores, which fence this run at what they hold; our own head
            # may name records no store took, which would leave holes ahead of it
            return
        self._get_heads += 1
        self._out.append(
            Send(
                DirectHead(
                    request.requester,
                    self.topic,
                    self.producer_id,
                    self._next - 1,
                    self.epoch,
                    self.run_start,
                )
            )
        )


__all__ = ["ProducerMachine", "ProducerStatistics"]
