"""The FETCH retry storm of a store starved of CPU, and the rule that ends it (``_catchup.py``).

A reader catching up asks a window; the store answers it only after ``retry_initial``, so the
reader asks the window again; the store answers FETCHes in order, each to its end, so it
sends the retry's window - duplicates by now - ahead of the next window the reader needs;
with no progress meanwhile the reader retried again, and again (the partition stalled 4-22 s
at load 20-30). The rule: a FETCH reply that brings only records the reader already has
holds the retry off (the replier is visibly working through the queue), but never longer
than ``HOLD_ROUNDS x retry_max`` after the last progress.

The repliers here are scripted stores: a FIFO of the FETCHes they heard, answered in order
at a fixed rate once they wake up (a store paused past the deadline, then slow).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import pytest

from dafka.node import (
    ConsumerConfig,
    ConsumerMachine,
    FetchPolicy,
    StoreConfig,
    StoreMachine,
)
from dafka.node._catchup import HOLD_ROUNDS, TARGET_MARK
from dafka.protocol import DataMessage, DirectRecord, Fetch, GetHeads, Head, StoreHello
from dafka.testing import MemoryLog, ScriptedPeer

CID = "C0C0C0C0C0C0C0C0C0C0C0C0C0C0C0C0"
WID = "57000000000000000000000000000001"
RID = "52000000000000000000000000000002"
P = "P0000000000000000000000000000000"
POLICY = FetchPolicy(window=100, retry_initial=0.5, retry_max=5.0)
STEP = 0.01


@dataclass
class SlowStore:
    """A store reader that answers every FETCH it hears, in order, each to its end, at
    ``rate`` records per second from ``wakes`` on (asleep before: SIGSTOPped, starved)."""

    reader_id: str
    rate: float
    wakes: float
    queue: deque[list[int]] = field(default_factory=deque)
    heard: list[tuple[int, int]] = field(default_factory=list)
    credit: float = 0.0

    def hear(self, fetch: Fetch) -> None:
        _, mark, store = fetch.requester.partition(TARGET_MARK)
        if mark and store != self.reader_id:
            return  # addressed to another store
        self.heard.append((fetch.sequence, fetch.count))
        self.queue.append([fetch.sequence, fetch.sequence + fetch.count, 0])

    def answer(self, now: float, recipient: str) -> list[DirectRecord]:
        if now < self.wakes:
            return []
        self.credit += self.rate * STEP
        out: list[DirectRecord] = []
        while self.credit >= 1 and self.queue:
            window = self.queue[0]
            out.append(DirectRecord(recipient, "t", P, window[0], b"%d" % window[0]))
            window[0] += 1
            self.credit -= 1
            if window[0] >= window[1]:
                self.queue.popleft()
        if not self.queue:
            self.credit = 0.0
        return out


def run(
    peer: ScriptedPeer,
    stores: list[SlowStore],
    recipient: str,
    done: object,
    until: float,
    *,
    runs: bool = False,
) -> list[tuple[float, int, int]]:
    """Step virtual time, feeding the stores the FETCHes the reader sends and the reader their
    answers, until ``done()`` or ``until``; the FETCHes with their times. ``runs``: each
    store's answers of a step as runs of consecutive records (``on_direct_records``, as the
    runner hands a consumer a burst) rather than one message at a time."""
    fetches: list[tuple[float, int, int]] = []
    assert callable(done)
    while not done() and peer.clock.now < until:
        for message in peer.recv_all():
            if isinstance(message, Fetch):
                fetches.append((round(peer.clock.now, 2), message.sequence, message.count))
                for store in stores:
                    store.hear(message)
        for store in stores:
            answers: list[DataMessage] = list(store.answer(peer.clock.now, recipient))
            if answers and runs:
                feed_runs(peer, answers)
            elif answers:
                peer.send(*answers)
        peer.advance(STEP)
    return fetches


def feed_runs(peer: ScriptedPeer, answers: list[DataMessage]) -> None:
    machine = peer.machine
    assert isinstance(machine, ConsumerMachine)
    records = [a for a in answers if isinstance(a, DirectRecord)]
    start = 0
    for end in range(1, len(records) + 1):
        if end == len(records) or records[end].sequence != records[end - 1].sequence + 1:
            run = records[start:end]
            machine.on_direct_records(
                CID, "t", P, run[0].sequence, [r.content for r in run], peer.clock.now
            )
            start = end
    peer.drain()


def consumer() -> tuple[ConsumerMachine, ScriptedPeer]:
    machine = ConsumerMachine(CID, ConsumerConfig(offset_reset="earliest", fetch=POLICY))
    peer = ScriptedPeer(machine)
    machine.subscribe("t", 0.0)
    peer.drain()
    peer.expect(GetHeads)
    return machine, peer


@pytest.mark.parametrize("runs", [False, True], ids=["one-by-one", "runs"])
def test_a_slow_store_answering_after_the_deadline_is_asked_each_window_once(runs: bool) -> None:
    """The scene of the storm: one store, asleep 0.8 s, then answering 100 records/s (a
    window per second, slower than ``window / retry_initial``). One retry is unavoidable
    (nothing came by 0.5 s); its window, answered later as duplicates, must not cause more."""
    machine, peer = consumer()
    store = SlowStore("S", rate=100.0, wakes=0.8)
    peer.send(Head("t", P, 299))
    fetches = run(peer, [store], CID, lambda: len(peer.delivered) == 300, until=60.0, runs=runs)
    assert [d.sequence for d in peer.delivered] == list(range(300))
    stats = machine.statistics()
    # Old code: a retry per window of duplicates (each queued the next window twice).
    assert stats.fetch_retries == 1, fetches
    assert [(s, c) for _, s, c in fetches] == [(0, 100), (0, 100), (100, 100), (200, 100)]
    assert stats.dropped_duplicates == 100  # the one retry's window, nothing more


def test_two_slow_stores_serve_a_consumer_without_a_storm() -> None:
    """As above with two stores and the consumer addressing one (``_stores.py``): the retry
    goes to the other store, which is asked the next window too (the pipelined FETCH follows
    the last one sent); both wake up late (0.8 s, 1.5 s) and slow; no further retry."""
    machine, peer = consumer()
    stores = [SlowStore(f"S{i}", rate=100.0, wakes=0.8 + 0.7 * i) for i in range(2)]
    for store in stores:
        peer.send(StoreHello(CID, store.reader_id))
    peer.recv_all()  # the CONSUMER-HELLOs
    peer.send(Head("t", P, 299))
    fetches = run(peer, stores, CID, lambda: len(peer.delivered) == 300, until=60.0)
    assert [d.sequence for d in peer.delivered] == list(range(300))
    assert machine.statistics().fetch_retries == 1, fetches
    assert sum(len(s.heard) for s in stores) == 4  # three windows and the one retry


def test_a_store_writer_catching_up_from_a_slow_peer_is_asked_each_window_once() -> None:
    """The store's writer shares the rule (its FETCHes go to every replier)."""
    log = MemoryLog()
    machine = StoreMachine(WID, RID, log, StoreConfig(fetch=POLICY))
    peer = ScriptedPeer(machine, log=log)
    peer.recv_all()
    replier = SlowStore("S", rate=100.0, wakes=0.8)
    peer.send(Head("t", P, 299))

    def done() -> bool:
        return log.head("t", P) == 299

    fetches = run(peer, [replier], WID, done, until=60.0)
    assert log.contents("t", P) == [b"%d" % s for s in range(300)]
    assert machine.statistics().fetch_retries == 1, fetches


