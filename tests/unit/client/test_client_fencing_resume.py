"""A named producer's resume fences its older runs (docs/guarantees.md, "Fencing resume").

The new run's GET-HEADS names its epoch and partition count; a store answers it only after
it refuses the older runs' records past what it holds, and a live older run of the name
does not answer it (its head may name records no store took). Wired here with the real
machines: a live run 1, a store, and run 2's resume.
"""

from __future__ import annotations

from dafka.client._topic_machine import TopicProducerMachine
from dafka.node import ProducerConfig, ProducerMachine, StoreConfig, StoreMachine
from dafka.node.actions import Send
from dafka.protocol import Ack, GetHeads, Record, StoreHello
from dafka.testing import MemoryLog, ScriptedPeer

WID = "57000000000000000000000000000001"
RID = "52000000000000000000000000000002"
T = "hello"


def resuming(epoch: int) -> TopicProducerMachine:
    return TopicProducerMachine(
        T,
        ["w.0", "w.1"],
        ProducerConfig(),
        batching=False,
        batch_size=1 << 20,
        linger=0.0,
        resume=True,
        settle=0.5,
        now=0.0,
        epoch=epoch,
    )


def test_the_resume_asks_with_its_run_and_a_store_fences_the_live_older_run() -> None:
    log = MemoryLog()
    store = ScriptedPeer(StoreMachine(WID, RID, log, StoreConfig(heads_refresh=None)), log=log)
    store.recv_all()
    old = ProducerMachine(T, "w.0", epoch=1, next_sequence=0)
    old.on_message(StoreHello("w.0", WID), 0.0)
    old.take_actions()
    for value in (b"a", b"b", b"c"):
        old.publish(value, 0.0)
    old.take_actions()
    store.send(*[Record(T, "w.0", s, v, 1, 0) for s, v in enumerate((b"a", b"b"))])
    for ack in [m for m in store.recv_all() if isinstance(m, Ack)]:
        old.on_ack(ack, 0.0, WID)
    assert old.statistics().unacked_records == 1

    new = resuming(epoch=2)
    new.on_timer(0.0)
    asks = [a.message for a in new.take_actions() if isinstance(a, Send)]
    assert asks == [GetHeads(T, "w.0", 2, 2)]  # before: GetHeads(T, "w.0"), fencing nothing
    old.on_message(asks[0], 0.0)
    assert old.take_actions() == []  # the live older run stays silent
    store.send(asks[0])
    store.recv_all()

    store.send(Record(T, "w.0", 2, b"c", 1, 0))  # run 1's record in flight: after the answer
    assert log.contents(T, "w.0") == [b"a", b"b"]
    for ack in [m for m in store.recv_all() if isinstance(m, Ack)]:
        old.on_ack(ack, 0.0, WID)
    assert old.fenced_by == (2, 2)  # fenced by the store's answer, not a delivery timeout
    assert old.statistics().unacked_records == 1  # c is never reported stored
