"""The runner's poll over descriptors serves a socket whose descriptor's edge a use took.

The runner polls its sockets' ``ZMQ_FD`` (``_poll.py``), which is edge-triggered: whatever
processes a socket's commands - a read that stops before EAGAIN, a send - may take the signal
of a message that arrived meanwhile, and then nothing signals it again. (A connect takes it
too, and is counted as a use, but libzmq then signals the socket itself: its new session
reports to its owner, so no test can tell a look from none there.) Each test
here makes one such use happen at the moment a message waits (the runner's own thread waits
for the descriptor's signal, then makes the use) and the message must still reach the
machine: it would wait forever (nothing else wakes these runners: beacons every 60 s, no
deadline) were the used socket not looked at before the poll. Both kinds of runner: a
store's (not ``direct``) and a client's (``direct``, callers may use the data sockets).
Real sockets: the test's own PUB and SUB on loopback.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Iterator
from typing import cast

import pytest
import zmq

from dafka.node.actions import Action, Connect, Send, Subscribe
from dafka.protocol import DataMessage, Record, encode
from dafka.transport.config import TransportConfig
from dafka.transport.runner import Identity, NodeRunner
from dafka.transport.tower import Tower
from tests.integration.transport.transport_helpers import wait_for

TOPIC = "edges"
NODE = "e0000000000000000000000000000001"
PEER = "e0000000000000000000000000000002"


class Machine:
    """Takes what the test puts in its outbox; keeps the records and notices it hears."""

    def __init__(self) -> None:
        self.out: list[Action] = []
        self.records: list[int] = []
        self.notices: list[bytes] = []

    def on_message(self, message: DataMessage, now: float) -> None:
        del now
        if isinstance(message, Record):
            self.records.append(message.sequence)

    def on_timer(self, now: float) -> None:
        del now

    def next_deadline(self) -> float | None:
        return None

    def take_actions(self) -> list[Action]:
        out, self.out = self.out, []
        return out

    def on_subscription(self, prefix: bytes, subscribed: bool, now: float) -> None:
        del now
        if subscribed:
            self.notices.append(prefix)


def _config(tower: Tower, receive_batch: int = 1024) -> TransportConfig:
    """Beacons every 60 s: within a test nothing but its sockets and posts wakes the runner."""
    return TransportConfig(
        tower_sub_addresses=(tower.sub_endpoint,),
        tower_pub_addresses=(tower.pub_endpoint,),
        advertised_host="127.0.0.1",
        bind_host="127.0.0.1",
        beacon_interval=60.0,
        beacon_timeout=240.0,
        receive_batch=receive_batch,
    )


@pytest.fixture
def pub() -> Iterator[tuple[zmq.Socket[bytes], str]]:
    """A peer's PUB the runner's SUB connects to, and its endpoint."""
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.PUB)
    sock.setsockopt(zmq.LINGER, 0)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    yield sock, f"tcp://127.0.0.1:{port}"
    sock.close()


def _record(sequence: int) -> list[bytes]:
    return encode(Record(TOPIC, PEER, sequence, b"x"))


def _runner(machine: Machine, config: TransportConfig, direct: bool) -> NodeRunner:
    runner = NodeRunner(machine, [Identity(NODE, xpub=True)], config, name="edges", direct=direct)
    runner.start(ready_timeout=None)
    return runner


def _subscribed(
    runner: NodeRunner, machine: Machine, pub: zmq.Socket[bytes], endpoint: str
) -> None:
    """Connect the runner's SUB to ``pub`` and subscribe; send until a record arrives."""

    def connect(_now: float) -> None:
        machine.out += [Subscribe(b"M" + TOPIC.encode()), Connect(PEER, endpoint)]

    runner.post(connect)

    def arrived() -> bool:
        pub.send_multipart(_record(0))
        return bool(machine.records)

    wait_for(arrived, "the runner's SUB to receive")


def _when_signalled(sock: zmq.Socket[bytes], then: list[Action], machine: Machine) -> None:
    """In the runner's thread: wait for ``sock``'s descriptor to be signalled, then give the
    machine ``then`` to do (its execution uses the socket, taking the signal)."""
    waiter = select.poll()
    waiter.register(cast(int, sock.get(zmq.FD)), select.POLLIN)
    assert waiter.poll(10_000), "no signal on the socket within 10 s"
    machine.out += then


@pytest.mark.parametrize("direct", [False, True], ids=["store", "client"])
def test_a_sub_whose_read_stopped_at_the_batch_is_read_again(
    tower: Tower, pub: tuple[zmq.Socket[bytes], str], direct: bool
) -> None:
    """``receive_batch`` 1: every read stops after one message with the SUB's pipe still
    active, so no later message signals the descriptor - only the loop's look finds them."""
    machine = Machine()
    runner = _runner(machine, _config(tower, receive_batch=1), direct)
    try:
        sock, endpoint = pub
        _subscribed(runner, machine, sock, endpoint)
        for sequence in range(1, 21):
            sock.send_multipart(_record(sequence))
        wait_for(
            lambda: 20 in machine.records, "the records after a read that stopped at the batch"
        )
        assert [s for s in machine.records if s] == list(range(1, 21))
    finally:
        runner.stop()


@pytest.mark.parametrize("direct", [False, True], ids=["store", "client"])
def test_a_notice_whose_signal_a_send_took_is_read(tower: Tower, direct: bool) -> None:
    """A subscriber subscribes again (a notice for the runner's XPUB, its descriptor
    signalled) and, before the runner reads it, the machine sends on that XPUB: the send
    processes the XPUB's commands (the first send does, libzmq throttles later ones to once
    a millisecond), taking the signal. The machine still hears the notice."""
    machine = Machine()
    runner = _runner(machine, _config(tower), direct)
    sub: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    try:
        sub.setsockopt(zmq.SUBSCRIBE, b"first")
        sub.connect(f"tcp://127.0.0.1:{runner.ports[0]}")
        wait_for(lambda: b"first" in machine.notices, "the first notice")
        xpub = runner._endpoints[0].pub
        done = threading.Event()
        send: list[Action] = [Send(Record(TOPIC, NODE, 1, b"x"))]

        def in_runner(_now: float) -> None:
            done.set()
            _when_signalled(xpub, send, machine)

        runner.post(in_runner)
        assert done.wait(10)
        sub.setsockopt(zmq.SUBSCRIBE, b"second")
        wait_for(lambda: b"second" in machine.notices, "the notice whose signal a send took")
    finally:
        sub.close()
        runner.stop()
