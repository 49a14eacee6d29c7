"""Issue 18: producer resume and store catch-up interleavings, property-based.

Two stores and a named producer (``TopicProducerMachine``, one unbatched partition) on a
``MemoryNetwork`` that interleaves the (sender, recipient) streams at random (each stays in
order, as a connection is). Hypothesis draws a run: messages published, virtual time run,
steps delivered, a store made to lag (the records sent to it, live or fetched, are lost: it
answers GET-HEADS with an older head, and catches up by FETCH once it may again), and
producer restarts at any point (the machine is dropped with whatever it had in flight; a new
one with the same name resumes). Each run's contents name the run.

Properties:

* a restarted producer resumes after every sequence any earlier run had acknowledged (it
  never reuses an acknowledged sequence);
* at the end, every acknowledged message is held by a store with the content of the run that
  sent it, no store holds another content at an acknowledged sequence, and the two stores
  hold the same content at every sequence both hold (an older run's records that a newer
  run's replaced are set aside: run epochs, docs/guarantees.md).

With run epochs it passed over hypothesis seeds 0..300 at 100 examples each (30,100 runs; the
sweep found seed 217's stalled FETCH reply, now a test below); it runs 300 examples here.

The stores stay connected throughout (a store that is away for a whole resume cannot be
consulted: docs/client.md). Before the fix of path 1 the resume settled on the first store's
answer, the lagging one's when it came first, and this fails within a few examples.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dafka.client._topic_machine import TopicProducerMachine
from dafka.node import ProducerConfig, StoreMachine
from dafka.protocol import DataMessage, DirectRecord, Record
from dafka.testing import ManualClock, MemoryLog, MemoryNetwork

TOPIC = "resume"
NAME = "w"
PARTITION = f"{NAME}.0"
STORES = {"A": ("WA", "RA"), "B": ("WB", "RB")}
SETTLE = 0.5

operations = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), st.integers(1, 40)),
        st.tuples(st.just("run"), st.sampled_from([0.0, 0.05, 0.2, 0.6, 1.5])),
        st.tuples(st.just("steps"), st.integers(1, 8)),
        st.tuples(st.just("lag"), st.sampled_from(["A", "B"])),
        st.tuples(st.just("catch-up"), st.sampled_from(["A", "B"])),
        st.tuples(st.just("restart"), st.just(0)),
    ),
    max_size=40,
)


class Run:
    """The network, the stores and the current producer, and what was acknowledged."""

    def __init__(self, seed: int, order: list[str]) -> None:
        self.lagging: set[str] = set()
        self.net = MemoryNetwork(
            ManualClock(),
            drop_rate=0.999,
            seed=seed,
            droppable=self._lost,
            interleave=True,
        )
        self.logs = {name: MemoryLog() for name in STORES}
        self.writers = {writer: name for name, (writer, _) in STORES.items()}
        for name in order:
            writer, reader = STORES[name]
            log = self.logs[name]
            self.net.add(name, StoreMachine(writer, reader, log), log=log)
        self.generation = 0
        self.sent: dict[int, bytes] = {}
        """sequence -> the content the current run sent there."""
        self.acked: dict[int, bytes] = {}
        """sequence -> the content acknowledged there (by whichever run)."""
        self.acked_through = -1
        self.producer = self._start()

    def _lost(self, message: DataMessage, recipient: str) -> bool:
        """A lagging store gets no records, live or fetched (its FETCHes retry later)."""
        return recipient in self.lagging and type(message) in (Record, DirectRecord)

    def _start(self) -> TopicProducerMachine:
        producer = TopicProducerMachine(
            TOPIC,
            [PARTITION],
            ProducerConfig(head_interval=0.2),
            batching=False,
            batch_size=1 << 20,
            linger=0.0,
            resume=True,
            settle=SETTLE,
            now=self.net.clock.now,
            epoch=self.generation + 1,
        )
        self.net.add("producer", producer)
        self.net.run_until(lambda: producer.resumed, within=30.0)
        start = producer.heads.get(PARTITION, -1) + 1
        assert start > self.acked_through, (
            f"run {self.generation} resumed at {start}, but {self.acked_through} was "
            "acknowledged: it reuses acknowledged sequences"
        )
        self.sent = {}
        return producer

    def note_acks(self) -> None:
        """Take what the current run now knows stored."""
        machine = self.producer.machines[0]
        through = machine.next_sequence - machine.unacked - 1
        for sequence in range(self.acked_through + 1, through + 1):
            if sequence in self.sent:
                self.acked[sequence] = self.sent[sequence]
        self.acked_through = max(self.acked_through, through)
        self.producer.take_delivered()

    def apply(self, kind: str, arg: object) -> None:
        net = self.net
        if kind == "publish":
            assert isinstance(arg, int)
            first = self.producer.machines[0].next_sequence
            values = [b"g%d:%d" % (self.generation, first + i) for i in range(arg)]
            entries = [(0, v, None, None, None, None, (None, len(v))) for v in values]
            self.producer.add_many(entries, net.clock.now)
            self.sent.update(zip(range(first, first + arg), values, strict=True))
        elif kind == "run":
            assert isinstance(arg, float)
            net.run_for(arg)
        elif kind == "steps":
            assert isinstance(arg, int)
            for _ in range(arg):
                net.step()
        elif kind == "lag":
            self.lagging.add(str(arg))
        elif kind == "catch-up":
            self.lagging.discard(str(arg))
        else:  # restart: the old run is gone, with whatever it had in flight
            self.note_acks()
            net.remove("producer")
            self.generation += 1
            self.producer = self._start()
        self.note_acks()

    def finish(self) -> None:
        """Everything caught up; then what the stores hold at acknowledged sequences."""
        self.lagging.clear()
        self.net.run_for(10.0)
        self.note_acks()
        held = {
            name: dict(log.read(TOPIC, PARTITION, 0, 1 << 20)) for name, log in self.logs.items()
        }
        a, b = held.values()
        for sequence in a.keys() & b.keys():
            assert a[sequence] == b[sequence], (
                f"the stores hold {a[sequence]!r} and {b[sequence]!r} at {sequence}"
            )
        for sequence, content in self.acked.items():
            holders = [n for n, records in held.items() if records.get(sequence) == content]
            assert holders, f"acknowledged {content!r} at {sequence} is in no store"
            for name, records in held.items():
                found = records.get(sequence, content)
                assert found == content, (
                    f"store {name} holds {found!r} at {sequence}, where {content!r} was "
                    "acknowledged"
                )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 1 << 16),
    order=st.permutations(["A", "B"]),
    ops=operations,
)
def test_a_resume_never_goes_below_anything_acknowledged(
    seed: int, order: list[str], ops: list[tuple[str, object]]
) -> None:
    run = Run(seed, order)
    for kind, arg in ops:
        run.apply(kind, arg)
    run.finish()


def test_the_issue_case_lagging_store_answers_first() -> None:
    """The example hypothesis finds on the old resume, written out: B lags, answers first."""
    run = Run(seed=1, order=["B", "A"])
    run.apply("publish", 10)
    run.apply("run", 0.6)
    run.apply("lag", "B")
    run.apply("publish", 30)
    run.apply("run", 0.6)
    assert run.acked_through == 39
    run.apply("restart", 0)
    run.apply("publish", 5)
    run.finish()


def test_a_reused_sequence_on_a_store_that_lagged_through_the_restart() -> None:
    """The known gap of docs/guarantees.md, written out: both stores lag, the first run sent
    records 16..33 it never got ACKed, the second resumes where the store that answered
    stood and sends other records there. The store that took the first run's late kept
    them, and the stores differed (b'g0:33' held where b'g1:33' was acknowledged); with run
    epochs it sets them aside and takes the second run's."""
    run = Run(seed=2781, order=["A", "B"])
    for kind, arg in [
        ("publish", 16),
        ("run", 0.0),
        ("lag", "A"),
        ("lag", "B"),
        ("publish", 18),
        ("run", 0.0),
        ("restart", 0),
        ("publish", 18),
    ]:
        run.apply(kind, arg)
    run.finish()


def test_a_fetch_reply_waiting_for_durability_ends_when_its_wait_is_over() -> None:
    """Seed 217 of the property test, found running it over seeds 0..300: a store's FETCH
    reply waiting for durability was due at ``since + wait`` but ended only when
    ``now - since >= wait``; with since=1.55 and wait=1.0 the float difference at 2.55 is
    0.9999999999999998, so the store asked for a turn at 2.55 forever (the simulated
    network stalled: NetworkStalledError after 1,000,000 steps)."""
    run = Run(seed=228, order=["A", "B"])
    for kind, arg in [
        ("lag", "B"),
        ("catch-up", "A"),
        ("publish", 31),
        ("lag", "B"),
        ("run", 0.05),
        ("lag", "A"),
        ("publish", 37),
        ("restart", 0),
        ("publish", 8),
        ("publish", 37),
        ("steps", 5),
        ("run", 1.5),
    ]:
        run.apply(kind, arg)
    run.finish()
