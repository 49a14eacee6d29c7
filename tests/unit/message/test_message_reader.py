"""Read iterators end to end: publisher -> framed bytes -> read-uncommitted -> committed."""

from __future__ import annotations

import uuid

import pytest

from dafka.message import (
    BinaryMessage,
    Clock,
    DesyncError,
    Envelope,
    FixedFraming,
    Flags,
    FramingError,
    JsonFraming,
    JsonMessage,
    MustStartReplay,
    Publisher,
    ReadCommittedIter,
    ReadUncommittedIter,
    Sequencer,
    build_uuid,
    get_flags,
    new_producer_id,
)


class ByteLog:
    """Partitions as byte strings, written through a framing."""

    def __init__(self, framing: JsonFraming[JsonMessage]) -> None:
        self.framing = framing
        self.data: dict[str, bytearray] = {}

    def append(self, partition: str, message: JsonMessage) -> int:
        buf = self.data.setdefault(partition, bytearray())
        offset = len(buf)
        buf += self.framing.encode(message)
        return offset

    def chunks(
        self, partition: str, begin: int = 0, end: int | None = None, size: int = 7
    ) -> list[tuple[int, bytes]]:
        data = bytes(self.data[partition])[begin:end]
        return [(begin + i, data[i : i + size]) for i in range(0, len(data), size)]

    def reader(
        self, partition: str, begin: int = 0, end: int | None = None
    ) -> ReadUncommittedIter[JsonMessage]:
        return ReadUncommittedIter(self.chunks(partition, begin, end), self.framing, partition)


def bodies(envs: list[Envelope[JsonMessage]]) -> list[object]:
    return [e.message.body.get("v", "ACK") for e in envs]


def test_read_uncommitted_yields_everything_with_offsets() -> None:
    log = ByteLog(JsonFraming())
    pub: Publisher[JsonMessage, int] = Publisher(log.append, clock=Clock(100))
    offsets = [pub.publish_uncommitted(lambda _: "p", JsonMessage({"v": i})) for i in range(3)]
    envs = list(log.reader("p"))
    assert [e.begin for e in envs] == offsets
    assert envs[-1].end == len(log.data["p"])
    assert {get_flags(e.message.uuid) for e in envs} == {Flags.CONTINUE_TXN}


def test_read_committed_end_to_end_with_transactions_and_duplicates() -> None:
    log = ByteLog(JsonFraming())
    pub: Publisher[JsonMessage, int] = Publisher(log.append, clock=Clock(100))
    to_p = lambda _: "p"  # noqa: E731
    pub.publish_committed(to_p, JsonMessage({"v": "c1"}))
    for i in range(3):
        pub.publish_uncommitted(to_p, JsonMessage({"v": i}))
    # An append retried: the same bytes again.
    log.data["p"] += log.framing.encode(JsonMessage({"v": 2}, _last_uuid(log)))
    (intent,) = pub.build_ack_intents()
    log.append(intent.partition, intent.message)
    log.append(intent.partition, intent.message)  # Re-sent after a crash.
    pub.publish_committed(to_p, JsonMessage({"v": "c2"}))
    out = list(ReadCommittedIter(log.reader("p"), Sequencer()))
    assert bodies(out) == ["c1", 0, 1, 2, "ACK", "c2"]


def _last_uuid(log: ByteLog) -> uuid.UUID:
    return list(log.reader("p"))[-1].message.uuid


def test_read_committed_replays_through_the_callers_function() -> None:
    log = ByteLog(JsonFraming())
    a: Publisher[JsonMessage, int] = Publisher(log.append, clock=Clock(100))
    b: Publisher[JsonMessage, int] = Publisher(log.append, clock=Clock(100))
    to_p = lambda _: "p"  # noqa: E731
    for i in range(10):
        a.publish_uncommitted(to_p, JsonMessage({"v": f"a{i}"}))
        b.publish_committed(to_p, JsonMessage({"v": f"b{i}"}))
    (intent,) = a.build_ack_intents()
    log.append(intent.partition, intent.message)
    calls: list[tuple[str, int, int]] = []

    def replay(partition: str, begin: int, end: int) -> ReadUncommittedIter[JsonMessage]:
        calls.append((partition, begin, end))
        return log.reader(partition, begin, end)

    out = list(ReadCommittedIter(log.reader("p"), Sequencer(buffer=4), replay))
    assert bodies(out) == [f"b{i}" for i in range(10)] + [f"a{i}" for i in range(10)] + ["ACK"]
    assert len(calls) == 1
    assert calls[0][1] == 0


def test_read_committed_without_replay_function_raises_then_resumes() -> None:
    log = ByteLog(JsonFraming())
    pub: Publisher[JsonMessage, int] = Publisher(log.append, clock=Clock(100))
    for i in range(5):
        pub.publish_uncommitted(lambda _: "p", JsonMessage({"v": i}))
    (intent,) = pub.build_ack_intents()
    log.append(intent.partition, intent.message)
    seq: Sequencer[JsonMessage] = Sequencer(buffer=2)
    it = ReadCommittedIter(log.reader("p"), seq)
    with pytest.raises(MustStartReplay) as info:
        next(it)
    seq.start_replay(log.reader("p", info.value.begin, info.value.end))
    assert bodies(list(it)) == [0, 1, 2, 3, 4, "ACK"]


def test_framing_errors_are_resumable_or_counted() -> None:
    framing: FixedFraming[BinaryMessage] = FixedFraming()
    producer = new_producer_id()
    frames = [
        framing.encode(BinaryMessage(b"%d" % i, build_uuid(producer, i + 1, 0))) for i in range(3)
    ]
    data = frames[0] + b"junk!" + frames[1] + frames[2]
    chunks = [(0, data)]

    it = ReadUncommittedIter(chunks, framing, "p")
    assert next(it).message.payload == b"0"
    with pytest.raises(DesyncError):
        next(it)
    assert [e.message.payload for e in it] == [b"1", b"2"]
    assert it.errors == 1

    seen: list[FramingError] = []
    it2 = ReadUncommittedIter(chunks, framing, "p", on_error=seen.append)
    committed = list(ReadCommittedIter(it2))
    assert [e.message.payload for e in committed] == [b"0", b"1", b"2"]
    assert len(seen) == it2.errors == 1


def test_read_committed_over_a_byte_stream() -> None:
    log = ByteLog(JsonFraming())
    pub: Publisher[JsonMessage, int] = Publisher(log.append, clock=Clock(100))
    for i in range(3):
        pub.publish_uncommitted(lambda _: "p", JsonMessage({"v": i}))
    pub.publish_committed(lambda _: "p", JsonMessage({"v": "c"}))  # Discards the open span.
    pub.publish_uncommitted(lambda _: "p", JsonMessage({"v": 9}))
    for intent in pub.build_ack_intents():
        log.append(intent.partition, intent.message)
    it = ReadCommittedIter.over_stream(log.chunks("p"), log.framing, "p")
    assert bodies(list(it)) == ["c", 9, "ACK"]
    assert it.sequencer.anomalies == 1
