"""Helpers shared by the message-layer tests: envelopes with Gazette-style offsets."""

from __future__ import annotations

from collections.abc import Iterable

from dafka.message import (
    Envelope,
    Flags,
    JsonMessage,
    ProducerID,
    QueueOutcome,
    Sequencer,
    build_uuid,
    get_clock,
)

PARTITION = "test/partition"
A = ProducerID.fromhex("01000000000a")
B = ProducerID.fromhex("01000000000b")
C = ProducerID.fromhex("01000000000c")
CONT = Flags.CONTINUE_TXN
ACK = Flags.ACK_TXN
OUT = Flags.OUTSIDE_TXN


class Generator:
    """Makes envelopes of consecutive 100-byte frames with 2 bytes of dead space between."""

    def __init__(self, partition: str = PARTITION) -> None:
        self.partition = partition
        self.offset = 0

    def __call__(self, producer: bytes, clock: int, flags: int) -> Envelope[JsonMessage]:
        env = Envelope(
            self.partition,
            self.offset,
            self.offset + 100,
            JsonMessage({"clock": clock}, build_uuid(producer, clock, flags)),
        )
        self.offset += 102
        return env


def queue(seq: Sequencer[JsonMessage], *envs: Envelope[JsonMessage]) -> list[QueueOutcome]:
    """Queue each envelope (none may commit), returning the outcomes."""
    return [seq.queue_uncommitted(e) for e in envs]


def deque(seq: Sequencer[JsonMessage]) -> list[Envelope[JsonMessage]]:
    """Step through the pending commit; the envelopes delivered."""
    return seq.drain()


def replay(
    seq: Sequencer[JsonMessage], begin: int, end: int, envs: Iterable[Envelope[JsonMessage]]
) -> None:
    """Check the requested replay range, then supply ``envs`` as the replay."""
    rng = seq.replay_range()
    assert (rng.begin, rng.end) == (begin, end)
    seq.start_replay(list(envs))


def clocks(envs: Iterable[Envelope[JsonMessage]]) -> list[int]:
    """The clocks of envelopes, for compact assertions."""
    return [get_clock(e.message.uuid) for e in envs]