def test_a_store_that_stops_answering_is_retried_one_wait_after_its_last_answer() -> None:
    """Duplicates hold the retry off only while they come: a store that stops (killed,
    paused for good) is retried ``retry_initial`` after its last answer, duplicate or not."""
    machine, peer = consumer()
    peer.send(Head("t", P, 19))
    assert (peer.expect(Fetch).sequence, peer.clock.now) == (0, 0.0)
    peer.advance(0.1)
    peer.send(*(DirectRecord(CID, "t", P, s, b"") for s in range(5)))  # progress at 0.1
    assert machine.next_deadline() == pytest.approx(0.6)
    for _ in range(3):  # duplicates at 0.3, 0.5, 0.7 (a retry's answer): the retry waits
        peer.advance(0.2)
        peer.send(DirectRecord(CID, "t", P, 2, b""))
        peer.expect_nothing()
    assert machine.next_deadline() == pytest.approx(1.2)  # old code: 0.6, during them
    assert machine.statistics().fetch_retries == 0
    assert peer.tick()  # nothing more comes: retried on time, from last + 1
    assert peer.expect(Fetch).sequence == 5
    assert peer.clock.now == pytest.approx(1.2)
    # A store silent from then on is retried as before: the doubled wait after the FETCH.
    assert peer.tick()
    assert peer.expect(Fetch).sequence == 5
    assert peer.clock.now == pytest.approx(2.2)
    assert machine.statistics().fetch_retries == 2


