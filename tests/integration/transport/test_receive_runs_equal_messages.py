"""The receiver's run grouping equals decoding every message, on a real PUB/SUB pair.

Whatever arrives (RECORDs and DIRECT-RECORDs of a few partitions in any order, duplicates,
gaps, other commands, malformed messages: a content frame missing, one frame too many, a
sequence at the top of uint64), the machine must be fed exactly what ``decode_data`` of
each message, in order, gives: runs expanded record by record are compared with that, and
the undecodable ones are counted. With and without a ``drop_inbound`` hook (which turns the
steady-state shortcut off).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st

from dafka.node import Discovery
from dafka.node.actions import Action
from dafka.protocol import (
    DataMessage,
    DecodeError,
    DirectRecord,
    Head,
    Record,
    decode_data,
    encode,
)
from dafka.transport._drops import DropLog
from dafka.transport._receive import Receiver
from dafka.transport._stats import RunnerStats

ME = "43000000000000000000000000000003"
TOP = (1 << 64) - 1


class Recorder:
    """A machine that writes down what it is fed, runs expanded into messages."""

    def __init__(self) -> None:
        self.fed: list[DataMessage] = []

    def on_message(self, message: DataMessage, now: float) -> None:
        self.fed.append(message)

    def on_records(
        self, topic: str, producer: str, first: int, contents: Sequence[bytes], now: float
    ) -> None:
        self.fed += [Record(topic, producer, first + i, c) for i, c in enumerate(contents)]

    def on_direct_records(
        self,
        recipient: str,
        topic: str,
        producer: str,
        first: int,
        contents: Sequence[bytes],
        now: float,
    ) -> None:
        self.fed += [
            DirectRecord(recipient, topic, producer, first + i, c) for i, c in enumerate(contents)
        ]

    def on_timer(self, now: float) -> None:
        pass

    def next_deadline(self) -> float | None:
        return None

    def take_actions(self) -> list[Action]:
        return []


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[zmq.Socket[bytes], zmq.Socket[bytes]]]:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    pub = ctx.socket(zmq.PUB)
    sub = ctx.socket(zmq.SUB)
    for s in (pub, sub):
        s.setsockopt(zmq.LINGER, 0)
    pub.setsockopt(zmq.SNDHWM, 0)
    sub.setsockopt(zmq.RCVHWM, 0)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(f"tcp://127.0.0.1:{port}")
    deadline = time.monotonic() + 10
    while not sub.poll(10):  # PUB/SUB drops what is sent before the SUB joined
        assert time.monotonic() < deadline, "the SUB never joined"
        pub.send(b"probe")
    while sub.poll(50):
        sub.recv()
    yield pub, sub
    pub.close()
    sub.close()


def record(topic: str, producer: str, sequence: int, direct: bool) -> list[bytes]:
    if direct:
        return encode(DirectRecord(ME, topic, producer, sequence, b"c%d" % (sequence % 1000)))
    return encode(Record(topic, producer, sequence, b"c%d" % (sequence % 1000)))


partitions = st.sampled_from([("t", "P"), ("t", "Q"), ("u", "P")])
messages = st.one_of(
    st.builds(
        lambda key, seq, direct: record(key[0], key[1], seq, direct),
        partitions,
        st.integers(0, 12) | st.sampled_from([TOP - 1, TOP]),
        st.booleans(),
    ),
    st.builds(lambda key, seq: encode(Head(key[0], key[1], seq)), partitions, st.integers(0, 12)),
    st.builds(  # a RECORD or DIRECT-RECORD without its content frame
        lambda key, seq, direct: record(key[0], key[1], seq, direct)[:1],
        partitions,
        st.integers(0, 12),
        st.booleans(),
    ),
    st.builds(  # one frame too many
        lambda key, seq, direct: [*record(key[0], key[1], seq, direct), b"extra"],
        partitions,
        st.integers(0, 12),
        st.booleans(),
    ),
    st.just([b"garbage"]),
)


def _successor_header(frames: list[bytes]) -> bytes | None:
    """Frame 0 of the RECORD (or DIRECT-RECORD) after the one ``frames`` holds, if any."""
    try:
        message = decode_data(frames)
    except DecodeError:
        return None
    if not isinstance(message, Record | DirectRecord) or message.sequence >= TOP:
        return None
    return record(
        message.topic, message.producer, message.sequence + 1, isinstance(message, DirectRecord)
    )[0]


def runs_of(draw: list[list[bytes]]) -> list[list[bytes]]:
    """Make bursts likely: each message drawn starts a short run of its successors.

    A RECORD with a frame too many that would continue the run of the message before it is
    left out: the receiver takes such a RECORD as its first two frames and reads the rest
    as messages of their own (``Receiver.data``, "Content"), which decoding the message
    whole does not give; ``test_runner_receive.py`` shows that case."""
    out: list[list[bytes]] = []
    for frames in draw:
        if len(frames) > 2 and out and frames[0] == _successor_header(out[-1]):
            continue
        out.append(frames)
        try:
            message = decode_data(frames)
        except DecodeError:
            continue
        if isinstance(message, Record | DirectRecord) and message.sequence < TOP - 5:
            direct = isinstance(message, DirectRecord)
            for i in range(1, 4):
                out.append(record(message.topic, message.producer, message.sequence + i, direct))
    return out


@settings(max_examples=60, deadline=None)
@given(drawn=st.lists(messages, max_size=30), hook=st.booleans(), batch=st.sampled_from([3, 1024]))
def test_runs_feed_what_decoding_each_message_gives(
    pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes]],
    drawn: list[list[bytes]],
    hook: bool,
    batch: int,
) -> None:
    pub, sub = pair
    sent = runs_of(drawn)
    expected: list[DataMessage] = []
    bad = 0
    for frames in sent:
        try:
            expected.append(decode_data(frames))
        except DecodeError:
            bad += 1
    machine = Recorder()
    stats = RunnerStats()
    receiver = Receiver(
        machine,
        Discovery([ME]),
        stats,
        DropLog("test"),
        batch,
        on_records=machine.on_records,
        on_direct_records=machine.on_direct_records,
        attributed=None,
        drop_inbound=(lambda _frames: False) if hook else None,
        on_welcome=lambda: None,
    )
    for frames in sent:
        pub.send_multipart(frames)
    pub.send(b"end")  # not a data message: undecodable, marks the end
    deadline = time.monotonic() + 10
    while stats.undecodable < bad + 1:
        assert time.monotonic() < deadline, f"received {stats.received} of {len(sent) + 1}"
        if sub.poll(100):
            receiver.data(sub, 0.0)
    assert machine.fed == expected
    assert stats.received == len(sent) + 1


def test_a_record_with_a_frame_too_many_that_continues_a_run_is_taken_as_two() -> None:
    """The one case where the run grouping and decoding each message differ, by design
    (``Receiver.data``, "Content"): the content frame of a RECORD that continues a run is
    received without asking whether more frames follow, so a third frame is read as a
    message of its own (here undecodable) and the RECORD as its first two frames. A PAIR
    over inproc, so that one ``data`` call reads every message (one run)."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    a = ctx.socket(zmq.PAIR)
    b = ctx.socket(zmq.PAIR)
    try:
        a.bind("inproc://runs-extra-frame")
        b.connect("inproc://runs-extra-frame")
        machine = Recorder()
        stats = RunnerStats()
        receiver = Receiver(
            machine,
            Discovery([ME]),
            stats,
            DropLog("test"),
            1024,
            on_records=machine.on_records,
            on_direct_records=machine.on_direct_records,
            attributed=None,
            drop_inbound=None,
            on_welcome=lambda: None,
        )
        sent = [
            record("t", "P", 0, False),
            [*record("t", "P", 1, False), b"extra"],
            record("t", "P", 2, False),
            encode(Head("t", "P", 2)),
        ]
        for frames in sent:
            b.send_multipart(frames)
        receiver.data(a, 0.0)
        assert machine.fed == [
            Record("t", "P", 0, b"c0"),
            Record("t", "P", 1, b"c1"),
            Record("t", "P", 2, b"c2"),
            Head("t", "P", 2),
        ]
        assert stats.undecodable == 1  # b"extra"
        assert stats.received == 5
    finally:
        a.close(0)
        b.close(0)
