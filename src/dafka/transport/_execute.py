"""Outbound: execute what the machines asked for, in order.

Sends are encoded and published (a message the encoder refuses - a reply built from a
peer's bad input - is counted and dropped); a ``SendRecords`` run (a producer's records) or a
``SendDirectRecords`` run (a store's FETCH reply) is encoded once and its frames sent
without a Python frame per record;
(un)subscriptions and peer connections change the SUB sockets; ``Deliver`` goes to the
application's callback and ``Persist`` to the node's
:class:`~dafka.transport._persistence.Persistence`. After each outbox the
persistence reports what became durable, which may give the machine ACKs to send: the loop
goes on until both are quiet (bounded, so that a turn ends).
"""

from __future__ import annotations

import contextlib
import logging
import struct
from collections import deque
from collections.abc import Callable, Iterator
from itertools import chain, cycle, repeat

import zmq
import zmq.backend

from dafka.errors import DafkaError
from dafka.node import Discovery
from dafka.node.actions import (
    Action,
    Connect,
    Deliver,
    Disconnect,
    KeepRuns,
    NodeMachine,
    Persist,
    Send,
    SendBeacon,
    SendDirectRecords,
    SendRecords,
    Subscribe,
    Unsubscribe,
)
from dafka.protocol import BEACON_ID, DataMessage, DirectRecord, EncodeError, Record, encode
from dafka.transport._drops import DropLog
from dafka.transport._persistence import Persistence
from dafka.transport._poll import Edges
from dafka.transport._reach import ReachWatch
from dafka.transport._socket_set import PeerSockets, SocketSet
from dafka.transport._stats import RunnerStats
from dafka.transport.config import TransportConfig

log = logging.getLogger("dafka.transport.runner")

_send: Callable[..., None] = zmq.backend.Socket.send
"""The Cython ``send`` without pyzmq's Python wrapper (routing ids, copy thresholds): the
wrapper costs as much as the send itself for a small frame, and it is paid twice per record
(frame 0 with SNDMORE, then the content: cheaper than ``send_multipart``)."""
_SNDMORE = zmq.SNDMORE
_COPY_BELOW = 65536
"""Contents smaller than this are copied into the message (cheaper than tracking a zero-copy
buffer, as pyzmq's own ``copy_threshold``); larger ones are sent without a copy."""
_RUN_FLAGS = (_SNDMORE, 0)
"""The flags of a DIRECT-RECORD run's frames, cycled: frame 0 with SNDMORE, the content not."""
_pack_sequence = struct.Struct(">Q").pack
_only_bytes = frozenset((bytes,)).issuperset
_ROUNDS = 16
_END = 1 << 64
"""No sequence reaches it (uint64)."""
_RUNS_KEPT = 1024
"""Runs whose frame 0 header ``Executor._send_run`` keeps at most (a store's reader answers
FETCHes of many consumers and partitions: cleared when full, refilled by the live ones)."""
_RunKey = tuple[str | None, str, str, int, int]
"""A run's (recipient or None for RECORDs, topic, producer, epoch, run start)."""
_RunFrames = tuple[bytes, bytes, "zmq.Socket[bytes]"]
"""A run's frame 0 header, its run trailer (b"" without an epoch) and the PUB it goes on."""
"""Outbox / durability rounds per turn at most (each round may produce the next one's work)."""

OnPeer = Callable[[str, float], None]
"""``on_peer(node_id, now)``: a peer was connected."""