def test_endless_duplicates_cannot_postpone_a_retry_past_the_bound() -> None:
    """A peer that sends duplicates without end (or a stranger replaying old records) delays
    the retry to ``HOLD_ROUNDS x retry_max`` after the last progress, once; then the retries
    follow their usual backoff whatever it sends."""
    _machine, peer = consumer()
    peer.send(Head("t", P, 19))
    peer.expect(Fetch)
    peer.advance(0.25)
    peer.send(*(DirectRecord(CID, "t", P, s, b"") for s in range(5)))  # progress at 0.25
    bound = 0.25 + HOLD_ROUNDS * POLICY.retry_max
    retries: list[float] = []
    while peer.clock.now < bound + 20.0:
        peer.advance(0.25)  # (binary fractions: the virtual times are exact)
        peer.send(DirectRecord(CID, "t", P, 3, b""))
        retries += [peer.clock.now for m in peer.recv_all() if isinstance(m, Fetch)]
    # Old code: 0.75, 1.75, 3.75... - never held off. Held: the bound, then 1, 2, 4, 5, 5 s.
    assert retries == [bound + t for t in (0.0, 1.0, 3.0, 7.0, 12.0, 17.0)]
    assert [d.sequence for d in peer.delivered] == list(range(5))


def test_answers_ahead_do_not_hold_a_retry_off() -> None:
    """Records ahead of ``last + 1`` are a hole, not a replier working through old FETCHes:
    they leave the retry where it is (the evidence that records are gone needs retries)."""
    machine, peer = consumer()
    peer.send(Head("t", P, 19))
    peer.expect(Fetch)
    peer.advance(0.1)
    peer.send(DirectRecord(CID, "t", P, 0, b""))  # progress at 0.1
    peer.advance(0.3)
    peer.send(DirectRecord(CID, "t", P, 5, b""))  # 1..4 missing: the hole is asked at once
    assert peer.expect(Fetch).sequence == 1
    assert machine.next_deadline() == pytest.approx(0.6)


def served(peer: ScriptedPeer) -> list[tuple[str, int]]:
    """Every DIRECT-RECORD the store sends until its replies are done: (recipient, sequence)."""
    out: list[tuple[str, int]] = []
    while True:
        out += [(m.recipient, m.sequence) for m in peer.recv_all() if isinstance(m, DirectRecord)]
        if not peer.tick():
            return out


