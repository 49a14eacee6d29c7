"""An in-memory mesh of node machines: PUB/SUB routing by prefix, seeded losses, virtual time.

Theory. Every machine added is connected to every other one, as discovery makes them in a
real cluster. A :class:`~dafka.node.Send` is delivered to each *other* machine with a
subscription that is a prefix of the message's ``ID + prefix field`` (ZeroMQ's matching,
leaks included, so the machines' exact filtering is exercised), in FIFO order (or, with
``interleave``, in a seeded random merge of the (sender, recipient) streams), and dropped
with probability ``drop_rate`` (seeded: a failing run can be replayed). A machine's
:class:`~dafka.node.Subscribe` is shown to the others as an XPUB notice (``on_subscription``),
as a store's reader socket sees it (every subscribe, as an ``XPUB_VERBOSE`` socket). A machine
that asks who sent each message (:class:`~dafka.node.actions.AttributedMessages`, a
producer) gets it through ``on_message_from`` with the sender's node id, as a per-peer
socket tells it: a store's writer id for what its writer sends (``STORE_WRITER_SENDS``:
ACK, FETCH, GET-HEADS), its reader id for the rest; any other machine's name in the network.
:class:`~dafka.node.Persist` is appended to the machine's
:class:`MemoryLog` and reported durable at once (``on_durable``); :class:`~dafka.node.Deliver`
is recorded per machine.

Time is a :class:`ManualClock`: :meth:`MemoryNetwork.run_until` delivers messages while there
are any and otherwise jumps to the next timer deadline, so seconds of retries and heartbeats
run in milliseconds.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from dafka.node import StoreMachine
from dafka.node.actions import (
    STORE_WRITER_SENDS,
    AttributedMessages,
    Deliver,
    KeepRuns,
    NodeMachine,
    Persist,
    Send,
    SendDirectRecords,
    SendRecords,
    Subscribe,
    SubscriptionNotices,
    Unsubscribe,
)
from dafka.protocol import DataMessage
from dafka.testing._clock import ManualClock
from dafka.testing._memory_log import MemoryLog
from dafka.testing._wire import Delivered, flatten, prefix_of


class NetworkStalledError(AssertionError):
    """``run_until`` gave up: the condition did not hold within its virtual time or steps."""


@dataclass(eq=False)
class _Node:
    name: str
    machine: NodeMachine
    log: MemoryLog | None
    subscriptions: set[bytes] = field(default_factory=set)
    matches: dict[bytes, bool] = field(default_factory=dict)
    delivered: list[Delivered] = field(default_factory=list)
    received: int = 0
    paused: bool = False
    held: list[tuple[_Node, DataMessage, str, str]] = field(default_factory=list)
    """What reached it while paused, in order (its sockets' buffers)."""

    def wants(self, prefix: bytes) -> bool:
        hit = self.matches.get(prefix)
        if hit is None:
            hit = any(prefix.startswith(s) for s in self.subscriptions)
            self.matches[prefix] = hit
        return hit


@dataclass
class NetworkStatistics:
    """Counters of a :class:`MemoryNetwork`."""

    sent: int = 0
    delivered: int = 0
    dropped: int = 0
    steps: int = 0


class MemoryNetwork:
    """Routes the actions of node machines between them; see the module docstring."""

    def __init__(
        self,
        clock: ManualClock | None = None,
        *,
        drop_rate: float = 0.0,
        seed: int = 0,
        droppable: Callable[[DataMessage, str], bool] | None = None,
        batch_size: int = 512,
        interleave: bool = False,
    ) -> None:
        """``droppable(message, recipient name)`` limits losses to some messages (None: all).

        ``interleave``: deliver each batch in a seeded random order that keeps the order of
        each (sender, recipient) pair, as separate connections do (one TCP connection per
        pair is FIFO, nothing orders two of them); the default is one FIFO for all."""
        if not 0.0 <= drop_rate < 1.0:
            raise ValueError("drop_rate must be in [0, 1)")
        self.clock = clock or ManualClock()
        self.drop_rate = drop_rate
        self._rng = random.Random(seed)
        self._droppable = droppable
        self._batch = batch_size
        self._nodes: dict[str, _Node] = {}
        self._queue: deque[tuple[_Node, DataMessage, str, str]] = deque()
        """(recipient, message, sender's node id, sender's name)."""
        self._interleave = interleave
        self.stats = NetworkStatistics()

    # -- membership ------------------------------------------------------------------------

    def add(self, name: str, machine: NodeMachine, *, log: MemoryLog | None = None) -> None:
        """Connect ``machine`` to everyone; ``log`` executes its Persists (stores)."""
        if name in self._nodes:
            raise ValueError(f"a node named {name!r} is already on the network")
        node = _Node(name, machine, log)
        now = self.clock.now
        if isinstance(machine, SubscriptionNotices):  # its XPUB sees everyone's subscriptions
            for other in self._nodes.values():
                for prefix in other.subscriptions:
                    machine.on_subscription(prefix, True, now)
        self._nodes[name] = node

    def remove(self, name: str) -> None:
        """Disconnect a node (it crashed or closed): messages in flight to it are lost, and
        the others' XPUBs see its subscriptions leave, as when its connections close."""
        node = self._nodes.pop(name)
        now = self.clock.now
        for other in self._nodes.values():
            if isinstance(other.machine, SubscriptionNotices):
                for prefix in node.subscriptions:
                    other.machine.on_subscription(prefix, False, now)

    def pause(self, name: str) -> None:
        """The node's process stops (SIGSTOP): it runs nothing - no timer, no outbox - and
        what is sent to it waits, in order, until :meth:`resume` (its sockets' buffers).
        ``run_until``/``run_for`` jump the clock past its deadlines; a driver of its own
        timers (a test's ``clock.jump``) must leave it out meanwhile."""
        self._nodes[name].paused = True

    def resume(self, name: str) -> None:
        """The node runs again (SIGCONT): what waited for it is delivered first."""
        node = self._nodes[name]
        node.paused = False
        self._queue.extendleft(reversed(node.held))
        node.held = []

    def machine(self, name: str) -> NodeMachine:
        return self._nodes[name].machine

    def delivered(self, name: str) -> list[Delivered]:
        """Everything the node's Deliver actions handed to its application, in order."""
        return self._nodes[name].delivered

    def contents(self, name: str) -> list[bytes]:
        return [d.content for d in self._nodes[name].delivered]

    # -- running ---------------------------------------------------------------------------

    def step(self) -> bool:
        """Drain every outbox, then deliver one batch of messages; False if nothing happened."""
        self.stats.steps += 1
        moved = self._collect()
        queue = self._queue
        if not queue:
            return moved
        now = self.clock.now
        batch = [queue.popleft() for _ in range(min(self._batch, len(queue)))]
        if self._interleave:
            batch = self._interleaved(batch)
        for entry in batch:
            node, message, sender, _ = entry
            if node.paused:
                node.held.append(entry)
                continue
            if self._nodes.get(node.name) is node:
                node.received += 1
                self.stats.delivered += 1
                machine = node.machine
                if isinstance(machine, AttributedMessages):
                    machine.on_message_from(message, now, sender)
                else:
                    machine.on_message(message, now)
        return True

    def settle(self, max_steps: int = 1_000_000) -> None:
        """Deliver messages until none is in flight, without moving the clock."""
        for _ in range(max_steps):
            if not self.step():
                return
        raise NetworkStalledError(f"still busy after {max_steps} steps")

    def run_until(
        self,
        condition: Callable[[], bool],
        *,
        within: float = 60.0,
        max_steps: int = 1_000_000,
    ) -> float:
        """Run (delivering, then jumping the clock to deadlines) until ``condition()`` holds.

        Returns the virtual time it took. Raises :class:`NetworkStalledError` when it does not hold
        within ``within`` virtual seconds (or ``max_steps`` steps).
        """
        start = self.clock.now
        limit = start + within
        for _ in range(max_steps):
            if self.step():
                continue
            if condition():
                return self.clock.now - start
            machines = [n.machine for n in self._nodes.values() if not n.paused]
            if not self.clock.jump(machines, limit):
                raise NetworkStalledError(
                    f"condition still false after {self.clock.now - start:.3f} virtual seconds"
                )
        raise NetworkStalledError(f"condition still false after {max_steps} steps")

    def run_for(self, seconds: float, max_steps: int = 1_000_000) -> None:
        """Run every message and timer of the next ``seconds`` virtual seconds."""
        limit = self.clock.now + seconds
        for _ in range(max_steps):
            if self.step():
                continue
            machines = [n.machine for n in self._nodes.values() if not n.paused]
            if not self.clock.jump(machines, limit):
                self.clock.advance(max(0.0, limit - self.clock.now))
                self.settle(max_steps)
                return
        raise NetworkStalledError(f"still busy after {max_steps} steps")

    # -- internals -------------------------------------------------------------------------

    def _collect(self) -> bool:
        moved = False
        now = self.clock.now
        for node in list(self._nodes.values()):
            if node.paused:
                continue
            actions = node.machine.take_actions()
            if not actions:
                continue
            moved = True
            for action in actions:
                if type(action) is Send:
                    self._route(node, action.message)
                elif type(action) is SendDirectRecords or type(action) is SendRecords:
                    for message in action.messages():
                        self._route(node, message)
                elif type(action) is Deliver:
                    node.delivered.extend(flatten(action))
                elif type(action) is Persist or type(action) is KeepRuns:
                    self._persist(node, action, now)
                elif type(action) is Subscribe:
                    self._subscription(node, action.prefix, True, now)
                elif type(action) is Unsubscribe:
                    self._subscription(node, action.prefix, False, now)
                # Connect / Disconnect / SendBeacon: discovery is not simulated here.
        return moved

    def _interleaved(
        self, batch: list[tuple[_Node, DataMessage, str, str]]
    ) -> list[tuple[_Node, DataMessage, str, str]]:
        """A random merge of the batch's (sender, recipient) streams, each kept in order."""
        streams: dict[tuple[str, str], deque[tuple[_Node, DataMessage, str, str]]] = {}
        for entry in batch:
            streams.setdefault((entry[3], entry[0].name), deque()).append(entry)
        pending = list(streams.values())
        out = []
        rng = self._rng
        while pending:
            i = rng.randrange(len(pending))
            stream = pending[i]
            out.append(stream.popleft())
            if not stream:
                pending[i] = pending[-1]
                pending.pop()
        return out

    def _route(self, sender: _Node, message: DataMessage) -> None:
        self.stats.sent += 1
        prefix = prefix_of(message)
        source = sender.machine
        if isinstance(source, StoreMachine):  # two identities, two sockets
            sender_id = (
                source.writer_id if type(message) in STORE_WRITER_SENDS else source.reader_id
            )
        else:
            sender_id = sender.name
        for node in self._nodes.values():
            if node is sender or not node.wants(prefix):
                continue
            if (
                self.drop_rate
                and self._rng.random() < self.drop_rate
                and (self._droppable is None or self._droppable(message, node.name))
            ):
                self.stats.dropped += 1
                continue
            self._queue.append((node, message, sender_id, sender.name))

    def _persist(self, node: _Node, persist: Persist | KeepRuns, now: float) -> None:
        if node.log is None:
            raise ValueError(f"{node.name} persists but was added without a log")
        node.log.execute(persist, node.machine, now)

    def _subscription(self, node: _Node, prefix: bytes, subscribed: bool, now: float) -> None:
        if subscribed:
            node.subscriptions.add(prefix)
        else:
            node.subscriptions.discard(prefix)
        node.matches.clear()
        for other in self._nodes.values():
            if other is not node and isinstance(other.machine, SubscriptionNotices):
                other.machine.on_subscription(prefix, subscribed, now)


__all__ = ["MemoryNetwork", "NetworkStalledError", "NetworkStatistics"]
