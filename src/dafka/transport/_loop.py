"""The runner's poll loop: one turn at a time, until the mailbox says stop.

Each turn:

1. polls the beacon SUB, the data SUBs (and per-peer SUBs), the data XPUBs (subscription
   notices: which peers connected back, and for STORE-HELLO) and the mailbox's wake-up,
   with a timeout up to the next timer (the machine's, discovery's, the reach watch's, the
   persistence's sync clock);
2. runs posted work (the mailbox), then reads the sockets into the machines
   (:class:`~dafka.transport._receive.Receiver`);
3. runs due timers;
4. executes the outboxes (:class:`~dafka.transport._execute.Executor`), then the owner's
   ``after_turn``.

Reading a batch before executing the outbox is what makes the store write once and ACK once
per partition per burst of records.

*Holding.* A store's records become durable at its interval fsync, which runs at most once per
interval (``Storage._arm``): a record that arrives within an interval of the last one is synced
and ACKed at that interval's end whenever it is read. So while the persistence holds
(``Persistence.hold_until``: one interval after the last fsync, at most 5 ms) the loop leaves
the SUBs of its ``held`` identities (the store's writer) unpolled, and at the hold's end reads
all that arrived meanwhile in the turn that appends, syncs and ACKs it: at 1,000 records/s one
turn per ~5 records instead of one each, each ACK sent when it would have been. A held SUB
whose last read stopped at ``receive_batch`` is not held until a read drains it, so a backlog
is read turn after turn as before. While the application has paused receiving
(``receive_paused``, a consumer whose queue is full) only the beacons and the mailbox are
polled, at least every 10 ms, so that the loop notices the pause end.

Every socket is polled by its descriptor (``ZMQ_FD``, one ``select.poll``: ``_poll.py``), not
by ``zmq_poll``, which asks each socket ``ZMQ_EVENTS`` before and after it sleeps (two system
calls each): a socket is asked only when its descriptor fired or when it was used since it
was last found empty (``Edges.used``: a send, a connect, a subscription, a read stopped at
``receive_batch``), and a used socket found waiting makes the poll not block. With
:class:`~dafka.transport._turns.Turns` (a node whose callers may send a lone record or read
data themselves) the whole turn runs under its lock, released only around the poll, and
what callers used meanwhile is looked at after the poll (``_turns.py``). Work a caller
leaves while the turn runs (``NodeRunner.run_at_turn_end``: a lone record that found the
runner in mid-turn) runs at the turn's end, before its outbox is executed: it leaves in this
turn, without a wake-up and a turn of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Set

import zmq

from dafka.node import Discovery
from dafka.node.actions import NodeMachine
from dafka.transport._execute import Executor
from dafka.transport._mailbox import Mailbox
from dafka.transport._persistence import Persistence
from dafka.transport._poll import DescriptorPoll, Edges
from dafka.transport._reach import ReachWatch
from dafka.transport._receive import OnNotice, Receiver
from dafka.transport._socket_set import PeerSockets, SocketSet
from dafka.transport._turns import Turns, readable
from dafka.transport.memory import release_free_memory

_PAUSED_POLL_MS = 10


class PollLoop:
    """Runs turns on ``sockets`` until ``stopping()`` is true after the mailbox ran."""

    def __init__(
        self,
        machine: NodeMachine,
        discovery: Discovery,
        sockets: SocketSet,
        mailbox: Mailbox,
        receiver: Receiver,
        executor: Executor,
        *,
        clock: Callable[[], float],
        stopping: Callable[[], bool],
        persistence: Persistence | None,
        peers: PeerSockets | None,
        on_subscription: OnNotice | None,
        receive_paused: Callable[[], bool] | None,
        after_turn: Callable[[float], None] | None,
        reach: ReachWatch,
        edges: Edges,
        turns: Turns | None = None,
    ) -> None:
        self._machine = machine
        self._edges = edges
        self._turns = turns
        self._reach = reach
        self._discovery = discovery
        self._sockets = sockets
        self._mailbox = mailbox
        self._receiver = receiver
        self._executor = executor
        self._clock = clock
        self._stopping = stopping
        self._persistence = persistence
        self._peers = peers
        self._on_subscription = on_subscription
        self._receive_paused = receive_paused
        self._after_turn = after_turn

    def run(self) -> None:
        """Turn until stopped; the last turn flushes (``Executor.shutdown``)."""
        turns = self._turns
        if turns is None:
            self._run(None)
            return
        with turns.lock:
            turns.open = True
            try:
                self._run(turns)
            finally:
                turns.open = False
                with turns.late_lock:
                    turns.late_open = False

    def _run(self, turns: Turns | None) -> None:
        """The loop; with ``turns`` its lock is held, and released only around the poll."""
        machine = self._machine
        discovery = self._discovery
        persistence = self._persistence
        receiver = self._receiver
        executor = self._executor
        clock = self._clock
        edges = self._edges
        look = edges.look
        used = edges.used
        beacon_sub = self._sockets.beacon_sub
        wake = self._sockets.wake
        endpoints = self._sockets.endpoints
        subs = [e.sub for e in endpoints]
        xpubs = [(e.pub, e.identity.xpub, e.identity.topic) for e in endpoints]
        pubs = [pub for pub, _, _ in xpubs]
        # Every poll is over descriptors (``_poll.py``): all the sockets; the beacons and
        # the wake-up alone while the application has paused receiving; without the data
        # SUBs while callers read them (``lean``) or while the persistence holds them.
        poller = DescriptorPoll(edges, (beacon_sub, wake, *subs, *pubs))
        control = DescriptorPoll(edges, (beacon_sub, wake))
        lean = DescriptorPoll(edges, (beacon_sub, wake, *pubs))
        if turns is not None:
            turns.lend(subs, pubs, [pub for pub, sees, _ in xpubs if sees])
        # The held SUBs (``Identity.held``) and a poller without them, used while the
        # persistence holds (see the module's docstring, "Holding").
        held = [e.sub for e in endpoints if e.identity.held]
        if persistence is None or turns is not None or self._peers is not None:
            held = []
        hold_until = persistence.hold_until if persistence is not None and held else None
        holding_poller = DescriptorPoll(
            edges, (beacon_sub, wake, *(s for s in subs if s not in held), *pubs)
        )
        held_left = False  # a held SUB's last read stopped at receive_batch: more may wait
        # What a turn does not read, so does not look at: the held SUBs while held, the
        # data SUBs (and per-peer SUBs) while receiving is paused.
        unread_held = frozenset(held)
        unread_paused: set[zmq.Socket[bytes]] = set(subs)
        reach = self._reach
        peer_senders: dict[zmq.Socket[bytes], str] = {}
        peer_keys: dict[zmq.Socket[bytes], bytes] = {}
        if self._peers is not None:
            self._peers.poller = poller
            peer_senders = self._peers.senders
            peer_keys = self._peers.keys
        on_subscription = self._on_subscription
        paused = self._receive_paused
        after_turn = self._after_turn
        while True:
            now = clock()
            deadline = _earliest(
                machine.next_deadline(),
                discovery.next_deadline(),
                persistence.next_deadline() if persistence is not None else None,
                reach.next_deadline(),
            )
            receiving = paused is None or not paused()
            polled = poller
            hold = None
            skip: Collection[zmq.Socket[bytes]] = ()
            if hold_until is not None and receiving and not held_left:
                hold = hold_until()
                if hold is not None and hold > now:
                    polled = holding_poller
                    skip = unread_held
                    if deadline is None or hold < deadline:
                        deadline = hold
                else:
                    hold = None
            if not receiving:
                polled = control
                skip = unread_paused
                if peer_senders:
                    skip = unread_paused.union(peer_senders)
            # The used sockets first: one whose message waits is read this turn, unpolled.
            waiting: Set[zmq.Socket[bytes]] = look(skip) if used else _NONE
            timeout_ms = -1 if deadline is None else max(0, int((deadline - now) * 1000) + 1)
            if not receiving:
                timeout_ms = _PAUSED_POLL_MS if timeout_ms < 0 else min(timeout_ms, _PAUSED_POLL_MS)
            if waiting:
                timeout_ms = 0
            if turns is not None:
                if turns.readers and self._peers is None and polled is poller:
                    polled = lean
                turns.sub_polling = polled is poller
                turns.sleeping_until = deadline
                turns.lock.release()
            try:
                fired = polled.poll(timeout_ms)
            finally:
                if turns is not None:
                    turns.lock.acquire()
                    turns.late_open = True
            if fired:
                waiting = waiting | set(fired) if waiting else set(fired)
            if turns is not None and used:  # what callers used while the lock was free
                waiting = waiting | look(skip) if waiting else look(skip)
            now = clock()
            if wake in waiting:
                self._mailbox.drain(wake, now)
                used.discard(wake)
                if self._stopping():
                    for sock in held:  # what arrived while held is persisted and ACKed too
                        receiver.data(sock, now)
                    if turns is not None:
                        for fn in turns.take_late():
                            fn(now)
                    executor.shutdown(now)
                    return
            if beacon_sub in waiting:
                receiver.beacons(beacon_sub, now)
                used.discard(beacon_sub)
            if receiving:
                for sock in subs:
                    if sock in waiting:
                        drained = receiver.data(sock, now)
                        if drained:
                            used.discard(sock)
                        else:
                            used.add(sock)
                        if sock in held:
                            held_left = not drained
                if hold is not None and now >= hold:  # the hold ended: read them in this turn
                    for sock in held:
                        drained = receiver.data(sock, now)
                        held_left = not drained
                        if drained:
                            used.discard(sock)
                        else:
                            used.add(sock)
                if peer_senders:
                    for sock, sender in list(peer_senders.items()):
                        if sock in waiting:
                            # One message, then a look, the rest only if more came: a
                            # producer's ACK (one per store's fsync) then ends on no EAGAIN,
                            # which pyzmq raises as an exception built in Python (~2.5 us,
                            # two imports) where the look costs ~1.2 (client side).
                            key = peer_keys.get(sock)
                            if (
                                not receiver.data(sock, now, sender, key, limit=1)
                                and readable(sock)
                                and not receiver.data(sock, now, sender, key)
                            ):
                                used.add(sock)  # stopped at receive_batch: more may wait
                            else:
                                used.discard(sock)
            for sock, machine_sees, topic in xpubs:
                if sock in waiting:
                    handler = on_subscription if machine_sees else None
                    receiver.notices(sock, reach, handler, now, topic)
                    used.discard(sock)
            due = machine.next_deadline()
            if due is not None and due <= now:
                machine.on_timer(now)
            due = discovery.next_deadline()
            if due is not None and due <= now:
                discovery.on_timer(now)
                if discovery.take_flood_ended():
                    release_free_memory("a beacon flood ended")
            due = reach.next_deadline()
            if due is not None and due <= now:
                reach.on_timer(now)
            if turns is not None:  # what callers left for this turn's end (run_at_turn_end)
                for fn in turns.take_late():
                    fn(now)
            executor.execute(now)
            if after_turn is not None:
                after_turn(now)


_NONE: frozenset[zmq.Socket[bytes]] = frozenset()


def _earliest(*deadlines: float | None) -> float | None:
    present = [d for d in deadlines if d is not None]
    return min(present) if present else None


__all__ = ["PollLoop"]
