"""Stateful model: producers publish through an at-least-once log; a reader that crashes
and restores checkpoints must still deliver every committed message exactly once, in
order per producer.

The log misbehaves the ways Gazette tolerates: appends are retried (the same message again,
before that producer's next append), old CONTINUE/OUTSIDE messages re-appear at any time,
producers crash mid-transaction (their successor re-appends the ACK intents persisted with
the last checkpoint, which rolls the crashed transaction back) or mid-commit (the successor
re-appends all the intents, finishing the commit), and the reader crashes and re-reads from
its checkpoint, which it may take in the middle of delivering a transaction. A tiny ring
buffer forces replays, served from the log by the test (the sequencer does no I/O).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from dafka.message import (
    AckIntent,
    Anomaly,
    Envelope,
    Flags,
    JsonMessage,
    ProducerState,
    Publisher,
    ReadCommittedIter,
    Sequencer,
    get_flags,
    get_producer_id,
)

PARTITIONS = ("p0", "p1", "p2")
FRAME = 10  # Every envelope is 10 bytes: index = begin // FRAME.

Key = tuple[str, bytes]  # (partition, producer)


@dataclass
class Producer:
    """One producer process: its current incarnation and what it has persisted."""

    transactional: bool
    publisher: Publisher[JsonMessage, None]
    open_txn: list[tuple[str, int]] = field(default_factory=list)
    persisted: list[AckIntent[JsonMessage]] = field(default_factory=list)


class ExactlyOnce(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.logs: dict[str, list[Envelope[JsonMessage]]] = {p: [] for p in PARTITIONS}
        self.expected: dict[Key, list[int]] = defaultdict(list)
        self.serial = 0
        self.producers = [self._new_producer(t) for t in (True, True, False)]
        self.buffer = 3
        self.anomalies: list[Anomaly] = []
        self._reset_reader(None)

    # -- the log --------------------------------------------------------------------------

    def _append(self, partition: str, message: JsonMessage) -> None:
        log = self.logs[partition]
        begin = len(log) * FRAME
        # Copy: the log holds bytes, not the publisher's (reusable) objects.
        log.append(
            Envelope(partition, begin, begin + FRAME, JsonMessage(dict(message.body), message.uuid))
        )

    def _new_producer(self, transactional: bool) -> Producer:
        return Producer(transactional, Publisher(self._append))

    # -- producers ------------------------------------------------------------------------

    @rule(who=st.integers(0, 2), partition=st.sampled_from(PARTITIONS))
    def publish(self, who: int, partition: str) -> None:
        producer = self.producers[who]
        self.serial += 1
        message = JsonMessage({"n": self.serial})
        if producer.transactional:
            producer.publisher.publish_uncommitted(lambda _: partition, message)
            producer.open_txn.append((partition, self.serial))
        else:
            producer.publisher.publish_committed(lambda _: partition, message)
            self.expected[(partition, producer.publisher.producer)].append(self.serial)

    @rule(who=st.integers(0, 1), appended=st.integers(0, 3), crash=st.booleans())
    def commit(self, who: int, appended: int, crash: bool) -> None:
        """Persist the intents (the commit point), append them - all, or crash after some."""
        producer = self.producers[who]
        intents = producer.publisher.build_ack_intents()
        producer.persisted = intents
        for partition, serial in producer.open_txn:
            self.expected[(partition, producer.publisher.producer)].append(serial)
        producer.open_txn = []
        if crash:
            for intent in intents[:appended]:
                self._append(intent.partition, intent.message)
            self._recover(who)
        else:
            for intent in intents:
                self._append(intent.partition, intent.message)

    @rule(who=st.integers(0, 1))
    def crash(self, who: int) -> None:
        """Crash with an open transaction: it is lost, and rolled back by the re-sent ACKs."""
        self._recover(who)

    def _recover(self, who: int) -> None:
        old = self.producers[who]
        successor = self._new_producer(True)
        successor.persisted = old.persisted
        for intent in old.persisted:  # Re-append the very same persisted intents.
            self._append(intent.partition, intent.message)
        self.producers[who] = successor

    # -- the at-least-once log -------------------------------------------------------------

    @rule(partition=st.sampled_from(PARTITIONS))
    def retry_last_append(self, partition: str) -> None:
        log = self.logs[partition]
        if log:
            self._append(partition, log[-1].message)

    @rule(partition=st.sampled_from(PARTITIONS), pick=st.integers(0, 10**6))
    def reappear(self, partition: str, pick: int) -> None:
        """An old non-ACK message shows up again anywhere later."""
        candidates = [e for e in self.logs[partition] if get_flags(e.message.uuid) != Flags.ACK_TXN]
        if candidates:
            self._append(partition, candidates[pick % len(candidates)].message)

    # -- the reader -------------------------------------------------------------------------

    def _reset_reader(
        self,
        checkpoint: tuple[dict[str, int], list[ProducerState], dict[Key, list[int]], set[bytes]]
        | None,
    ) -> None:
        if checkpoint is None:
            self.seq: Sequencer[JsonMessage] = Sequencer(
                buffer=self.buffer, on_anomaly=self.anomalies.append
            )
            self.output: dict[Key, list[int]] = defaultdict(list)
            self.acks_seen: set[bytes] = set()
            self.positions = dict.fromkeys(PARTITIONS, 0)
        else:
            offsets, states, output, acks = checkpoint
            self.seq = Sequencer(
                offsets, states, buffer=self.buffer, on_anomaly=self.anomalies.append
            )
            self.output = defaultdict(list, {k: list(v) for k, v in output.items()})
            self.acks_seen = set(acks)
            self.positions = {p: offsets.get(p, 0) // FRAME for p in PARTITIONS}
        self.checkpoint: (
            tuple[dict[str, int], list[ProducerState], dict[Key, list[int]], set[bytes]] | None
        ) = checkpoint

    def _replay(self, partition: str, begin: int, end: int) -> list[Envelope[JsonMessage]]:
        return [e for e in self.logs[partition] if begin <= e.begin and e.end <= end]

    def _deliver(self, env: Envelope[JsonMessage]) -> None:
        message = env.message
        producer = bytes(get_producer_id(message.uuid))
        if get_flags(message.uuid) == Flags.ACK_TXN:
            assert message.uuid.bytes not in self.acks_seen, "an ACK was delivered twice"
            self.acks_seen.add(message.uuid.bytes)
        else:
            self.output[(env.partition, producer)].append(message.body["n"])

    def _step(self) -> bool:
        it = ReadCommittedIter([], self.seq, self._replay)
        env = next(it, None)
        if env is None:
            return False
        self._deliver(env)
        return True

    @rule(partition=st.sampled_from(PARTITIONS), count=st.integers(1, 4))
    def read(self, partition: str, count: int) -> None:
        for _ in range(count):
            if self.seq.committing:
                self._step()
                continue
            log = self.logs[partition]
            index = self.positions[partition]
            if index >= len(log):
                return
            self.positions[partition] = index + 1
            self.seq.queue_uncommitted(log[index])

    @precondition(lambda self: self.seq.committing)
    @rule()
    def step(self) -> None:
        self._step()

    @rule()
    def take_checkpoint(self) -> None:
        offsets, states = self.seq.checkpoint()
        output = {k: list(v) for k, v in self.output.items()}
        acks = set(self.acks_seen)
        current = self.seq.dequeued
        if current is not None:  # Delivered but not done: a restore delivers it again.
            if get_flags(current.message.uuid) == Flags.ACK_TXN:
                acks.discard(current.message.uuid.bytes)
            else:
                key = (current.partition, bytes(get_producer_id(current.message.uuid)))
                assert output[key].pop() == current.message.body["n"]
        self.checkpoint = (offsets, states, output, acks)

    @rule()
    def reader_crash(self) -> None:
        self._reset_reader(self.checkpoint)

    def teardown(self) -> None:
        # Producers with an open transaction simply never commit it. Read everything.
        while True:
            progressed = False
            while self._step():
                progressed = True
            for partition in PARTITIONS:
                log = self.logs[partition]
                index = self.positions[partition]
                if index < len(log):
                    self.positions[partition] = index + 1
                    self.seq.queue_uncommitted(log[index])
                    progressed = True
                    while self._step():
                        pass
            if not progressed:
                break
        expected = {k: v for k, v in self.expected.items() if v}
        output = {k: v for k, v in self.output.items() if v}
        assert output == expected
        # Nothing in this model moves a producer's checkpoint back in time.
        assert not [a for a in self.anomalies if a.kind == "ack_regression"]


ExactlyOnce.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestExactlyOnce = ExactlyOnce.TestCase