def test_a_store_reading_a_fetch_and_its_retry_in_one_turn_answers_once() -> None:
    """The storm's source on the store's side: starved of CPU, a store reads a FETCH and the
    retry the asker sent 0.5 s later in the same turn; both left the asker before any of the
    reply could reach it, so one reply answers both. A FETCH in a later turn is answered
    again (the first reply may have been lost), and so is another asker's or a wider range."""
    log = MemoryLog()
    log.append("t", P, 0, [b"%d" % s for s in range(100)])
    machine = StoreMachine(WID, RID, log, StoreConfig(fetch_reply_slice=10, heads_refresh=None))
    peer = ScriptedPeer(machine, log=log)
    peer.recv_all()
    peer.send(Fetch(P, CID, "t", 0, 100), Fetch(P, CID, "t", 0, 100), Fetch(P, CID, "t", 50, 20))
    # Old code: 170 records, the retry's window of duplicates queued behind the first.
    assert served(peer) == [(CID, s) for s in range(100)]
    assert (machine.statistics().fetches_answered, machine.statistics().fetches_coalesced) == (
        1,
        2,
    )
    peer.send(Fetch(P, CID, "t", 0, 10))  # a later turn (batch)
    assert served(peer) == [(CID, s) for s in range(10)]
    peer.advance(1.0)
    peer.send(Fetch(P, CID, "t", 0, 10), Fetch(P, "OTHER", "t", 0, 10), Fetch(P, CID, "t", 5, 10))
    answers = served(peer)
    assert sorted(answers) == sorted(
        [(CID, s) for s in range(10)]
        + [("OTHER", s) for s in range(10)]
        + [(CID, s) for s in range(5, 15)]
    )
    assert machine.statistics().fetches_coalesced == 2


def test_a_retry_read_after_its_fetch_began_is_answered_only_up_to_that_reply() -> None:
    """The store read the FETCH in one turn (its first slice left at once) and the retry in
    the next: the retry gets again only what the reply sent already (it may have been lost),
    not what the reply has yet to send. A FETCH for records sent already (a hole) is
    answered whole; so is one reaching beyond the reply, or another asker's."""
    log = MemoryLog()
    log.append("t", P, 0, [b"%d" % s for s in range(100)])
    machine = StoreMachine(WID, RID, log, StoreConfig(fetch_reply_slice=10, heads_refresh=None))
    peer = ScriptedPeer(machine, log=log)
    peer.recv_all()
    peer.send(Fetch(P, CID, "t", 0, 100))  # its first slice, 0..9, leaves at once
    peer.send(Fetch(P, CID, "t", 0, 100), Fetch(P, CID, "t", 40, 20))  # the next turn
    # Old code: 0..99 twice (and 40..59 a third time), queued one after the other.
    assert served(peer) == [(CID, s) for s in range(100)] + [(CID, s) for s in range(10)]
    stats = machine.statistics()
    assert (stats.fetches_answered, stats.fetches_coalesced) == (2, 1)
    peer.send(Fetch(P, CID, "t", 0, 60))  # a reply streaming (its first slice sent) ...
    peer.send(Fetch(P, CID, "t", 2, 3), Fetch(P, CID, "t", 50, 30), Fetch(P, "OTHER", "t", 5, 5))
    answers = served(peer)
    assert sorted(answers) == sorted(
        [(CID, s) for s in range(60)]  # the reply
        + [(CID, s) for s in range(2, 5)]  # records it sent already: a hole, answered
        + [(CID, s) for s in range(50, 80)]  # reaching beyond it: answered whole
        + [("OTHER", s) for s in range(5, 10)]
    )
    assert machine.statistics().fetches_coalesced == 1


def test_a_retry_over_a_window_and_the_next_one_pipelined_is_trimmed_down_both() -> None:
    """A consumer's window streams and the next one is queued (pipelined) when its retry
    comes: the retry gets again only what the streaming reply sent."""
    log = MemoryLog()
    log.append("t", P, 0, [b"%d" % s for s in range(300)])
    machine = StoreMachine(WID, RID, log, StoreConfig(fetch_reply_slice=10, heads_refresh=None))
    peer = ScriptedPeer(machine, log=log)
    peer.recv_all()
    peer.send(Fetch(P, CID, "t", 0, 100))  # 0..9 leave at once
    peer.send(Fetch(P, CID, "t", 100, 100))  # the next window, pipelined
    peer.send(Fetch(P, CID, "t", 0, 100 + 50))  # a retry from 0 over both
    assert served(peer) == [(CID, s) for s in range(200)] + [(CID, s) for s in range(10)]
    assert machine.statistics().fetches_coalesced == 0  # trimmed, not dropped
