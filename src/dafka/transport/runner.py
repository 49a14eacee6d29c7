"""The driver: runs one pure node machine on real ZeroMQ sockets, in its own thread.

Theory of operation
-------------------
A node has one or more *identities* (a store has two: its writer and its reader, each with
its own id, data PUB and data SUB, as in the C reference). The runner binds every identity's
data PUB on an ephemeral port, beacons ``B | id | host | port`` for each to every tower, and
connects every data SUB to each peer the towers announce (the pure ``Discovery`` machine
decides when to connect, disconnect and beacon).

One thread owns all sockets (ZeroMQ sockets are not thread-safe). Each turn of its loop:

1. polls the beacon SUB, the data SUBs, the XPUBs (subscription notices, for STORE-HELLO) and
   an inproc wake-up socket, with a timeout up to the next timer;
2. reads up to ``receive_batch`` messages per readable socket, decodes them (undecodable
   input is counted and dropped) and feeds them to the machine; consecutive RECORDs of one
   partition go in as one run (``on_records``) when the machine has it (see ``_receive``);
3. runs due timers, callables posted from other threads (``post``), and the storage's
   durability clock;
4. drains the machine's outbox and executes it: sends, (un)subscriptions, persistence,
   deliveries. Persisting reports the durable sequences back to the machine, whose ACKs are
   executed in the same turn.

Reading a batch before executing the outbox is what makes the store write once and ACK once
per partition per burst of records.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import zmq
import zmq.backend

from dafka.errors import DafkaError, NodeFailedError
from dafka.node import Discovery, DiscoveryConfig
from dafka.node.actions import (
    Action,
    Connect,
    Deliver,
    Disconnect,
    NodeMachine,
    Persist,
    Send,
    SendBeacon,
    Subscribe,
    Unsubscribe,
)
from dafka.protocol import (
    Ack,
    DataMessage,
    DecodeError,
    DirectRecord,
    EncodeError,
    Record,
    decode_data,
    decode_discovery,
    encode,
)
from dafka.storage import Storage
from dafka.transport._drops import DropLog
from dafka.transport.config import TransportConfig
from dafka.transport.failure import FailureLatch
from dafka.transport.sockets import bound_port, make_socket

log = logging.getLogger(__name__)

Clock = Callable[[], float]

_send: Callable[..., None] = zmq.backend.Socket.send
"""The Cython ``send`` without pyzmq's Python wrapper (routing ids, copy thresholds): the
wrapper costs as much as the send itself for a small frame, and it is paid twice per record
(frame 0 with SNDMORE, then the content: cheaper than ``send_multipart``)."""
_SNDMORE = zmq.SNDMORE
_unpack_sequence = struct.Struct(">Q").unpack_from
"""The u64 big-endian sequence that ends frame 0 of a RECORD."""
_COPY_BELOW = 65536
"""Contents smaller than this are copied into the message (cheaper than tracking a zero-copy
buffer, as pyzmq's own ``copy_threshold``); larger ones are sent without a copy."""
T = TypeVar("T")


class NodeNotReadyError(DafkaError):
    """No tower answered with its welcome within the start timeout."""


@dataclass(frozen=True, slots=True)
class Identity:
    """One node id with its own data sockets; ``xpub`` to see subscription notices."""

    node_id: str
    xpub: bool = False


@dataclass
class RunnerStats:
    """Counters of a runner (``NodeRunner.statistics()``)."""

    received: int = 0
    sent: int = 0
    undecodable: int = 0
    filtered: int = 0
    peers_connected: int = 0
    peers_expired: int = 0
    persisted_records: int = 0
    persist_errors: int = 0
    rejected_endpoints: int = 0
    """Forwarded beacons naming an endpoint nobody can connect to (ignored)."""
    unencodable: int = 0
    """Messages the machine asked to send that the encoder refused (dropped): e.g. a
    STORE-HELLO to a subscriber whose id is not a valid name."""
    connect_errors: int = 0
    """Peers ZeroMQ refused to connect to (the endpoint passed our checks but not its)."""


class _Endpoint:
    """The sockets of one identity."""

    __slots__ = ("identity", "port", "pub", "sub")

    def __init__(self, identity: Identity, pub: zmq.Socket[bytes], sub: zmq.Socket[bytes]) -> None:
        self.identity = identity
        self.pub = pub
        self.sub = sub
        self.port = 0


class NodeRunner:
    """Drives ``machine`` on sockets in a background thread until ``stop()``."""

    def __init__(
        self,
        machine: NodeMachine,
        identities: Sequence[Identity],
        config: TransportConfig,
        *,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
        storage: Storage | None = None,
        clock: Clock = time.monotonic,
        route_send: Callable[[DataMessage], int] | None = None,
        route_subscribe: Callable[[bytes], int] | None = None,
        inbound_filter: Callable[[DataMessage], bool] | None = None,
        on_ack: Callable[[Ack, float, str], None] | None = None,
        on_deliver: Callable[[Deliver], None] | None = None,
        after_turn: Callable[[float], None] | None = None,
        receive_paused: Callable[[], bool] | None = None,
        name: str = "node",
    ) -> None:
        if not identities:
            raise ValueError("a node needs at least one identity")
        self.machine = machine
        self._identities = list(identities)
        self._config = config
        self._context = context or zmq.Context.instance()
        self._storage = storage
        self._clock = clock
        self._route_send = route_send
        self._route_subscribe = route_subscribe
        self._inbound_filter = inbound_filter
        self._on_ack = on_ack
        # Per-peer SUBs (``on_ack`` given): endpoint -> (node id, socket), socket -> node id.
        self._peer_socks: dict[str, tuple[str, zmq.Socket[bytes]]] = {}
        self._sock_sender: dict[zmq.Socket[bytes], str] = {}
        self._prefixes: set[bytes] = set()
        self._poller: zmq.Poller | None = None
        self._on_deliver = on_deliver
        self._after_turn = after_turn
        self._receive_paused = receive_paused
        self._name = name
        self._stats = RunnerStats()
        self._drops = DropLog(name)
        self._posted: collections.deque[Callable[[float], None]] = collections.deque()
        self._wake_lock = threading.Lock()
        self._wake_pending = False
        self._wake_endpoint = f"inproc://dafka-runner-{id(self)}"
        self._waker: zmq.Socket[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._bound = threading.Event()
        self._ready = threading.Event()
        self._ready_or_failed = threading.Event()
        self._stopping = False
        self._error: BaseException | None = None
        self.failure = FailureLatch(name)
        """Set once the thread died: every later ``post``/``call``/``statistics`` raises it."""
        self._calls: set[threading.Event] = set()
        self._calls_lock = threading.Lock()
        self.failure.add_listener(self._wake_callers)
        self._endpoints: list[_Endpoint] = []
        self._on_direct_records: Callable[[str, str, str, int, list[bytes], float], None] | None = (
            getattr(machine, "on_direct_records", None)
        )
        self._on_records: Callable[[str, str, int, list[bytes], float], None] | None = getattr(
            machine, "on_records", None
        )
        self.discovery = Discovery(
            [i.node_id for i in identities],
            DiscoveryConfig(interval=config.beacon_interval, timeout=config.beacon_timeout),
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
        self._waker = make_socket(self._context, zmq.PAIR, linger_ms=0)
        self._waker.connect(self._wake_endpoint)
        if ready_timeout is not None and not self._ready_or_failed.wait(ready_timeout):
            self.stop()
            raise NodeNotReadyError(
                f"{self._name}: no welcome from any tower at "
                f"{', '.join(self._config.tower_pub_addresses)} within {ready_timeout}s"
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
        """Stop the loop (the storage is flushed and final ACKs are sent) and join."""
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
        if self._waker is not None:
            self._waker.close()
            self._waker = None

    def post(self, fn: Callable[[float], None]) -> None:
        """Run ``fn(now)`` in the runner thread (thread-safe); the outbox is then executed.

        Raises :class:`NodeFailedError` once the thread died.
        """
        error = self.failure.error
        if error is not None:
            raise error
        self._posted.append(fn)
        if self._wake_pending:
            return
        with self._wake_lock:
            self._wake_pending = True
            if self._waker is not None:
                try:
                    self._waker.send(b"", zmq.NOBLOCK)
                except zmq.ZMQError as exc:  # the thread is gone (or going): say so
                    self._wake_pending = False
                    raise self.failure.error or NodeFailedError(
                        f"{self._name}: the node does not take work: {exc}", exc
                    ) from exc

    def call(self, fn: Callable[[float], T], timeout: float = 10.0) -> T:
        """Run ``fn(now)`` in the runner thread and return its result (or raise its error).

        Raises :class:`NodeFailedError` if the thread dies before it answers.
        """
        done = threading.Event()
        box: list[Any] = []

        def _run(now: float) -> None:
            try:
                box.append((True, fn(now)))
            except BaseException as exc:
                box.append((False, exc))
            done.set()

        with self._calls_lock:
            self._calls.add(done)
        try:
            self.post(_run)
            answered = done.wait(timeout)
        finally:
            with self._calls_lock:
                self._calls.discard(done)
        if not box:
            self.failure.check()
            if not answered:
                raise DafkaError(f"{self._name}: the node did not answer within {timeout}s")
        ok, value = box[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    @property
    def ports(self) -> list[int]:
        """The data ports, one per identity, once started."""
        return [e.port for e in self._endpoints]

    def statistics(self) -> RunnerStats:
        self.failure.check()
        return RunnerStats(**vars(self._stats))

    def _wake_callers(self, _error: NodeFailedError) -> None:
        self._ready_or_failed.set()
        with self._calls_lock:
            for done in self._calls:
                done.set()

    # -- the loop ---------------------------------------------------------------------------

    def _main(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # the thread must report, never die silently
            log.exception("%s: runner crashed; the node is gone", self._name)
            self._error = exc
            self.failure.fail(exc)
            self._bound.set()

    def _run(self) -> None:
        cfg = self._config
        ctx = self._context
        sockets: list[zmq.Socket[bytes]] = []
        try:
            for identity in self._identities:
                pub = make_socket(
                    ctx,
                    zmq.XPUB if identity.xpub else zmq.PUB,
                    linger_ms=cfg.linger_ms,
                    hwm=cfg.high_watermark,
                )
                sub = make_socket(ctx, zmq.SUB, linger_ms=0, hwm=cfg.high_watermark)
                sockets += [pub, sub]
                endpoint = _Endpoint(identity, pub, sub)
                pub.bind(f"tcp://{cfg.bind_host}:*")
                endpoint.port = bound_port(pub)
                self._endpoints.append(endpoint)
            beacon_pub = make_socket(ctx, zmq.PUB, linger_ms=0)
            beacon_sub = make_socket(ctx, zmq.SUB, linger_ms=0)
            wake = make_socket(ctx, zmq.PAIR, linger_ms=0)
            sockets += [beacon_pub, beacon_sub, wake]
            wake.bind(self._wake_endpoint)
            beacon_sub.setsockopt(zmq.SUBSCRIBE, b"W")
            beacon_sub.setsockopt(zmq.SUBSCRIBE, b"B")
            for address in cfg.tower_sub_addresses:
                beacon_pub.connect(address)
            for address in cfg.tower_pub_addresses:
                beacon_sub.connect(address)
        except zmq.ZMQError as exc:
            for sock in sockets:
                sock.close()
            self._error = DafkaError(f"{self._name}: cannot set up sockets: {exc}")
            self._bound.set()
            return
        self._bound.set()
        try:
            self._loop(beacon_pub, beacon_sub, wake)
        finally:
            self._close_peers()
            for sock in sockets:
                sock.close()

    def _loop(
        self, beacon_pub: zmq.Socket[bytes], beacon_sub: zmq.Socket[bytes], wake: zmq.Socket[bytes]
    ) -> None:
        machine = self.machine
        discovery = self.discovery
        storage = self._storage
        control = zmq.Poller()  # used alone while the application has paused receiving
        control.register(beacon_sub, zmq.POLLIN)
        control.register(wake, zmq.POLLIN)
        poller = zmq.Poller()
        poller.register(beacon_sub, zmq.POLLIN)
        poller.register(wake, zmq.POLLIN)
        subs = [e.sub for e in self._endpoints]
        xpubs = [e.pub for e in self._endpoints if e.identity.xpub]
        for sock in (*subs, *xpubs):
            poller.register(sock, zmq.POLLIN)
        self._poller = poller
        peer_socks = self._sock_sender
        on_subscription = getattr(machine, "on_subscription", None)
        paused = self._receive_paused
        while True:
            now = self._clock()
            deadline = _earliest(
                machine.next_deadline(),
                discovery.next_deadline(),
                storage.next_sync_deadline() if storage is not None else None,
            )
            timeout_ms = -1 if deadline is None else max(0, int((deadline - now) * 1000) + 1)
            receiving = paused is None or not paused()
            if receiving:
                events = dict(poller.poll(timeout_ms))
            else:
                events = dict(control.poll(10 if timeout_ms < 0 else min(timeout_ms, 10)))
            now = self._clock()
            if wake in events:
                self._drain_wake(wake, now)
                if self._stopping:
                    self._shutdown(now, beacon_pub)
                    return
            if beacon_sub in events:
                self._receive_beacons(beacon_sub, now)
            if receiving:
                for sock in subs:
                    if sock in events:
                        self._receive(sock, now)
                if peer_socks:
                    for sock, sender in list(peer_socks.items()):
                        if sock in events:
                            self._receive(sock, now, sender)
            if on_subscription is not None:
                for sock in xpubs:
                    if sock in events:
                        self._receive_notices(sock, on_subscription, now)
            due = machine.next_deadline()
            if due is not None and due <= now:
                machine.on_timer(now)
            due = discovery.next_deadline()
            if due is not None and due <= now:
                discovery.on_timer(now)
            self._execute(now, beacon_pub)
            if self._after_turn is not None:
                self._after_turn(now)

    # -- inputs -----------------------------------------------------------------------------

    def _drain_wake(self, wake: zmq.Socket[bytes], now: float) -> None:
        with self._wake_lock:
            self._wake_pending = False
            while True:
                try:
                    wake.recv(zmq.NOBLOCK)
                except zmq.Again:
                    break
        # Only what was posted before this turn: a callable that posts itself again (a
        # producer draining a long queue in slices) runs next turn, after the sockets, the
        # timers and the beacons had theirs - a turn must never grow without bound.
        posted = self._posted
        for _ in range(len(posted)):
            posted.popleft()(now)

    def _receive_beacons(self, beacon_sub: zmq.Socket[bytes], now: float) -> None:
        while True:
            try:
                frames = beacon_sub.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                message = decode_discovery(frames)
            except DecodeError as exc:
                self._stats.undecodable += 1
                self._drops.drop("an undecodable beacon", exc)
                continue
            discovery = self.discovery
            rejected = discovery.rejected
            discovery.on_message(message, now)
            if discovery.rejected != rejected:
                self._stats.rejected_endpoints += 1
                self._drops.drop("a beacon", discovery.last_rejection)
            if self.discovery.started and not self._ready.is_set():
                log.info("%s: welcomed by a tower, ready", self._name)
                self._ready.set()
                self._ready_or_failed.set()

    def _receive(self, sock: zmq.Socket[bytes], now: float, sender: str | None = None) -> None:
        """Read up to ``receive_batch`` messages and feed them to the machine.

        Frames are received as ``zmq.Frame`` (``copy=False``) because a frame says itself
        whether another follows (``.more``): asking the socket (``RCVMORE``) costs a
        Python-level option lookup per message, and ``recv_multipart`` more still. Any
        number of frames is read, so a malformed message never desynchronises the socket.

        *Runs.* A machine with ``on_records`` (store, consumer) gets consecutive RECORDs of
        one partition as one call: once a RECORD decoded (so its header, frame 0 without
        the 8-byte sequence, passed the decoder's checks), each next message of exactly two
        frames whose frame 0 is that header followed by the next sequence joins the run
        without being decoded into a ``Record``. This is the decoder's own header-cache
        argument (equal bytes, equal verdict), so nothing is accepted that decoding would
        refuse; anything else ends the run, which is fed before that message. The same holds
        for DIRECT-RECORDs (a FETCH reply) with a machine that has ``on_direct_records``
        (the consumer): the header then also fixes the recipient.
        """
        on_message = self.machine.on_message
        on_ack = self._on_ack if sender is not None else None
        flt = self._inbound_filter
        on_records = self._on_records if flt is None else None
        on_direct = self._on_direct_records if flt is None else None
        run_recipient: str | None = None
        stats = self._stats
        recv = sock.recv
        received = 0
        run: list[bytes] = []
        run_header: bytes | None = None
        run_topic = run_producer = ""
        run_first = run_next = 0
        try:
            for _ in range(self._config.receive_batch):
                frame = recv(zmq.NOBLOCK, False)
                received += 1
                if frame.more:
                    part = recv(0, False)
                    frames = [frame.bytes, part.bytes]
                    while part.more:
                        part = recv(0, False)
                        frames.append(part.bytes)
                else:
                    frames = [frame.bytes]
                if run_header is not None:
                    if len(frames) == 2:
                        head = frames[0]
                        if (
                            head[:-8] == run_header
                            and _unpack_sequence(head, len(head) - 8)[0] == run_next
                        ):
                            run.append(frames[1])
                            run_next += 1
                            continue
                    if run_recipient is None:
                        on_records(run_topic, run_producer, run_first, run, now)  # type: ignore[misc]
                    else:
                        on_direct(run_recipient, run_topic, run_producer, run_first, run, now)  # type: ignore[misc]
                    run_header = None
                try:
                    message = decode_data(frames)
                except DecodeError as exc:
                    stats.undecodable += 1
                    self._drops.drop("an undecodable message", exc)
                    continue
                if flt is not None and flt(message):
                    stats.filtered += 1
                    continue
                if on_records is not None and message.__class__ is Record:
                    run_header = frames[0][:-8]
                    run_recipient = None
                    run_topic = message.topic
                    run_producer = message.producer
                    run_first = message.sequence
                    run_next = run_first + 1
                    run = [frames[1]]
                    continue
                if on_direct is not None and message.__class__ is DirectRecord:
                    run_header = frames[0][:-8]
                    run_recipient = message.recipient
                    run_topic = message.topic
                    run_producer = message.producer
                    run_first = message.sequence
                    run_next = run_first + 1
                    run = [frames[1]]
                    continue
                if on_ack is not None and message.__class__ is Ack:
                    on_ack(message, now, sender)  # type: ignore[arg-type]
                    continue
                on_message(message, now)
        except zmq.Again:
            pass
        finally:
            stats.received += received
        if run_header is not None:
            if run_recipient is None:
                on_records(run_topic, run_producer, run_first, run, now)  # type: ignore[misc]
            else:
                on_direct(run_recipient, run_topic, run_producer, run_first, run, now)  # type: ignore[misc]

    def _receive_notices(
        self, sock: zmq.Socket[bytes], handler: Callable[[bytes, bool, float], None], now: float
    ) -> None:
        while True:
            try:
                notice = sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            if notice[:1] in (b"\x00", b"\x01"):
                handler(notice[1:], notice[:1] == b"\x01", now)

    # -- outputs ----------------------------------------------------------------------------

    def _execute(self, now: float, beacon_pub: zmq.Socket[bytes]) -> None:
        """Execute both outboxes until empty (persisting may make the store send ACKs)."""
        discovery_actions = self.discovery.take_actions()
        if discovery_actions:
            self._execute_actions(discovery_actions, beacon_pub)
        storage = self._storage
        on_durable: Any = getattr(self.machine, "on_durable", None)
        for _ in range(16):
            actions = self.machine.take_actions()
            if actions:
                self._execute_actions(actions, beacon_pub)
            durable: dict[tuple[str, str], int] = {}
            if storage is not None:
                durable = storage.take_durable_advances()
                due = storage.next_sync_deadline()
                if due is not None and due <= now:
                    durable.update(storage.sync_due(now))
            if durable and on_durable is not None:
                for (topic, partition), sequence in durable.items():
                    on_durable(topic, partition, sequence, now)
            elif not actions:
                return

    def _execute_actions(self, actions: list[Action], beacon_pub: zmq.Socket[bytes]) -> None:
        endpoints = self._endpoints
        route_send = self._route_send
        stats = self._stats
        pubs = [e.pub for e in endpoints]
        default_pub = pubs[0]
        sent = 0
        for action in actions:
            if action.__class__ is Send:
                message = action.message
                pub = pubs[route_send(message)] if route_send else default_pub
                try:
                    frames = encode(message)
                except EncodeError as exc:  # a reply built from a peer's bad input
                    stats.unencodable += 1
                    self._drops.drop(f"an unencodable {type(message).__name__}", exc)
                    continue
                if len(frames) == 2:
                    _send(pub, frames[0], _SNDMORE)
                    content = frames[1]
                    _send(pub, content, 0, len(content) < _COPY_BELOW)
                else:
                    _send(pub, frames[0])
                sent += 1
            elif isinstance(action, Deliver):
                if self._on_deliver is not None:
                    self._on_deliver(action)
            elif isinstance(action, Persist):
                self._persist(action)
            elif self._on_ack is not None and isinstance(action, Subscribe | Unsubscribe):
                self._subscribe_peers(action)
            elif self._on_ack is not None and isinstance(action, Connect | Disconnect):
                self._connect_peer(action)
            elif isinstance(action, Subscribe | Unsubscribe):
                index = self._route_subscribe(action.prefix) if self._route_subscribe else 0
                option = zmq.SUBSCRIBE if isinstance(action, Subscribe) else zmq.UNSUBSCRIBE
                endpoints[index].sub.setsockopt(option, action.prefix)
            elif isinstance(action, Connect):
                try:
                    for e in endpoints:
                        e.sub.connect(action.endpoint)
                except zmq.ZMQError as exc:
                    stats.connect_errors += 1
                    self._drops.drop("a peer", f"cannot connect to {action.endpoint!r}: {exc}")
                    for e in endpoints:
                        with contextlib.suppress(zmq.ZMQError):
                            e.sub.disconnect(action.endpoint)
                    continue
                stats.peers_connected += 1
                log.info("%s: connected to %s at %s", self._name, action.node_id, action.endpoint)
                on_peer = getattr(self.machine, "on_peer", None)
                if on_peer is not None:
                    on_peer(action.node_id, self._clock())
            elif isinstance(action, Disconnect):
                for e in endpoints:
                    with contextlib.suppress(zmq.ZMQError):
                        e.sub.disconnect(action.endpoint)
                stats.peers_expired += 1
                log.info("%s: lost %s at %s", self._name, action.node_id, action.endpoint)
            elif isinstance(action, SendBeacon):
                self._send_beacons(beacon_pub)
        stats.sent += sent

    # -- per-peer SUBs: who sent an ACK ------------------------------------------------------

    def _subscribe_peers(self, action: Subscribe | Unsubscribe) -> None:
        """Every peer socket carries every subscription (the identities' SUBs stay idle)."""
        if isinstance(action, Subscribe):
            self._prefixes.add(action.prefix)
            option = zmq.SUBSCRIBE
        else:
            self._prefixes.discard(action.prefix)
            option = zmq.UNSUBSCRIBE
        for _, sock in self._peer_socks.values():
            sock.setsockopt(option, action.prefix)

    def _connect_peer(self, action: Connect | Disconnect) -> None:
        """One SUB per peer endpoint, so that an ACK read from it names its store.

        ZeroMQ does not say who sent a message, but it delivers on the socket connected to
        the sender: a socket per peer is the attribution ``min_stores`` needs
        (docs/nodes.md). Used only when the runner was given ``on_ack``.
        """
        stats = self._stats
        if isinstance(action, Disconnect):
            found = self._peer_socks.pop(action.endpoint, None)
            if found is not None:
                sock = found[1]
                self._sock_sender.pop(sock, None)
                if self._poller is not None:
                    self._poller.unregister(sock)
                sock.close()
            stats.peers_expired += 1
            log.info("%s: lost %s at %s", self._name, action.node_id, action.endpoint)
            return
        if action.endpoint in self._peer_socks:
            return
        sock = make_socket(self._context, zmq.SUB, linger_ms=0, hwm=self._config.high_watermark)
        try:
            for prefix in self._prefixes:
                sock.setsockopt(zmq.SUBSCRIBE, prefix)
            sock.connect(action.endpoint)
        except zmq.ZMQError as exc:
            sock.close()
            stats.connect_errors += 1
            self._drops.drop("a peer", f"cannot connect to {action.endpoint!r}: {exc}")
            return
        self._peer_socks[action.endpoint] = (action.node_id, sock)
        self._sock_sender[sock] = action.node_id
        if self._poller is not None:
            self._poller.register(sock, zmq.POLLIN)
        stats.peers_connected += 1
        log.info("%s: connected to %s at %s", self._name, action.node_id, action.endpoint)
        on_peer = getattr(self.machine, "on_peer", None)
        if on_peer is not None:
            on_peer(action.node_id, self._clock())

    def _close_peers(self) -> None:
        for _, sock in self._peer_socks.values():
            sock.close()
        self._peer_socks.clear()
        self._sock_sender.clear()

    def _send_beacons(self, beacon_pub: zmq.Socket[bytes]) -> None:
        host = self._config.advertised_host.encode()
        for e in self._endpoints:
            node_id = e.identity.node_id.encode("utf-8", "surrogateescape")
            beacon_pub.send_multipart([b"B", node_id, host, str(e.port).encode()])

    def _persist(self, action: Persist) -> None:
        if self._storage is None:
            raise DafkaError(f"{self._name}: a Persist action but no storage")
        try:
            self._storage.append(
                action.topic, action.producer, action.first_sequence, action.contents
            )
        except DafkaError as exc:
            self._stats.persist_errors += 1
            log.error("%s: persist failed: %s", self._name, exc)
            return
        self._stats.persisted_records += len(action.contents)

    def _shutdown(self, now: float, beacon_pub: zmq.Socket[bytes]) -> None:
        """Flush the storage and send the last ACKs before the sockets close."""
        self._execute(now, beacon_pub)
        if self._storage is not None:
            self._storage.flush()  # its advances are taken by the next _execute
            self._execute(now, beacon_pub)


def _earliest(*deadlines: float | None) -> float | None:
    present = [d for d in deadlines if d is not None]
    return min(present) if present else None


__all__ = ["Identity", "NodeNotReadyError", "NodeRunner", "RunnerStats"]
