"""SendRecords on real sockets: a producer's run leaves as the RECORDs ``encode`` gives.

A raw SUB connects to the node's data PUB and reads what the runner publishes for a
``SendRecords`` run (the header encoded once per run, the sequence packed per record):
every message must be byte-for-byte ``encode(Record(...))`` of its sequence. A run that
the checks refuse goes record by record: what the encoder refuses is counted and dropped,
never raised in the node's thread.
"""

from __future__ import annotations

import time

import zmq

from dafka.node.actions import Action, SendRecords
from dafka.protocol import DataMessage, Record, encode
from dafka.transport.runner import Identity, NodeRunner
from dafka.transport.tower import Tower
from tests.integration.transport.transport_helpers import loopback, wait_for

TOPIC = "sendruns"
NODE = "60000000000000000000000000000006"


class Outbox:
    """A node machine that sends what the test puts in its outbox (nothing else)."""

    def __init__(self) -> None:
        self.out: list[Action] = []

    def on_message(self, message: DataMessage, now: float) -> None:
        del message, now

    def on_timer(self, now: float) -> None:
        del now

    def next_deadline(self) -> float | None:
        return None

    def take_actions(self) -> list[Action]:
        out, self.out = self.out, []
        return out


def test_a_run_is_sent_as_the_encoded_records(tower: Tower) -> None:
    transport = loopback(tower)
    machine = Outbox()
    runner = NodeRunner(machine, [Identity(NODE)], transport, name="send-records")
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"M" + TOPIC.encode())  # RECORD
    runner.start()
    try:
        sub.connect(f"tcp://127.0.0.1:{runner.ports[0]}")

        def send(action: SendRecords) -> None:
            def put(_now: float) -> None:
                machine.out.append(action)

            runner.post(put)

        # The SUB's subscription reaches the PUB some time after connect: probe until a
        # record arrives, then read nothing older than the run.
        def probe_received() -> bool:
            send(SendRecords(TOPIC, NODE, 0, [b"probe"]))
            return bool(sub.poll(50))

        wait_for(probe_received, "the SUB to receive")
        while sub.poll(100):
            sub.recv_multipart()
        contents: list[bytes] = [b"", b"x" * 100, *(f"c{i}".encode() for i in range(50))]
        contents.append(b"y" * 70_000)  # sent without a copy
        send(SendRecords(TOPIC, NODE, 1000, contents))
        not_bytes = [bytearray(b"ba"), b"ok", memoryview(b"mv")]
        send(SendRecords(TOPIC, NODE, 2000, not_bytes))  # type: ignore[arg-type]
        send(SendRecords("bad topic\x00", NODE, 3000, [b"a", b"b"]))  # refused: counted
        send(SendRecords(TOPIC, NODE, (1 << 64) - 1, [b"last", b"beyond"]))  # one refused
        send(SendRecords(TOPIC, NODE, 4000, [b"after"]))
        expected = [
            encode(Record(TOPIC, NODE, 1000 + i, content)) for i, content in enumerate(contents)
        ]
        expected.append(encode(Record(TOPIC, NODE, 2001, b"ok")))
        expected.append(encode(Record(TOPIC, NODE, (1 << 64) - 1, b"last")))
        expected.append(encode(Record(TOPIC, NODE, 4000, b"after")))
        got: list[list[bytes]] = []
        deadline = time.monotonic() + 10
        while len(got) < len(expected) and time.monotonic() < deadline:
            if sub.poll(100):
                got.append(sub.recv_multipart())
        assert got == expected
        wait_for(lambda: runner.statistics().unencodable == 5, "the refused runs counted")
    finally:
        sub.close()
        runner.stop()
