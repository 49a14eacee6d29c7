"""TopicProducerMachine's resume (issue 18, path 1): it never goes backwards.

A named producer that restarts asks the stores for its partitions' heads. Stores answer at
their own pace: one catching up after a restart may answer first, with an older head. The
resume waits a settle window after the last new store greeted it and continues after the
highest head any store reported; nothing is published before.
"""

from __future__ import annotations

from dafka.client._topic_machine import TopicProducerMachine
from dafka.node import ProducerConfig
from dafka.protocol import DirectHead, GetHeads, Head, Record, StoreHello
from dafka.testing import ScriptedPeer

TOPIC = "resume"
NAME = "w"
PARTITIONS = [f"{NAME}.0", f"{NAME}.1"]
SETTLE = 0.5
LAGGING, AHEAD = "READER-LAGGING", "READER-AHEAD"


def make(partitions: list[str] = PARTITIONS) -> tuple[TopicProducerMachine, ScriptedPeer]:
    machine = TopicProducerMachine(
        TOPIC,
        partitions,
        ProducerConfig(),
        batching=False,
        batch_size=1 << 20,
        linger=0.0,
        resume=True,
        settle=SETTLE,
        now=0.0,
    )
    peer = ScriptedPeer(machine)
    peer.tick()  # the first GET-HEADS
    return machine, peer


def greet(peer: ScriptedPeer, store: str) -> None:
    peer.send(StoreHello(PARTITIONS[0], store))


def answer(peer: ScriptedPeer, heads: dict[str, int]) -> None:
    """One store's DIRECT-HEADs (to the first identity, which asked)."""
    peer.send(*(DirectHead(PARTITIONS[0], TOPIC, p, s) for p, s in heads.items()))


def run_until_resumed(machine: TopicProducerMachine, peer: ScriptedPeer) -> float:
    start = peer.clock.now
    while not machine.resumed:
        assert peer.tick(), "the resume has no timer left"
        assert peer.clock.now - start < 60, "not resumed within 60 virtual seconds"
    return peer.clock.now - start


def first_sequences(peer: ScriptedPeer) -> dict[str, int]:
    """The sequence each partition's first RECORD got (publish one message per partition)."""
    records = [m for m in peer.recv_all() if isinstance(m, Record)]
    return {r.producer: r.sequence for r in records}


def publish_one_each(machine: TopicProducerMachine, peer: ScriptedPeer) -> dict[str, int]:
    machine.add_many(
        [(i, b"new", None, None, None, None, (None, 3)) for i in range(len(machine.partitions))],
        peer.clock.now,
    )
    peer.drain()
    return first_sequences(peer)


def test_a_lagging_store_answering_first_does_not_settle_the_resume() -> None:
    """The issue's case: the lagging store's heads come first and cover every partition."""
    machine, peer = make()
    greet(peer, LAGGING)
    answer(peer, {PARTITIONS[0]: 79_368, PARTITIONS[1]: 10})
    assert not machine.resumed, "resumed on the first store's answer"
    peer.advance(0.2)
    greet(peer, AHEAD)  # the other store, 0.2 s later (busy serving the catch-up)
    answer(peer, {PARTITIONS[0]: 200_999})
    run_until_resumed(machine, peer)
    assert machine.heads == {PARTITIONS[0]: 200_999, PARTITIONS[1]: 10}
    heads = [m for m in peer.recv_all() if isinstance(m, Head)]
    assert {h.producer: h.sequence for h in heads} == machine.heads  # announced at once
    assert publish_one_each(machine, peer) == {PARTITIONS[0]: 201_000, PARTITIONS[1]: 11}


def test_each_new_store_gets_a_whole_settle_window() -> None:
    machine, peer = make()
    greet(peer, LAGGING)
    answer(peer, {PARTITIONS[0]: 5, PARTITIONS[1]: 5})
    peer.advance(SETTLE * 0.9)
    greet(peer, AHEAD)  # just before the first window ends
    peer.advance(SETTLE * 0.9)
    assert not machine.resumed, "the second store had less than a settle window"
    greet(peer, AHEAD)  # a store greeting again is not a new store
    answer(peer, {PARTITIONS[1]: 9})
    assert run_until_resumed(machine, peer) <= SETTLE * 0.1 + 1e-9
    assert machine.heads == {PARTITIONS[0]: 5, PARTITIONS[1]: 9}


def test_heads_never_go_down_and_a_partition_nobody_holds_starts_at_zero() -> None:
    machine, peer = make()
    greet(peer, AHEAD)
    answer(peer, {PARTITIONS[0]: 40})
    greet(peer, LAGGING)
    answer(peer, {PARTITIONS[0]: 3})  # later and lower: ignored
    run_until_resumed(machine, peer)
    assert publish_one_each(machine, peer) == {PARTITIONS[0]: 41, PARTITIONS[1]: 0}


def test_an_answer_without_a_greeting_starts_the_window() -> None:
    """A DIRECT-HEAD whose store's STORE-HELLO we missed still leads to a resume."""
    machine, peer = make()
    answer(peer, {PARTITIONS[0]: 7, PARTITIONS[1]: 8})
    assert not machine.resumed
    assert run_until_resumed(machine, peer) == SETTLE
    assert machine.heads == {PARTITIONS[0]: 7, PARTITIONS[1]: 8}


def test_without_any_store_it_asks_and_never_resumes() -> None:
    """Nothing to resume from: it keeps asking, publishes nothing (the client times out)."""
    machine, peer = make()
    asked = 0
    for _ in range(50):
        peer.tick()
        asked += sum(isinstance(m, GetHeads) for m in peer.recv_all())
    assert not machine.resumed
    assert machine.machines == []
    assert asked >= 40
