"""TopicProducerMachine's resume ends on every store's "that is all" (HEADS-END).

Before HEADS-END a store holding nothing was silent, and every resume waited a settle window
after the last new store. Now the resume is done as soon as every store heard of said "that
is all" and as many stores did as any of them knows - and it still never goes backwards:
a store that has not answered yet (greeted, or counted by another) holds the resume.
"""

from __future__ import annotations

from dafka.client._topic_machine import TopicProducerMachine
from dafka.node import ProducerConfig
from dafka.node.actions import Send, SendRecords
from dafka.protocol import DataMessage, DirectHead, HeadsEnd, Record, StoreHello

TOPIC = "resume"
PARTITIONS = ["w.0", "w.1"]
ASKER = PARTITIONS[0]
SETTLE = 0.5


def make() -> TopicProducerMachine:
    machine = TopicProducerMachine(
        TOPIC,
        PARTITIONS,
        ProducerConfig(),
        batching=False,
        batch_size=1 << 20,
        linger=0.0,
        resume=True,
        settle=SETTLE,
        now=0.0,
    )
    machine.take_actions()
    return machine


class Store:
    """One store as the producer's per-peer socket shows it: its reader sends everything."""

    def __init__(self, machine: TopicProducerMachine, name: str, stores: int = 1) -> None:
        self.machine = machine
        self.reader = f"{name}-R"
        self.writer = f"{name}-W"
        self.stores = stores

    def send(self, message: DataMessage, now: float = 0.0) -> None:
        self.machine.on_message_from(message, now, self.reader)

    def greet(self, now: float = 0.0) -> None:
        self.send(StoreHello(ASKER, self.reader), now)
        self.send(StoreHello(ASKER, self.writer), now)

    def answer(self, heads: dict[str, int], now: float = 0.0, *, lost: int = 0) -> None:
        """DIRECT-HEADs then HEADS-END; ``lost``: that many DIRECT-HEADs never arrive."""
        for partition, sequence in list(heads.items())[lost:]:
            self.send(DirectHead(ASKER, TOPIC, partition, sequence), now)
        end = HeadsEnd(ASKER, TOPIC, self.reader, self.writer, len(heads), self.stores)
        self.send(end, now)


def resumed(machine: TopicProducerMachine) -> bool:
    """Read through a call: mypy narrows the attribute after the first assert."""
    return machine.resumed


def first_sequences(machine: TopicProducerMachine) -> dict[str, int]:
    machine.add_many(
        [(i, b"new", None, None, None, None, (None, 3)) for i in range(len(PARTITIONS))], 9.0
    )
    return {m.producer: m.sequence for m in _sent(machine) if isinstance(m, Record)}


def _sent(machine: TopicProducerMachine) -> list[DataMessage]:
    out: list[DataMessage] = []
    for action in machine.take_actions():
        if isinstance(action, SendRecords):
            out += action.messages()
        elif isinstance(action, Send):
            out.append(action.message)
    return out


def test_a_store_holding_nothing_ends_the_resume_at_once() -> None:
    machine = make()
    store = Store(machine, "S")
    store.greet()
    store.answer({})
    assert resumed(machine)
    assert machine.resumed_early
    assert first_sequences(machine) == {"w.0": 0, "w.1": 0}


def test_every_store_counted_must_answer_and_the_highest_head_wins() -> None:
    """The lagging store answers first (issue 18's case) and knows the other: no resume."""
    machine = make()
    lagging, ahead = Store(machine, "LAG", stores=2), Store(machine, "AHEAD", stores=2)
    lagging.greet()
    lagging.answer({"w.0": 10, "w.1": 4})
    assert not resumed(machine), "resumed before the store the first one counts answered"
    ahead.answer({"w.0": 500}, now=0.01)  # its greeting was lost: its answer is enough
    assert resumed(machine)
    assert machine.resumed_early
    assert machine.heads == {"w.0": 500, "w.1": 4}
    assert first_sequences(machine) == {"w.0": 501, "w.1": 5}


def test_a_greeted_store_that_has_not_ended_holds_the_resume() -> None:
    machine = make()
    quick, slow = Store(machine, "QUICK"), Store(machine, "SLOW")
    quick.greet()
    slow.greet()
    quick.answer({"w.0": 3})  # says it knows 1 store: the greeting says otherwise
    assert not resumed(machine)
    slow.answer({"w.1": 9}, now=0.2)
    assert resumed(machine)
    assert machine.heads == {"w.0": 3, "w.1": 9}


def test_a_heads_end_missing_a_direct_head_is_not_believed() -> None:
    """A DIRECT-HEAD dropped on the way must not pass as "that is all": the next full
    answer (the producer keeps asking) or the settle window decides."""
    machine = make()
    store = Store(machine, "S")
    store.greet()
    store.answer({"w.0": 7, "w.1": 8}, lost=1)  # w.0's DIRECT-HEAD never came
    assert not resumed(machine)
    store.answer({"w.0": 7, "w.1": 8}, now=0.1)
    assert resumed(machine)
    assert machine.heads == {"w.0": 7, "w.1": 8}


def test_a_heads_end_from_another_socket_than_its_store_is_ignored() -> None:
    machine = make()
    store = Store(machine, "S")
    store.greet()
    forged = HeadsEnd(ASKER, TOPIC, store.reader, store.writer, 0, 1)
    machine.on_message_from(forged, 0.0, "SOMEONE-ELSE")
    machine.on_message(forged, 0.0)  # unattributed: who sent it is unknown
    assert not resumed(machine)


def test_a_c_store_never_says_so_and_the_settle_window_decides() -> None:
    """A C store greets (reader id) and sends DIRECT-HEADs, never HEADS-END: the old rule."""
    machine = make()
    ours, c_store = Store(machine, "OURS", stores=2), "C-STORE-READER"
    ours.greet()
    machine.on_message_from(StoreHello(ASKER, c_store), 0.0, c_store)
    machine.on_message_from(DirectHead(ASKER, TOPIC, "w.1", 41), 0.0, c_store)
    ours.answer({"w.0": 2})
    assert not resumed(machine)
    machine.on_timer(SETTLE - 0.01)
    assert not resumed(machine)
    machine.on_timer(SETTLE)
    assert resumed(machine)
    assert not machine.resumed_early
    assert machine.heads == {"w.0": 2, "w.1": 41}


def test_other_topics_and_recipients_do_not_count() -> None:
    machine = make()
    store = Store(machine, "S")
    store.greet()
    store.send(HeadsEnd("someone", TOPIC, store.reader, store.writer, 0, 1))
    store.send(HeadsEnd(ASKER, "other-topic", store.reader, store.writer, 0, 1))
    assert not resumed(machine)
