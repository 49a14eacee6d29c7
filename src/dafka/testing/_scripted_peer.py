"""A scripted peer wired straight to one machine: the C suite's ``dafka_test_peer``, pure.

The test plays the rest of the cluster by hand: it sends messages as a peer with its own id
would (``send_record``, ``send_head``...), and reads back, in order, what the machine
published (``recv`` / ``expect``), delivered or persisted. Every call drains the machine's
outbox, so a test reads like the C self tests: WHEN the peer sends X, THEN the machine sends Y.
"""

from __future__ import annotations

from collections import deque
from typing import TypeVar

from dafka.node.actions import (
    Action,
    AttributedMessages,
    Deliver,
    KeepRuns,
    NodeMachine,
    Persist,
    Send,
    SendDirectRecords,
    SendRecords,
    Subscribe,
    Unsubscribe,
)
from dafka.protocol import DataMessage, DirectHead, DirectRecord, Head, Record
from dafka.testing._clock import ManualClock
from dafka.testing._memory_log import MemoryLog
from dafka.testing._wire import Delivered, flatten

M = TypeVar("M", bound=DataMessage)


class ScriptedPeer:
    """Feeds one machine by hand and records its actions; see the module docstring."""

    def __init__(
        self,
        machine: NodeMachine,
        clock: ManualClock | None = None,
        *,
        peer_id: str = "5C21B7E0A3F94D6C8E1F0A2B3C4D5E6F",
        log: MemoryLog | None = None,
    ) -> None:
        """``log``: execute the machine's Persists there and report them durable at once."""
        self.machine = machine
        self.clock = clock or ManualClock()
        self.peer_id = peer_id
        self.log = log
        self.subscriptions: set[bytes] = set()
        self.delivered: list[Delivered] = []
        self.persisted: list[Persist] = []
        self.kept_runs: list[KeepRuns] = []
        """The machine's :class:`KeepRuns` (executed on ``log`` when there is one)."""
        self.other_actions: list[Action] = []
        self._sent: deque[DataMessage] = deque()
        self.drain()

    # -- the peer speaks -------------------------------------------------------------------

    def send(self, *messages: DataMessage) -> None:
        """Deliver ``messages`` to the machine as one batch, then drain its outbox.

        A machine that asks who sent each message (``AttributedMessages``, a producer) is
        told ``peer_id``: to have a producer count this peer's ACKs, greet it first
        (``send(StoreHello(producer_id, peer.peer_id))``, as a store does)."""
        now = self.clock.now
        machine = self.machine
        if isinstance(machine, AttributedMessages):
            for message in messages:
                machine.on_message_from(message, now, self.peer_id)
        else:
            for message in messages:
                machine.on_message(message, now)
        self.drain()

    def send_record(self, topic: str, sequence: int, content: bytes = b"CONTENT") -> None:
        self.send(Record(topic, self.peer_id, sequence, content))

    def send_head(self, topic: str, sequence: int) -> None:
        self.send(Head(topic, self.peer_id, sequence))

    def send_direct_record(
        self, recipient: str, topic: str, sequence: int, content: bytes = b"CONTENT"
    ) -> None:
        self.send(DirectRecord(recipient, topic, self.peer_id, sequence, content))

    def send_direct_head(self, recipient: str, topic: str, sequence: int) -> None:
        self.send(DirectHead(recipient, topic, self.peer_id, sequence))

    # -- time ------------------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move the clock and run every timer due by then."""
        self.clock.advance(seconds)
        due = self.machine.next_deadline()
        if due is not None and due <= self.clock.now:
            self.machine.on_timer(self.clock.now)
        self.drain()

    def tick(self) -> bool:
        """Jump to the machine's next deadline and run its timers; False if it has none."""
        moved = self.clock.jump([self.machine])
        self.drain()
        return moved

    # -- what the machine did --------------------------------------------------------------

    def drain(self) -> None:
        """Take the machine's actions and sort them (called by every other method)."""
        actions = self.machine.take_actions()
        while actions:
            for action in actions:
                self._sort(action)
            actions = self.machine.take_actions()  # on_durable may have queued ACKs

    def _sort(self, action: Action) -> None:
        if isinstance(action, Send):
            self._sent.append(action.message)
        elif isinstance(action, SendDirectRecords | SendRecords):
            self._sent.extend(action.messages())
        elif isinstance(action, Deliver):
            self.delivered.extend(flatten(action))
        elif isinstance(action, Persist):
            self.persisted.append(action)
            if self.log is not None:
                self.log.execute(action, self.machine, self.clock.now)
        elif isinstance(action, KeepRuns):
            self.kept_runs.append(action)
            if self.log is not None:
                self.log.execute(action, self.machine, self.clock.now)
        elif isinstance(action, Subscribe):
            self.subscriptions.add(action.prefix)
        elif isinstance(action, Unsubscribe):
            self.subscriptions.discard(action.prefix)
        else:
            self.other_actions.append(action)

    def recv(self) -> DataMessage:
        """The next message the machine published; AssertionError if there is none."""
        if not self._sent:
            raise AssertionError("the machine sent nothing (more)")
        return self._sent.popleft()

    def recv_all(self) -> list[DataMessage]:
        """Every message published and not yet received."""
        messages = list(self._sent)
        self._sent.clear()
        return messages

    def expect(self, kind: type[M]) -> M:
        """The next published message, which must be a ``kind``."""
        message = self.recv()
        if not isinstance(message, kind):
            raise AssertionError(f"expected {kind.__name__}, the machine sent {message!r}")
        return message

    def expect_nothing(self) -> None:
        if self._sent:
            raise AssertionError(f"expected silence, the machine sent {list(self._sent)!r}")

    @property
    def pending(self) -> int:
        """How many published messages are waiting to be received."""
        return len(self._sent)


__all__ = ["ScriptedPeer"]