class Executor:
    """Executes the outboxes of a runner's machines on its sockets (in the runner thread)."""

    def __init__(
        self,
        machine: NodeMachine,
        discovery: Discovery,
        sockets: SocketSet,
        config: TransportConfig,
        stats: RunnerStats,
        drops: DropLog,
        name: str,
        *,
        clock: Callable[[], float],
        persistence: Persistence | None,
        peers: PeerSockets | None,
        route_send: Callable[[DataMessage], int] | None,
        route_subscribe: Callable[[bytes], int] | None,
        on_deliver: Callable[[Deliver], None] | None,
        on_peer: OnPeer | None,
        peer_keys: dict[str, bytes] | None = None,
        reach: ReachWatch,
        edges: Edges,
    ) -> None:
        self._machine = machine
        self._used = edges.used
        """Each socket a send, a connect or a subscription may have taken the descriptor's
        edge of (``_poll.py``): the loop looks at it before it sleeps."""
        self._peer_keys: dict[str, bytes] = {} if peer_keys is None else peer_keys
        """Endpoint -> the Z85 key its secured beacon came with (filled by the Receiver)."""
        self._discovery = discovery
        self._sockets = sockets
        self._config = config
        self._stats = stats
        self._drops = drops
        self._name = name
        self._clock = clock
        self._persistence = persistence
        self._peers = peers
        self._route_send = route_send
        self._route_subscribe = route_subscribe
        self._on_deliver = on_deliver
        self._on_peer = on_peer
        self._reach = reach
        self._pubs = [e.pub for e in sockets.endpoints]
        self._runs: dict[_RunKey, _RunFrames] = {}
        """The header, trailer and PUB of each run sent (``_send_run``)."""
        self._deferred: list[Action] = []
        """What a caller's :meth:`execute_here` left to the runner, run first next turn."""

    def execute(self, now: float) -> None:
        """Execute both outboxes until empty (persisting may make the store send ACKs)."""
        if self._deferred:
            deferred, self._deferred = self._deferred, []
            self.execute_actions(deferred)
        discovery_actions = self._discovery.take_actions()
        if discovery_actions:
            self.execute_actions(discovery_actions)
        persistence = self._persistence
        machine = self._machine
        for _ in range(_ROUNDS):
            actions = machine.take_actions()
            if actions:
                self.execute_actions(actions)
            advanced = persistence is not None and persistence.report_durable(now)
            if not advanced and not actions:
                return

    def execute_here(self) -> tuple[bool, bool]:
        """In a caller's thread holding the turn lock (``_turns.py``): execute the machine's
        outbox if it holds only sends - they go out on the data XPUBs, the sockets the lock
        lends - and deliveries (``on_deliver`` is thread-safe), else keep it, in order, for
        the runner's next turn. Returns (the runner must be woken for it, the XPUBs were
        used)."""
        actions = self._machine.take_actions()
        if self._deferred:  # an earlier caller's, not yet run: these go after them
            self._deferred += actions
            return True, False
        if len(actions) == 1:  # a lone record's: its run, or its delivery
            action = actions[0]
            if action.__class__ is SendRecords:
                self._stats.sent += self._send_run(action)
                return False, True
            if action.__class__ is Deliver and self._on_deliver is not None:
                self._on_deliver(action)
                return False, False
        sending = False
        for action in actions:
            kind = action.__class__
            if kind is not Deliver:
                if kind is not SendRecords and kind is not Send:
                    self._deferred += actions
                    return True, False
                sending = True
        if actions:
            self.execute_actions(actions)
        return False, sending

    def shutdown(self, now: float) -> None:
        """The last turn: execute, make everything durable, and send the last ACKs."""
        self.execute(now)
        if self._persistence is not None:
            self._persistence.flush()  # its advances are reported by the next execute
            self.execute(now)

    def execute_actions(self, actions: list[Action]) -> None:
        endpoints = self._sockets.endpoints
        route_send = self._route_send
        stats = self._stats
        pubs = self._pubs
        default_pub = pubs[0]
        peers = self._peers
        used = self._used
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
                used.add(pub)
                if len(frames) == 2:
                    _send(pub, frames[0], _SNDMORE)
                    content = frames[1]
                    _send(pub, content, 0, len(content) < _COPY_BELOW)
                else:
                    _send(pub, frames[0])
                sent += 1
            elif action.__class__ is SendRecords or action.__class__ is SendDirectRecords:
                sent += self._send_run(action)
            elif isinstance(action, Deliver):
                if self._on_deliver is not None:
                    self._on_deliver(action)
            elif isinstance(action, Persist):
                if self._persistence is None:
                    raise DafkaError(f"{self._name}: a Persist action but no storage")
                self._persistence.persist(action)
            elif isinstance(action, KeepRuns):
                if self._persistence is None:
                    raise DafkaError(f"{self._name}: a KeepRuns action but no storage")
                self._persistence.keep_runs(action)
            elif isinstance(action, Subscribe | Unsubscribe):
                if peers is not None:
                    peers.subscribe(action.prefix, isinstance(action, Subscribe))
                    continue
                index = self._route_subscribe(action.prefix) if self._route_subscribe else 0
                option = zmq.SUBSCRIBE if isinstance(action, Subscribe) else zmq.UNSUBSCRIBE
                endpoints[index].sub.setsockopt(option, action.prefix)
                used.add(endpoints[index].sub)
            elif isinstance(action, Connect):
                self._connect(action, peers)
            elif isinstance(action, Disconnect):
                if peers is not None:
                    peers.remove(action.endpoint)
                else:
                    for e in endpoints:
                        used.add(e.sub)
                        with contextlib.suppress(zmq.ZMQError):
                            e.sub.disconnect(action.endpoint)
                stats.peers_expired += 1
                self._reach.lost(action.node_id, action.endpoint)
                log.info("%s: lost %s at %s", self._name, action.node_id, action.endpoint)
            elif isinstance(action, SendBeacon):
                self._send_beacons()
        stats.sent += sent

    def _send_run(self, run: SendRecords | SendDirectRecords) -> int:
        """Publish a run of RECORDs or DIRECT-RECORDs; returns how many were sent.

        The first record of a run whose kind, recipient, topic, producer and run (epoch,
        start) were not seen before is encoded as a ``Send`` of it would be (same checks,
        same route): its frame 0 without the 8-byte sequence is the header of every record
        of the run, so each next frame 0 is that header plus its packed sequence (the last
        one is checked too: no sequence beyond uint64). The header, the run trailer and the
        route are kept (``_runs``, bounded): a later run with the same fields is not encoded
        again - a producer's lone records, one run each, paid two message objects and an
        encode per record for them - only its sequences and contents are checked (the
        encoder's verdict on the rest was given by equal fields). The frames then go out
        through ``map`` (no Python frame per record), a lone record's as two sends. A run
        the checks refuse, or with a content that is not ``bytes``, goes record by record
        through the ``Send`` path (whose drops are counted per record).
        """
        contents = run.contents
        count = len(contents)
        if not count:
            return 0
        first = run.first_sequence
        epoch, start = run.epoch, run.run_start
        direct = run.__class__ is SendDirectRecords
        key = (
            run.recipient if direct else None,  # type: ignore[union-attr]
            run.topic,
            run.producer,
            epoch,
            start,
        )
        known = self._runs.get(key)
        if (
            known is None
            or not _only_bytes(map(type, contents))
            or first.__class__ is not int
            or first < (start if epoch else 0)
            or first + count > _END
        ):
            known = self._run_header(run, key)
            if known is None:
                self.execute_actions(list(map(Send, run.messages())))
                return 0  # counted by that call
        header, tail, pub = known
        self._used.add(pub)
        if count == 1:
            _send(pub, header + _pack_sequence(first) + tail, _SNDMORE)
            content = contents[0]
            _send(pub, content, 0, len(content) < _COPY_BELOW)
            return 1
        heads: Iterator[bytes]
        if tail:
            heads = (header + _pack_sequence(s) + tail for s in range(first, first + count))
        else:
            heads = map(header.__add__, map(_pack_sequence, range(first, first + count)))
        if max(map(len, contents)) < _COPY_BELOW:
            frames = chain.from_iterable(zip(heads, contents, strict=True))
            deque(map(_send, repeat(pub), frames, cycle(_RUN_FLAGS)), 0)
        else:
            for head, content in zip(heads, contents, strict=True):
                _send(pub, head, _SNDMORE)
                _send(pub, content, 0, len(content) < _COPY_BELOW)
        return count

    def _run_header(self, run: SendRecords | SendDirectRecords, key: _RunKey) -> _RunFrames | None:
        """The header, run trailer and PUB of ``run``'s records, checked by encoding its first
        and last (kept under ``key``); None if the encoder refuses them."""
        contents = run.contents
        count = len(contents)
        first = run.first_sequence
        epoch, start = run.epoch, run.run_start
        probe: Record | DirectRecord
        if isinstance(run, SendRecords):
            probe = Record(run.topic, run.producer, first, contents[0], epoch, start)
            last: Record | DirectRecord = Record(
                run.topic, run.producer, first + count - 1, b"", epoch, start
            )
        else:
            recipient = run.recipient
            probe = DirectRecord(
                recipient, run.topic, run.producer, first, contents[0], epoch, start
            )
            last = DirectRecord(
                recipient, run.topic, run.producer, first + count - 1, b"", epoch, start
            )
        try:
            if not _only_bytes(map(type, contents)):
                raise EncodeError("a content that is not bytes")
            frame0 = encode(probe)[0]
            tail = frame0[-16:] if epoch else b""  # the run trailer, the same for every record
            header = frame0[: len(frame0) - 8 - len(tail)]
            if count > 1:
                encode(last)
        except EncodeError:
            return None
        route_send = self._route_send
        pub = self._pubs[route_send(probe)] if route_send else self._pubs[0]
        runs = self._runs
        if len(runs) >= _RUNS_KEPT:
            runs.clear()
        known = runs[key] = (header, tail, pub)
        return known

    def _connect(self, action: Connect, peers: PeerSockets | None) -> None:
        """Connect to a new peer: its own SUB with ``peers``, else every identity's SUB.

        A secured node connects as a CURVE client of the key the peer's beacon came with; a
        peer whose beacon carried none cannot be reached securely (counted, not connected).
        """
        security = self._config.security
        server_key: bytes | None = None
        if security is not None:
            server_key = self._peer_keys.get(action.endpoint)
            if server_key is None:
                self._stats.keyless_peers += 1
                self._drops.drop(
                    "a peer", f"{action.node_id[:64]!r} at {action.endpoint!r} has no key"
                )
                return
        try:
            if peers is not None:
                if action.endpoint in peers:
                    return
                peers.add(action.node_id, action.endpoint, server_key)
            else:
                try:
                    for e in self._sockets.endpoints:
                        if security is not None and server_key is not None:
                            security.client(e.sub, server_key)
                        self._used.add(e.sub)
                        e.sub.connect(action.endpoint)
                except zmq.ZMQError:
                    for e in self._sockets.endpoints:
                        with contextlib.suppress(zmq.ZMQError):
                            e.sub.disconnect(action.endpoint)
                    raise
        except zmq.ZMQError as exc:
            self._stats.connect_errors += 1
            self._drops.drop("a peer", f"cannot connect to {action.endpoint!r}: {exc}")
            return
        self._stats.peers_connected += 1
        self._reach.found(action.node_id, action.endpoint, self._clock())
        log.info("%s: connected to %s at %s", self._name, action.node_id, action.endpoint)
        if self._on_peer is not None:
            self._on_peer(action.node_id, self._clock())

    def _send_beacons(self) -> None:
        host = self._sockets.listen.advertise.encode()
        beacon_pub = self._sockets.beacon_pub
        for e in self._sockets.endpoints:
            node_id = e.identity.node_id.encode("utf-8", "surrogateescape")
            beacon_pub.send_multipart([BEACON_ID, node_id, host, str(e.port).encode()])


__all__ = ["Executor", "OnPeer"]
