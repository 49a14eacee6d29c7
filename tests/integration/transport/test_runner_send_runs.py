"""The runner's send path for DIRECT-RECORD runs, on real sockets.

A store's FETCH reply leaves its machine as :class:`SendDirectRecords` runs, which the
executor encodes once per run and sends without a Python object per record. What goes on the
wire must be exactly what one ``Send(DirectRecord(...))`` per record sends: a raw SUB
receives both forms and compares them frame by frame, also for the fallbacks (an unencodable
run goes record by record and counts each refused record, a large content is sent without a
copy).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dafka.node.actions import Action, Send, SendDirectRecords
from dafka.protocol import DataMessage, DirectRecord, EncodeError, encode
from dafka.transport.runner import Identity, NodeRunner
from dafka.transport.tower import Tower
from tests.integration.transport.transport_helpers import loopback, wait_for

NODE = "52000000000000000000000000000002"
CONSUMER = "43000000000000000000000000000003"


class Outbox:
    """A node machine that only sends what the test queues (the driver is under test)."""

    def __init__(self) -> None:
        self.out: list[Action] = []

    def on_message(self, message: DataMessage, now: float) -> None:
        pass

    def on_timer(self, now: float) -> None:
        pass

    def next_deadline(self) -> float | None:
        return None

    def take_actions(self) -> list[Action]:
        out, self.out = self.out, []
        return out


class Wire:
    """A runner around an :class:`Outbox` and a raw SUB on its data PUB."""

    def __init__(self, runner: NodeRunner, machine: Outbox, sub: zmq.Socket[bytes]) -> None:
        self.runner = runner
        self.machine = machine
        self.sub = sub

    def send(self, *actions: Action) -> None:
        self.runner.call(lambda _now: self.machine.out.extend(actions))

    def receive(self, count: int) -> list[list[bytes]]:
        got: list[list[bytes]] = []
        deadline = time.monotonic() + 10
        while len(got) < count:
            assert time.monotonic() < deadline, f"got {len(got)} of {count} messages"
            if self.sub.poll(100):
                got.append(self.sub.recv_multipart())
        assert not self.sub.poll(50), "more messages than expected"
        return got


@pytest.fixture(scope="module")
def wire() -> Iterator[Wire]:
    tower = Tower("tcp://127.0.0.1:*", "tcp://127.0.0.1:*")
    tower.start()
    transport = loopback(tower)
    machine = Outbox()
    runner = NodeRunner(machine, [Identity(NODE)], transport, name="sender")
    runner.start(None)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"D")
    sub.connect(f"tcp://127.0.0.1:{runner.ports[0]}")
    result = Wire(runner, machine, sub)
    probe = DirectRecord(CONSUMER, "t", "P", 0, b"probe")

    def joined() -> bool:  # PUB/SUB drops what is sent before the SUB joined
        result.send(Send(probe))
        return bool(sub.poll(50))

    try:
        wait_for(joined, "the SUB to join")
        while sub.poll(100):
            sub.recv_multipart()
        yield result
    finally:
        sub.close()
        runner.stop()
        tower.stop()


def one_by_one(run: SendDirectRecords) -> list[list[bytes]]:
    return [encode(m) for m in run.messages()]


def test_a_run_sends_the_frames_of_one_send_per_record(wire: Wire) -> None:
    run = SendDirectRecords(CONSUMER, "t", "P", 7, tuple(b"r%d" % i for i in range(300)))
    sent = wire.runner.statistics().sent
    wire.send(run)
    assert wire.receive(300) == one_by_one(run)
    assert wire.runner.statistics().sent == sent + 300


def test_runs_and_single_sends_keep_their_order(wire: Wire) -> None:
    a = SendDirectRecords(CONSUMER, "t", "P", 0, (b"a", b"b"))
    b = SendDirectRecords(CONSUMER, "u", "Q", 5, (b"c",))
    single = DirectRecord(CONSUMER, "t", "P", 2, b"x")
    wire.send(a, Send(single), b, SendDirectRecords(CONSUMER, "t", "P", 9, ()))
    assert wire.receive(4) == [*one_by_one(a), encode(single), *one_by_one(b)]


def test_large_contents_are_sent_whole(wire: Wire) -> None:
    big = bytes(range(256)) * 1024  # 256 KiB: above the copy threshold
    run = SendDirectRecords(CONSUMER, "t", "P", 0, (b"small", big, b""))
    wire.send(run)
    assert wire.receive(3) == one_by_one(run)


def test_an_unencodable_run_goes_record_by_record(wire: Wire) -> None:
    before = wire.runner.statistics()
    top = (1 << 64) - 2
    past_the_end = SendDirectRecords(CONSUMER, "t", "P", top, (b"a", b"b", b"c"))
    bad_name = SendDirectRecords(CONSUMER, "t" * 300, "P", 0, (b"a", b"b"))
    wire.send(past_the_end, bad_name)
    assert wire.receive(2) == [
        encode(DirectRecord(CONSUMER, "t", "P", top, b"a")),
        encode(DirectRecord(CONSUMER, "t", "P", top + 1, b"b")),
    ]
    after = wire.runner.statistics()
    assert after.unencodable == before.unencodable + 3  # 1 past uint64, 2 with a bad topic
    assert after.sent == before.sent + 2


def test_a_known_runs_later_records_are_checked_as_its_first_were(wire: Wire) -> None:
    """The executor keeps a run's header once encoded and does not encode later runs with
    the same fields: their sequences and contents are still checked - a sequence before
    the run's start, past uint64 or a content that is not bytes goes record by record
    through the encoder, which refuses it."""
    first = SendDirectRecords(CONSUMER, "k", "P", 10, (b"a",), 3, 10)
    lone = SendDirectRecords(CONSUMER, "k", "P", 11, (b"b",), 3, 10)
    wire.send(first, lone)
    assert wire.receive(2) == [*one_by_one(first), *one_by_one(lone)]
    before = wire.runner.statistics()
    early = SendDirectRecords(CONSUMER, "k", "P", 5, (b"x", b"y"), 3, 10)
    top = SendDirectRecords(CONSUMER, "k", "P", (1 << 64) - 1, (b"z", b"w"), 3, 10)
    odd = SendDirectRecords(CONSUMER, "k", "P", 12, (bytearray(b"v"),), 3, 10)  # type: ignore[arg-type]
    wire.send(early, top, odd)
    assert wire.receive(1) == [encode(DirectRecord(CONSUMER, "k", "P", (1 << 64) - 1, b"z", 3, 10))]
    after = wire.runner.statistics()
    assert after.unencodable == before.unencodable + 4  # 2 before the start, 1 past, 1 odd
    assert after.sent == before.sent + 1


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    first=st.integers(0, 1 << 40),
    contents=st.lists(st.binary(max_size=40), min_size=1, max_size=40),
    topic=st.text(st.characters(codec="utf-8"), min_size=1, max_size=20),
)
def test_any_run_equals_its_records_on_the_wire(
    wire: Wire, first: int, contents: list[bytes], topic: str
) -> None:
    run = SendDirectRecords(CONSUMER, topic, "P", first, tuple(contents))
    expected: list[list[bytes]] = []
    for message in run.messages():
        try:
            expected.append(encode(message))
        except EncodeError:
            continue  # a topic the protocol refuses: counted, not sent
    wire.send(run)
    assert wire.receive(len(expected)) == expected
