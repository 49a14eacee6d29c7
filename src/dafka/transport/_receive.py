"""Inbound: read what the sockets hold, decode it, and feed the machines.

Undecodable input is counted and dropped (rate-limited log), never raised. Data messages
go to the node machine, consecutive RECORDs of one partition as one run (see
:meth:`Receiver.data`); beacons and welcomes go to the discovery machine; XPUB subscription
notices to the machine's ``on_subscription``.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Sequence

import zmq

from dafka.node import Discovery
from dafka.node.actions import AttributedMessages, NodeMachine
from dafka.protocol import (
    DecodeError,
    DirectRecord,
    PeerEndpoint,
    Record,
    decode_data,
    decode_discovery,
)
from dafka.transport._drops import DropLog
from dafka.transport._guard import Guard
from dafka.transport._reach import ReachWatch
from dafka.transport._stats import RunnerStats

log = logging.getLogger("dafka.transport.runner")

_pack_sequence = struct.Struct(">Q").pack
"""The u64 big-endian sequence that ends frame 0 of a RECORD."""
_MAX_PEER_KEYS = 100_000
"""Endpoint keys remembered at most (each secured beacon's endpoint; live ones refill)."""
_END = 1 << 64
"""No sequence reaches it: a run that ends at 2**64 - 1 expects nothing after it."""

OnRecords = Callable[[str, str, int, list[bytes], float], None]
"""``on_records(topic, producer, first_sequence, contents, now)``."""
OnRunRecords = Callable[[str, str, int, list[bytes], int, int, float], None]
"""``on_run_records(topic, producer, first_sequence, contents, epoch, run_start, now)``."""
OnRunDirectRecords = Callable[[str, str, str, int, list[bytes], int, int, float], None]
"""``on_run_direct_records(recipient, topic, producer, first, contents, epoch, run_start, now)``."""
OnDirectRecords = Callable[[str, str, str, int, list[bytes], float], None]
"""``on_direct_records(recipient, topic, producer, first_sequence, contents, now)``."""
OnNotice = Callable[[bytes, bool, float], None]
"""``on_subscription(prefix, subscribed, now)``: an XPUB notice."""
DropInbound = Callable[[Sequence[bytes]], bool]
"""Fault injection (tests, ``scripts/chaos.py``): called with the raw frames of every message
a data socket delivers, before decoding and run grouping; True drops the message as if the
network had lost it (counted in ``RunnerStats.injected_drops``). Everything that is not
dropped takes the production path. ``dafka.testing.lossy_records`` makes one."""


class Receiver:
    """Reads a runner's sockets into its machines (in the runner thread)."""

    def __init__(
        self,
        machine: NodeMachine,
        discovery: Discovery,
        stats: RunnerStats,
        drops: DropLog,
        receive_batch: int,
        *,
        on_records: OnRecords | None,
        on_direct_records: OnDirectRecords | None,
        on_run_records: OnRunRecords | None = None,
        on_run_direct_records: OnRunDirectRecords | None = None,
        attributed: AttributedMessages | None,
        drop_inbound: DropInbound | None,
        on_welcome: Callable[[], None],
        peer_keys: dict[str, bytes] | None = None,
        guard: Guard | None = None,
    ) -> None:
        self._machine = machine
        self._guard = guard
        """A node with an ACL: what each sender's key may send (``_guard.py``)."""
        self._peer_keys = peer_keys
        """Secured nodes: endpoint -> the key of the beacon that named it (for Connect)."""
        self._discovery = discovery
        self._stats = stats
        self._drops = drops
        self._receive_batch = receive_batch
        self._on_records = on_records
        self._on_run_records = on_run_records
        self._on_run_direct_records = on_run_direct_records
        self._on_direct_records = on_direct_records
        self._attributed = attributed
        self._drop_inbound = drop_inbound
        self._on_welcome = on_welcome
        self._welcomed = False

    def beacons(self, beacon_sub: zmq.Socket[bytes], now: float) -> None:
        """Every beacon and welcome waiting, into the discovery machine."""
        discovery = self._discovery
        if self._guard is not None:
            self._guard.refresh(now)
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
            peer_keys = self._peer_keys
            if peer_keys is not None and isinstance(message, PeerEndpoint) and message.public_key:
                if len(peer_keys) >= _MAX_PEER_KEYS and message.endpoint not in peer_keys:
                    peer_keys.clear()  # a bound: the live peers' beacons refill it
                peer_keys[message.endpoint] = message.public_key.encode()
                if self._guard is not None:
                    self._guard.note_node(message.node_id, message.public_key)
            rejected, refused = discovery.rejected, discovery.refused
            discovery.on_message(message, now)
            if discovery.rejected != rejected:
                self._stats.rejected_endpoints += 1
                self._drops.drop("a beacon", discovery.last_rejection)
            elif discovery.refused != refused:
                self._stats.refused_peers += 1
                self._drops.drop("a new peer", discovery.last_rejection)
            if discovery.started and not self._welcomed:
                self._welcomed = True
                self._on_welcome()

    def notices(
        self,
        sock: zmq.Socket[bytes],
        reach: ReachWatch,
        handler: OnNotice | None,
        now: float,
        topic: str = "",
    ) -> None:
        """Every XPUB notice waiting (``\\x01`` subscribe, ``\\x00`` unsubscribe + prefix):
        subscriptions to the reach watch, all to ``handler`` (the machine's, if it has one).

        With an ACL the XPUB is ``XPUB_MANUAL``: a subscription applies only once granted here
        (the guard decides from the subscriber's key, the notice's ``User-Id``; ``topic`` is
        the one the PUB publishes, "" if several); a refused one is counted and never seen by
        the machine."""
        if self._guard is not None:
            self._guarded_notices(sock, reach, handler, now, topic, self._guard)
            return
        while True:
            try:
                notice = sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            kind = notice[:1]
            if kind == b"\x01":
                reach.notice(notice[1:])
            if handler is not None and kind in (b"\x00", b"\x01"):
                handler(notice[1:], kind == b"\x01", now)

    def _guarded_notices(
        self,
        sock: zmq.Socket[bytes],
        reach: ReachWatch,
        handler: OnNotice | None,
        now: float,
        topic: str,
        guard: Guard,
    ) -> None:
        while True:
            try:
                frame = sock.recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            notice = frame.bytes
            kind, prefix = notice[:1], notice[1:]
            if kind == b"\x01":
                reach.notice(prefix)  # it connected back, granted or not
                try:
                    user_id = frame.get("User-Id")
                except zmq.ZMQError:
                    user_id = ""
                if not guard.admit_subscription(prefix, str(user_id), topic, now):
                    continue
                sock.setsockopt(zmq.SUBSCRIBE, prefix)
            elif kind == b"\x00":
                sock.setsockopt(zmq.UNSUBSCRIBE, prefix)
            else:
                continue
            if handler is not None:
                handler(prefix, kind == b"\x01", now)

    def _deliver_run(
        self,
        recipient: str | None,
        topic: str,
        producer: str,
        first: int,
        contents: list[bytes],
        epoch: int,
        run_start: int,
        now: float,
    ) -> None:
        """One run of equal RECORDs (or DIRECT-RECORDs to ``recipient``) to the machine, with
        its producer run when it names one and the machine takes it (once per run)."""
        if recipient is not None:
            if epoch and self._on_run_direct_records is not None:
                self._on_run_direct_records(
                    recipient, topic, producer, first, contents, epoch, run_start, now
                )
            else:
                self._on_direct_records(recipient, topic, producer, first, contents, now)  # type: ignore[misc]
        elif epoch and self._on_run_records is not None:
            self._on_run_records(topic, producer, first, contents, epoch, run_start, now)
        else:
            self._on_records(topic, producer, first, contents, now)  # type: ignore[misc]

    def data(
        self,
        sock: zmq.Socket[bytes],
        now: float,
        sender: str | None = None,
        key: bytes | None = None,
        limit: int = 0,
    ) -> bool:
        """Read up to ``receive_batch`` messages (``limit``, if given) and feed them to the
        machine; True if the socket had no more (False: that many were read, more may wait).

        Frames are received as ``zmq.Frame`` (``copy=False``) because a frame says itself
        whether another follows (``.more``): asking the socket (``RCVMORE``) costs a
        Python-level option lookup per message (~0.6 us), and ``recv_multipart`` more
        still. Any number of frames is read, so a malformed message never desynchronises
        the socket.

        *Content.* A ``zmq.Frame`` costs ~0.37 us to make and read, a frame received as
        bytes ~0.17 us, so the content frame of a RECORD that continues a run (below) is
        received as bytes: it is then not known whether more frames follow it, which no
        peer of ours sends. Should a peer send some, they are read as messages of their own
        (each decoded and checked like any other, so dropped as undecodable unless they are
        one), exactly what the peer could have sent as separate messages; the socket is in
        step again after that message's last frame. Every other frame is a ``zmq.Frame``.

        *Runs.* A machine with ``on_records`` (store, consumer) gets consecutive RECORDs of
        one partition as one call: once a RECORD decoded (so its header, frame 0 without
        the 8-byte sequence, passed the decoder's checks), each next message of exactly two
        frames whose frame 0 is that header followed by the next sequence joins the run
        without being decoded into a ``Record``. This is the decoder's own header-cache
        argument (equal bytes, equal verdict), so nothing is accepted that decoding would
        refuse; anything else ends the run, which is fed before that message. The same holds
        for DIRECT-RECORDs (a FETCH reply) with a machine that has ``on_direct_records``
        (the consumer): the header then also fixes the recipient.

        A RECORD that names its producer's run (``epoch`` > 0: frame 0 ends with the
        16-byte run trailer) starts a run whose next records must carry the same trailer;
        it goes to ``on_run_records`` when the machine has it (store, consumer), else to
        ``on_records`` with the epoch left out; DIRECT-RECORD runs likewise go to
        ``on_run_direct_records`` (consumer).

        ``sender`` names the peer of a per-peer socket: what is read there goes to the
        machine's ``on_message_from`` (an :class:`AttributedMessages`), and each message it
        refuses (``rejected`` grew) is a counted, logged drop. On a node with an ACL every
        message decoded is first shown to the guard with ``key``, the sender's: a refused one
        is dropped (counted there), and a run only starts at an admitted RECORD (its next
        ones share its header, so its topic, partition and verdict). A message that
        ``drop_inbound`` drops is gone before any of this, as if never received: a run it
        interrupts ends at the gap, exactly as with a real loss.
        """
        on_message = self._machine.on_message
        guard = self._guard
        attributed = self._attributed if sender is not None else None
        drop = self._drop_inbound
        on_records = self._on_records
        on_direct = self._on_direct_records
        run_recipient: str | None = None
        stats = self._stats
        recv = sock.recv
        received = 0
        run: list[bytes] = []
        run_header: bytes | None = None
        run_topic = run_producer = ""
        run_first = run_next = 0
        run_expect = b""
        run_tail = b""
        run_epoch = run_start = 0
        deliver_run = self._deliver_run
        drained = False
        try:
            for _ in range(limit or self._receive_batch):
                frame = recv(zmq.NOBLOCK, False)
                received += 1
                if frame.more:
                    if drop is None and run_header is not None:
                        head = frame.bytes
                        if head == run_expect:
                            # The steady state: a RECORD that continues the run. Its content
                            # is received as bytes (no Frame: see the docstring, "Content").
                            run.append(recv(0))
                            run_next += 1
                            run_expect = (
                                run_header + _pack_sequence(run_next) + run_tail
                                if run_next < _END
                                else b""
                            )
                            continue
                    else:
                        head = frame.bytes
                    part = recv(0, False)
                    frames = [head, part.bytes]
                    while part.more:
                        part = recv(0, False)
                        frames.append(part.bytes)
                else:
                    frames = [frame.bytes]
                if drop is not None and drop(frames):
                    stats.injected_drops += 1
                    continue
                if run_header is not None:
                    if len(frames) == 2 and frames[0] == run_expect:
                        run.append(frames[1])
                        run_next += 1
                        run_expect = (
                            run_header + _pack_sequence(run_next) + run_tail
                            if run_next < _END
                            else b""
                        )
                        continue
                    deliver_run(
                        run_recipient,
                        run_topic,
                        run_producer,
                        run_first,
                        run,
                        run_epoch,
                        run_start,
                        now,
                    )
                    run_header = None
                try:
                    message = decode_data(frames)
                except DecodeError as exc:
                    stats.undecodable += 1
                    self._drops.drop("an undecodable message", exc)
                    continue
                if guard is not None and not guard.admit(message, key, now):
                    continue
                if on_records is not None and message.__class__ is Record:
                    run_epoch = message.epoch
                    if run_epoch:
                        run_start = message.run_start
                        run_tail = frames[0][-16:]
                        run_header = frames[0][:-24]
                    else:
                        run_tail = b""
                        run_header = frames[0][:-8]
                    run_recipient = None
                    run_topic = message.topic
                    run_producer = message.producer
                    run_first = message.sequence
                    run_next = run_first + 1
                    run_expect = (
                        run_header + _pack_sequence(run_next) + run_tail if run_next < _END else b""
                    )
                    run = [frames[1]]
                    continue
                if on_direct is not None and message.__class__ is DirectRecord:
                    run_epoch = message.epoch  # left out for a machine without on_run_direct
                    if run_epoch:
                        run_start = message.run_start
                        run_tail = frames[0][-16:]
                        run_header = frames[0][:-24]
                    else:
                        run_tail = b""
                        run_header = frames[0][:-8]
                    run_recipient = message.recipient
                    run_topic = message.topic
                    run_producer = message.producer
                    run_first = message.sequence
                    run_next = run_first + 1
                    run_expect = (
                        run_header + _pack_sequence(run_next) + run_tail if run_next < _END else b""
                    )
                    run = [frames[1]]
                    continue
                if attributed is not None:
                    rejected = attributed.rejected
                    attributed.on_message_from(message, now, sender)  # type: ignore[arg-type]
                    if attributed.rejected != rejected:  # counted by the machine
                        self._drops.drop(f"a message from {sender}", attributed.last_rejection)
                    continue
                on_message(message, now)
        except zmq.Again:
            drained = True
        finally:
            stats.received += received
        if run_header is not None:
            deliver_run(
                run_recipient, run_topic, run_producer, run_first, run, run_epoch, run_start, now
            )
        return drained


__all__ = [
    "DropInbound",
    "OnDirectRecords",
    "OnNotice",
    "OnRecords",
    "OnRunDirectRecords",
    "OnRunRecords",
    "Receiver",
]
