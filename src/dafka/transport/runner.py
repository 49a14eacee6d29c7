"""The driver: runs one pure node machine on real ZeroMQ sockets, in its own thread.

Theory of operation
-------------------
A node has one or more *identities* (a store has two: its writer and its reader, each with
its own id, data PUB and data SUB, as in the C reference). The runner binds every identity's
data PUB on an ephemeral port, beacons ``B | id | host | port`` for each to every tower, and
connects every data SUB to each peer the towers announce (the pure ``Discovery`` machine
decides when to connect, disconnect and beacon).

One thread owns all sockets (ZeroMQ sockets are not thread-safe); other threads hand it
work through its mailbox (``post``, ``call``). The runner is a facade over one part per job:

* ``_mailbox.Mailbox`` - work posted from other threads and the wake-up that signals it;
* ``_socket_set.SocketSet`` / ``PeerSockets`` - socket set-up and tear-down;
* ``_loop.PollLoop`` - the poll loop and timers (the turn, documented there);
* ``_receive.Receiver`` - inbound decoding and RECORD run grouping;
* ``_execute.Executor`` - executing the machines' actions;
* a :class:`Persistence` given by the owner (a store: ``dafka.server.StorePersistence``) -
  appends, the fsync clock, durable sequences back to the machine, the shutdown flush.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import zmq

from dafka.errors import DafkaError, NodeFailedError
from dafka.node import Discovery, DiscoveryConfig
from dafka.node.actions import (
    AttributedMessages,
    Deliver,
    DirectRecordRuns,
    NodeMachine,
    PeerNotices,
    RecordRuns,
    RunDirectRecords,
    RunRecords,
    SubscriptionNotices,
)
from dafka.protocol import DataMessage
from dafka.transport._drops import DropLog
from dafka.transport._execute import Executor
from dafka.transport._guard import OWNERS_FILE, Guard
from dafka.transport._listen_log import say_listening
from dafka.transport._loop import PollLoop
from dafka.transport._mailbox import Mailbox
from dafka.transport._persistence import Persistence
from dafka.transport._poll import Edges
from dafka.transport._reach import ReachWatch, reach_grace
from dafka.transport._receive import DropInbound, Receiver
from dafka.transport._socket_set import Endpoint, Identity, PeerSockets, SocketSet
from dafka.transport._stats import RunnerStats
from dafka.transport._turns import DataWait, Turns, readable
from dafka.transport.config import TransportConfig
from dafka.transport.failure import FailureLatch

log = logging.getLogger(__name__)

Clock = Callable[[], float]
T = TypeVar("T")


class NodeNotReadyError(DafkaError):
    """No tower answered with its welcome within the start timeout."""


class NodeRunner:
    """Drives ``machine`` on sockets in a background thread until ``stop()``.

    ``persistence`` (a store) is driven at fixed points of each turn; a machine that is an
    :class:`~dafka.node.actions.AttributedMessages` (a producer) gets per-peer SUBs, so that
    every message it reads names its sender (an ACK, its store); ``on_deliver`` takes the
    consumer's runs; ``after_turn(now)`` runs at the end of every turn;
    ``receive_paused()`` true stops reading data (backpressure from the application);
    ``drop_inbound`` injects transport loss below decoding and run grouping (tests, chaos).
    A secured node with an ACL (``config.security.acl``) reads every peer on its own SUB and
    shows each message to its guard first (``_guard.py``); ``owners`` is where it keeps the
    partitions' owners (a store's data directory), None: in memory only. ``direct``: callers
    may run the machine and send a lone record, or wait for data and read it, in their own
    thread (:meth:`run_here`, :meth:`wait_here`).
    """

    def __init__(
        self,
        machine: NodeMachine,
        identities: Sequence[Identity],
        config: TransportConfig,
        *,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
        persistence: Persistence | None = None,
        clock: Clock = time.monotonic,
        route_send: Callable[[DataMessage], int] | None = None,
        route_subscribe: Callable[[bytes], int] | None = None,
        drop_inbound: DropInbound | None = None,
        on_deliver: Callable[[Deliver], None] | None = None,
        after_turn: Callable[[float], None] | None = None,
        receive_paused: Callable[[], bool] | None = None,
        name: str = "node",
        owners: Path | None = None,
        direct: bool = False,
    ) -> None:
        if not identities:
            raise ValueError("a node needs at least one identity")
        self.machine = machine
        self._identities = list(identities)
        self._config = config
        self._context = context or zmq.Context.instance()
        self._persistence = persistence
        self._clock = clock
        self._route_send = route_send
        self._route_subscribe = route_subscribe
        self._drop_inbound = drop_inbound
        self._on_deliver = on_deliver
        self._after_turn = after_turn
        self._receive_paused = receive_paused
        self._name = name
        self._stats = RunnerStats()
        self._drops = DropLog(name)
        security = config.security
        self._guard = (
            Guard(security, name, self._stats, owners)
            if security is not None and security.acl is not None
            else None
        )
        self._turns = Turns() if direct else None
        self._edges = Edges()
        """The sockets whose descriptor's edge a use may have taken (``_poll.py``): the
        loop's, the executor's and the callers' uses of the lent sockets."""
        self._executor: Executor | None = None
        self._receiver: Receiver | None = None
        self._thread: threading.Thread | None = None
        self._bound = threading.Event()
        self._ready = threading.Event()
        self._ready_or_failed = threading.Event()
        self._stopping = False
        self._error: BaseException | None = None
        self.failure = FailureLatch(name)
        """Set once the thread died: every later ``post``/``call``/``statistics`` raises it."""
        self.failure.add_listener(lambda _error: self._ready_or_failed.set())
        self._mailbox = Mailbox(self._context, name, self.failure)
        self._endpoints: list[Endpoint] = []
        self._sockets: SocketSet | None = None
        self.discovery = Discovery(
            [i.node_id for i in identities],
            DiscoveryConfig(
                interval=config.beacon_interval,
                timeout=config.beacon_timeout,
                listen_first=config.listen_first,
            ),
        )

    # -- life cycle -------------------------------------------------------------------------

    def start(self, ready_timeout: float | None = 10.0) -> None:
        """Bind, start the thread and wait for a tower's welcome (``None``: do not wait)."""
        self._thread = threading.Thread(target=self._main, name=f"dafka-{self._name}", daemon=True)
        self._thread.start()
        self._bound.wait()
        if self._error is not None:
            self._thread.join()
            self._thread = None
            raise self.failure.error or self._error
        self._mailbox.open()
        if ready_timeout is not None and not self._ready_or_failed.wait(ready_timeout):
            self.stop()
            secured = self._config.security
            raise NodeNotReadyError(
                f"{self._name}: no welcome from any tower at "
                f"{', '.join(self._config.tower_pub_addresses)} within {ready_timeout}s"
                + (
                    f" (secured: is {secured.key_file}'s public key in the tower's "
                    "authorized keys, and is the tower's key the one this node expects?)"
                    if secured is not None
                    else ": is a tower running there, listening where this host reaches it? "
                    "(dafka tower listens on loopback unless given --bind; a firewall must let "
                    "its two ports through, see docs/deploy.md)"
                )
            )

        if self.failure.error is not None:
            self.stop()
            raise self.failure.error

    @property
    def ready(self) -> bool:
        """True once a tower has welcomed this node."""
        return self._ready.is_set()

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self._ready.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop (the persistence is flushed and final ACKs are sent) and join."""
        if self._thread is None:
            return

        def _stop(_: float) -> None:
            self._stopping = True

        with contextlib.suppress(NodeFailedError):  # a dead thread needs no telling
            self.post(_stop)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.error("%s: runner thread did not stop within %ss", self._name, timeout)
        self._thread = None
        self._mailbox.close()

    def post(self, fn: Callable[[float], None]) -> None:
        """Run ``fn(now)`` in the runner thread (thread-safe); the outbox is then executed.

        Raises :class:`NodeFailedError` once the thread died.
        """
        self._mailbox.post(fn)

    def call(self, fn: Callable[[float], T], timeout: float = 10.0) -> T:
        """Run ``fn(now)`` in the runner thread and return its result (or raise its error).

        Raises :class:`NodeFailedError` if the thread dies before it answers.
        """
        return self._mailbox.call(fn, timeout)

    def run_here(self, fn: Callable[[float], bool]) -> bool:
        """Run ``fn(now)`` in the caller's thread in place of the runner's, and send what it
        made the machine ask for, if the runner is between turns (blocked in its poll); False
        without running it otherwise (the runner in mid-turn, not started, stopped, or no
        ``direct``): then ``post`` it. Returns ``fn``'s answer.

        One thread wake-up less for a lone record (``_turns.py``). ``fn`` may touch the
        machine (the lock makes it the runner's for the while) and must be quick: the
        runner waits for it. What the machine asked for beyond sends on the data XPUBs and
        deliveries, a deadline earlier than the runner sleeps until, or a notice left
        waiting on an XPUB whose notices the machine takes wake the runner
        (:meth:`_lent_turn_ends`).
        """
        turns = self._turns
        if turns is None or not turns.lock.acquire(blocking=False):
            return False
        try:
            if not turns.open or self._executor is None:
                return False
            done = fn(self._clock())
            self._lent_turn_ends(turns, self._executor, read=False)
            return done
        finally:
            turns.lock.release()

    def run_at_turn_end(self, fn: Callable[[float], None]) -> bool:
        """Run ``fn(now)`` in the runner thread at the end of the turn in progress, before
        the turn's outbox is executed, if the runner is in mid-turn and has not yet reached
        that point; False otherwise (between turns, past it, not started, stopped, or no
        ``direct``): then ``post`` it (or ``run_here`` it).

        For work that found the runner busy (``run_here`` refused: an ACK's turn): posted,
        it would wait for the whole turn, a wake-up (the mailbox) and a turn of its own (a
        poll of every socket); here what it makes the machine send leaves in the turn
        already running. Never blocks: the turn may take the caller's locks (a producer's),
        which the caller may hold; ``fn`` runs under the turn lock, as posted work does.
        """
        turns = self._turns
        if turns is None:
            return False
        with turns.late_lock:
            if not turns.late_open:
                return False
            turns.late.append(fn)
        return True

    def wait_here(self, wait: DataWait, timeout: float | None) -> None:
        """Wait on the data SUBs' descriptors (and ``wait``'s pipe) up to ``timeout``
        seconds, then read what arrived on them in the caller's thread, in place of the
        runner's: the machine's deliveries go to ``on_deliver`` in this thread (one thread
        wake-up less for a consumer waiting in ``poll``; ``_turns.py``). Meanwhile the
        runner's poll leaves the SUBs to this caller (:attr:`Turns.readers`).

        It waits first and reads after: whoever used a SUB last either found it empty (a
        look that said nothing waits, or a read that ended on EAGAIN: both processed its
        commands, so the next message signals its descriptor) or left a turn of the
        runner to come, so a message waiting is a descriptor ready - a read before the
        wait found nothing once per record at a steady rate (~15-20 us of CPU). Only the
        SUBs whose descriptor is ready are read, without a look first (a read that finds
        nothing costs a look too): one message, then a look, and the rest only if the look
        says more came - a read ends on EAGAIN, which pyzmq raises as an exception (two
        imports and a ``strerror`` in Python, ~2.5 us against the look's ~1.2). Woken by
        the pipe alone (the runner delivered) it reads nothing. If the runner is in
        mid-turn then, this waits for the turn's end (the caller holds none of its owner's
        locks: the turn may deliver)."""
        turns = self._turns
        if turns is None:
            wait.wait(timeout, data=False)
            return
        with turns.lock:
            turns.readers += 1
            kick = turns.sub_polling
        if kick:  # its poll watches the SUBs: poll again without them
            with contextlib.suppress(NodeFailedError):
                self._mailbox.post(_nothing)
        ready: list[int] = []
        try:
            ready = wait.wait(timeout, data=True)
        finally:
            turns.lock.acquire()
            turns.readers -= 1
        try:
            if ready:
                self._read_here(turns, ready)
        finally:
            turns.lock.release()

    def _read_here(self, turns: Turns, ready: list[int]) -> None:
        """Read the SUBs whose descriptors are ``ready`` (the turn lock is held), unless the
        runner is not between turns or the application paused receiving."""
        receiver, executor = self._receiver, self._executor
        if not turns.open or receiver is None or executor is None:
            return
        paused = self._receive_paused
        more = False
        if paused is None or not paused():
            now = self._clock()
            stats = self._stats
            received = stats.received
            for sock, fd in zip(turns.subs, turns.fds, strict=True):
                if fd in ready:
                    stats.reads_here += 1
                    # one message, then a look: the rest only if more came (see above)
                    if (
                        not receiver.data(sock, now, limit=1)
                        and readable(sock)
                        and not receiver.data(sock, now)
                    ):  # stopped at the batch: the runner looks at it
                        more = True
                        self._edges.used.add(sock)
            stats.received_here += stats.received - received
        self._lent_turn_ends(turns, executor, read=more)

    def data_wait(self) -> DataWait | None:
        """A caller's wait for data for :meth:`wait_here` (its owner closes it), once the
        runner runs; None without ``direct``, or while the runner is in mid-turn (ask again).

        Never waits for the turn lock: its caller (a consumer's ``poll``) holds the
        consumer's lock, which the runner's deliveries take in mid-turn - waiting here
        deadlocked both threads."""
        turns = self._turns
        if turns is None or not turns.lock.acquire(blocking=False):
            return None
        try:
            return DataWait(turns.fds) if turns.open else None
        finally:
            turns.lock.release()

    def _lent_turn_ends(self, turns: Turns, executor: Executor, read: bool) -> None:
        """A caller's turn ends (the lock is held): execute what it may, and wake the runner
        for the rest (see :meth:`run_here`) or for a message that waits on a socket the
        caller used (``read``: the SUBs, when a read stopped at ``receive_batch`` - one that
        ended on EAGAIN left nothing; after a send, the XPUBs whose notices the machine
        takes, :attr:`Turns.watched`).

        A send may process an XPUB's commands and so take its descriptor's edge of a
        subscription that arrived meanwhile, which the runner's poll then misses until its
        next turn. Where the machine takes notices (a consumer's CONSUMER-HELLO answers) that
        would delay it, so the caller looks (``ZMQ_EVENTS``, ~2-4 us). Elsewhere (a
        producer's XPUB) notices only tell the reach watch who connected back, and every
        turn of the runner reads each XPUB's notices before it runs the reach watch's timer:
        a notice left there is read in time for it, and the look per lone record is saved."""
        stats = self._stats
        sent = stats.sent
        wake, sending = executor.execute_here()
        stats.sent_here += stats.sent - sent
        due = self.machine.next_deadline()
        sleeping_until = turns.sleeping_until
        if due is not None and (sleeping_until is None or due < sleeping_until):
            wake = True
        if (
            wake
            or (read and any(map(readable, turns.subs)))
            or (sending and any(map(readable, turns.watched)))
        ):
            with contextlib.suppress(NodeFailedError):  # the next call says so
                self._mailbox.post(_nothing)

    @property
    def ports(self) -> list[int]:
        """The data ports, one per identity, once started."""
        return [e.port for e in self._endpoints]

    def statistics(self) -> RunnerStats:
        self.failure.check()
        stats = RunnerStats(**vars(self._stats))
        sockets = self._sockets
        if sockets is not None and sockets.gate is not None:
            gate = sockets.gate.statistics()
            stats.refused_keys = gate.refused_keys
            stats.failed_handshakes = gate.failed_handshakes
        return stats

    # -- the thread -------------------------------------------------------------------------

    def _main(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # the thread must report, never die silently
            log.exception("%s: runner crashed; the node is gone", self._name)
            self._error = exc
            self.failure.fail(exc)
            self._bound.set()

    def _run(self) -> None:
        try:
            sockets = SocketSet.open(
                self._context, self._identities, self._config, self._mailbox.endpoint, self._name
            )
        except DafkaError as exc:
            self._error = exc
            self._bound.set()
            return
        self._endpoints = sockets.endpoints
        self._sockets = sockets
        ports = [e.port for e in sockets.endpoints]
        secured = self._config.security is not None
        say_listening(self._name, sockets.listen, ports)
        reach = ReachWatch(
            self._name,
            sockets.listen,
            ports,
            reach_grace(self._config.beacon_interval),
            self._stats,
            secured=secured,
        )
        self._bound.set()
        machine = self.machine
        attributed = machine if isinstance(machine, AttributedMessages) else None
        guard = self._guard
        peers = (
            PeerSockets(self._context, self._config)
            if attributed is not None or guard is not None
            else None
        )
        peer_keys: dict[str, bytes] | None = {} if self._config.security is not None else None
        try:
            receiver = Receiver(
                machine,
                self.discovery,
                self._stats,
                self._drops,
                self._config.receive_batch,
                on_records=machine.on_records if isinstance(machine, RecordRuns) else None,
                on_run_records=(
                    machine.on_run_records if isinstance(machine, RunRecords) else None
                ),
                on_run_direct_records=(
                    machine.on_run_direct_records if isinstance(machine, RunDirectRecords) else None
                ),
                on_direct_records=(
                    machine.on_direct_records if isinstance(machine, DirectRecordRuns) else None
                ),
                attributed=attributed,
                drop_inbound=self._drop_inbound,
                on_welcome=self._welcomed,
                peer_keys=peer_keys,
                guard=guard,
            )
            executor = Executor(
                machine,
                self.discovery,
                sockets,
                self._config,
                self._stats,
                self._drops,
                self._name,
                clock=self._clock,
                persistence=self._persistence,
                peers=peers,
                route_send=self._route_send,
                route_subscribe=self._route_subscribe,
                on_deliver=self._on_deliver,
                on_peer=machine.on_peer if isinstance(machine, PeerNotices) else None,
                peer_keys=peer_keys,
                reach=reach,
                edges=self._edges,
            )
            self._executor = executor
            self._receiver = receiver
            PollLoop(
                machine,
                self.discovery,
                sockets,
                self._mailbox,
                receiver,
                executor,
                clock=self._clock,
                stopping=lambda: self._stopping,
                persistence=self._persistence,
                peers=peers,
                on_subscription=(
                    machine.on_subscription if isinstance(machine, SubscriptionNotices) else None
                ),
                receive_paused=self._receive_paused,
                after_turn=self._after_turn,
                reach=reach,
                edges=self._edges,
                turns=self._turns,
            ).run()
        finally:
            if peers is not None:
                peers.close()
            sockets.close()

    def _welcomed(self) -> None:
        log.info("%s: welcomed by a tower, ready", self._name)
        self._ready.set()
        self._ready_or_failed.set()


def _nothing(_now: float) -> None:
    """Posted to wake the runner: its turn does the rest."""


__all__ = [
    "OWNERS_FILE",
    "DataWait",
    "DropInbound",
    "Identity",
    "NodeNotReadyError",
    "NodeRunner",
    "Persistence",
    "RunnerStats",
]
