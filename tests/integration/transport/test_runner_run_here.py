"""``NodeRunner.run_here``: a caller's thread sends a lone record itself (``_turns.py``).

A runner made with ``direct=True`` lends its machine and data XPUB to a caller while it is
blocked in its poll: the caller's function runs in the caller's thread and its sends leave at
once, without the runner waking. Never while the runner is in mid-turn; what is not a send
is left to the runner, in order; a deadline made earlier than the runner sleeps until, and a
subscription notice, still reach the runner. Real sockets: a raw SUB reads the node's XPUB.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import zmq

from dafka.node.actions import Action, Deliver, Disconnect, SendRecords
from dafka.protocol import DataMessage, Record, decode_data
from dafka.transport._turns import DataWait
from dafka.transport.config import TransportConfig
from dafka.transport.runner import Identity, NodeRunner
from dafka.transport.tower import Tower
from tests.integration.transport.transport_helpers import held_turn, loopback, wait_for

TOPIC = "runhere"
NODE = "70000000000000000000000000000007"


class Outbox:
    """A node machine that sends what the test puts in its outbox, with a settable deadline
    (its timer runs are counted) and the subscription notices it hears."""

    def __init__(self) -> None:
        self.out: list[Action] = []
        self.deadline: float | None = None
        self.timers = 0
        self.notices: list[bytes] = []

    def on_message(self, message: DataMessage, now: float) -> None:
        del message, now

    def on_timer(self, now: float) -> None:
        self.timers += 1
        self.deadline = None

    def next_deadline(self) -> float | None:
        return self.deadline

    def take_actions(self) -> list[Action]:
        out, self.out = self.out, []
        return out

    def on_subscription(self, prefix: bytes, subscribed: bool, now: float) -> None:
        if subscribed:
            self.notices.append(prefix)


@pytest.fixture
def transport(tower: Tower) -> TransportConfig:
    return loopback(tower)


@pytest.fixture
def quiet(tower: Tower) -> TransportConfig:
    """Beacons every 60 s: within a test nothing but its sockets and posts wakes the runner."""
    return TransportConfig(
        tower_sub_addresses=(tower.sub_endpoint,),
        tower_pub_addresses=(tower.pub_endpoint,),
        advertised_host="127.0.0.1",
        bind_host="127.0.0.1",
        beacon_interval=60.0,
        beacon_timeout=240.0,
    )


def _sub(port: int, prefix: bytes = b"M" + TOPIC.encode()) -> zmq.Socket[bytes]:
    sub: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.SUBSCRIBE, prefix)
    sub.connect(f"tcp://127.0.0.1:{port}")
    return sub


def _sequences(sub: zmq.Socket[bytes], count: int) -> list[int]:
    got: list[int] = []
    deadline = time.monotonic() + 10
    while len(got) < count and time.monotonic() < deadline:
        if sub.poll(100):
            message = decode_data(sub.recv_multipart())
            assert isinstance(message, Record)
            got.append(message.sequence)
    return got


def _connected(runner: NodeRunner, machine: Outbox, sub: zmq.Socket[bytes]) -> None:
    """Probe (sequence 0, sent by the runner) until the SUB receives, then drain it."""

    def put(_now: float) -> None:
        machine.out.append(SendRecords(TOPIC, NODE, 0, [b"probe"]))

    def received() -> bool:
        runner.post(put)
        return bool(sub.poll(50))

    wait_for(received, "the SUB to receive")
    while sub.poll(100):
        sub.recv_multipart()


@pytest.fixture
def node(quiet: TransportConfig) -> Iterator[tuple[NodeRunner, Outbox, zmq.Socket[bytes]]]:
    machine = Outbox()
    runner = NodeRunner(machine, [Identity(NODE, xpub=True)], quiet, name="run-here", direct=True)
    runner.start(ready_timeout=None)
    sub = _sub(runner.ports[0])
    try:
        _connected(runner, machine, sub)
        yield runner, machine, sub
    finally:
        sub.close()
        runner.stop()


def test_a_callers_sends_leave_from_its_own_thread(
    node: tuple[NodeRunner, Outbox, zmq.Socket[bytes]],
) -> None:
    runner, machine, sub = node
    threads: list[int] = []

    def send(sequence: int) -> bool:
        def fn(_now: float) -> bool:
            threads.append(threading.get_ident())
            machine.out.append(SendRecords(TOPIC, NODE, sequence, [b"lone"]))
            return True

        deadline = time.monotonic() + 10
        while not runner.run_here(fn):  # the runner may be in a beacon's turn
            assert time.monotonic() < deadline, "the runner never was between turns"
            time.sleep(0.001)
        return True

    before = runner.statistics().sent_here
    for sequence in range(1, 21):
        send(sequence)
    assert _sequences(sub, 20) == list(range(1, 21))
    assert set(threads) == {threading.get_ident()}
    assert runner.statistics().sent_here - before == 20


def test_no_caller_runs_while_the_runner_is_in_mid_turn(
    node: tuple[NodeRunner, Outbox, zmq.Socket[bytes]],
) -> None:
    runner, _, _ = node
    inside = threading.Event()
    release = threading.Event()

    def busy(_now: float) -> None:
        inside.set()
        release.wait(10)

    ran: list[float] = []

    def record(now: float) -> bool:
        ran.append(now)
        return True

    runner.post(busy)
    assert inside.wait(10)
    try:
        assert not runner.run_here(record)
        assert ran == []
    finally:
        release.set()
    wait_for(lambda: runner.run_here(record), "a free runner")
    assert len(ran) == 1


def test_a_callers_data_wait_never_waits_for_a_runner_in_mid_turn(
    node: tuple[NodeRunner, Outbox, zmq.Socket[bytes]],
) -> None:
    """A consumer's poll asks for its wait holding the consumer's lock, which the runner's
    deliveries take in mid-turn: a data_wait that waited for the turn lock deadlocked both."""
    runner, _, _ = node
    held = threading.Lock()  # the consumer's lock: its deliveries take it in the runner's turn
    inside = threading.Event()

    def delivering(_now: float) -> None:
        inside.set()
        with held:
            pass

    answers: list[object] = []
    asking = threading.Thread(target=lambda: answers.append(runner.data_wait()), daemon=True)
    with held:
        runner.post(delivering)
        assert inside.wait(10)
        asking.start()
        asking.join(10)
        deadlocked = asking.is_alive()
    asking.join(10)
    assert not deadlocked, "data_wait waited for the turn of a runner that waits for its caller"
    assert answers == [None]
    found: list[DataWait] = []

    def free() -> bool:
        wait = runner.data_wait()
        if wait is not None:
            found.append(wait)
        return wait is not None

    wait_for(free, "a data wait once the runner is between turns")
    found[0].close()


def test_a_runner_without_direct_lends_nothing(transport: TransportConfig) -> None:
    runner = NodeRunner(Outbox(), [Identity(NODE)], transport, name="not-direct")
    runner.start()
    try:
        ran: list[float] = []

        def record(now: float) -> bool:
            ran.append(now)
            return True

        assert not runner.run_here(record)
        assert ran == []
    finally:
        runner.stop()
    direct = NodeRunner(Outbox(), [Identity(NODE)], transport, name="stopped", direct=True)
    direct.start()
    direct.stop()
    assert not direct.run_here(lambda _now: True)  # its sockets are closed


def test_what_is_not_a_send_or_a_delivery_goes_to_the_runner_in_order(
    transport: TransportConfig,
) -> None:
    delivered: list[int] = []
    machine = Outbox()
    runner = NodeRunner(
        machine,
        [Identity(NODE)],
        transport,
        name="deferred",
        direct=True,
        on_deliver=lambda _batch: delivered.append(threading.get_ident()),
    )
    runner.start()
    sub = _sub(runner.ports[0])
    try:
        _connected(runner, machine, sub)

        def alone(_now: float) -> bool:  # a delivery and a send: both here
            machine.out += [Deliver(TOPIC, NODE, 0, (b"d",)), SendRecords(TOPIC, NODE, 1, [b"x"])]
            return True

        wait_for(lambda: runner.run_here(alone), "a free runner")
        assert delivered == [threading.get_ident()]
        assert _sequences(sub, 1) == [1]
        expired = runner.statistics().peers_expired
        queued: list[list[Action]] = []  # what could not go directly, for the runner

        def drain(_now: float) -> None:
            while queued:
                machine.out += queued.pop(0)

        for sequence in range(2, 102):
            # even sequences come with a Disconnect (the runner's: it counts it), odd ones
            # with a delivery
            first: Action = (
                Disconnect("gone", "tcp://127.0.0.1:1")
                if sequence % 2 == 0
                else Deliver(TOPIC, NODE, 0, (b"d",))
            )
            out: list[Action] = [first, SendRecords(TOPIC, NODE, sequence, [b"x"])]

            def fn(_now: float, out: list[Action] = out) -> bool:
                if queued:  # order: after what waits for the runner
                    return False
                machine.out += out
                return True

            if not runner.run_here(fn):
                queued.append(out)
                runner.post(drain)
        assert _sequences(sub, 100) == list(range(2, 102))
        wait_for(lambda: runner.statistics().peers_expired == expired + 50, "50 Disconnects")
        wait_for(lambda: len(delivered) == 51, "the 50 deliveries")
    finally:
        sub.close()
        runner.stop()


def test_a_deadline_a_caller_makes_earlier_wakes_the_runner(quiet: TransportConfig) -> None:
    machine = Outbox()
    runner = NodeRunner(machine, [Identity(NODE)], quiet, name="deadline", direct=True)
    runner.start()
    try:
        turns = runner._turns
        assert turns is not None
        wait_for(
            lambda: (turns.sleeping_until or 0) > time.monotonic() + 30,
            "the runner to sleep until its next beacon",
        )

        def due_soon(now: float) -> bool:
            machine.deadline = now + 0.01
            return True

        wait_for(lambda: runner.run_here(due_soon), "a free runner")
        wait_for(lambda: machine.timers == 1, "the machine's timer to run")
    finally:
        runner.stop()


def test_a_subscription_while_callers_send_reaches_the_machine(
    node: tuple[NodeRunner, Outbox, zmq.Socket[bytes]],
) -> None:
    runner, machine, _ = node
    stop = threading.Event()
    sent = 0

    def keep_sending() -> None:
        nonlocal sent
        sequence = 1000
        while not stop.is_set():

            def fn(_now: float, sequence: int = sequence) -> bool:
                machine.out.append(SendRecords(TOPIC, NODE, sequence, [b"x"]))
                return True

            if runner.run_here(fn):
                sent += 1
                sequence += 1

    sender = threading.Thread(target=keep_sending)
    sender.start()
    late: list[zmq.Socket[bytes]] = []
    try:
        wait_for(lambda: sent > 100, "callers to send")
        for i in range(5):
            late.append(_sub(runner.ports[0], f"late-{i}".encode()))
        wait_for(
            lambda: {f"late-{i}".encode() for i in range(5)} <= set(machine.notices),
            "the late subscriptions to reach the machine",
        )
    finally:
        stop.set()
        sender.join()
        for sock in late:
            sock.close()


def test_work_left_for_the_turns_end_runs_in_that_turn_before_its_outbox(
    node: tuple[NodeRunner, Outbox, zmq.Socket[bytes]],
) -> None:
    """``run_at_turn_end``: refused while the runner is between turns (the caller may
    ``run_here``); taken while it is in mid-turn, run in the runner's thread at that turn's
    end, and what it makes the machine send leaves with that turn's outbox - before work
    posted after it runs."""
    runner, machine, sub = node
    threads: list[int] = []
    sent_then: list[int] = []

    def late(_now: float) -> None:
        threads.append(threading.get_ident())
        machine.out.append(SendRecords(TOPIC, NODE, 1, [b"late"]))

    wait_for(lambda: not runner.run_at_turn_end(late), "the runner between turns")
    assert threads == []
    with held_turn(runner):
        before = runner.statistics().sent
        assert runner.run_at_turn_end(late)
        runner.post(lambda _now: sent_then.append(runner.statistics().sent))
    assert _sequences(sub, 1) == [1]
    wait_for(lambda: bool(sent_then), "the posted probe")
    assert sent_then == [before + 1]
    assert len(threads) == 1
    assert threads[0] != threading.get_ident()
