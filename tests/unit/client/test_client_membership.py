"""A group consumer's membership seam (``dafka.client._membership.Membership``) over the real
pure machines: the member's decisions reach the application's poll, and a handover commit
never holds a takeover back (docs/groups.md, "Timing").

The group is three pure :class:`GroupMember` machines exchanging beats by hand (``m1``, the
consumer under test, composed with its :class:`ConsumerMachine` as in the client); this
test's main thread plays m1's runner thread, a second thread plays its application's poll.
The client side is :class:`Client`, a :class:`GroupClient` (the seam ``Membership`` names)
whose handover commit the test holds, as a loaded store held one for ~7 s.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

import pytest

from dafka.client._membership import ConsumerRebalanceListener, Handed, Membership
from dafka.client._offsets import CommitFailedError, Position
from dafka.node import (
    ConsumerMachine,
    GroupConfig,
    GroupConsumerMachine,
    GroupMember,
    Send,
)
from dafka.protocol import MemberBeat

Key = tuple[str, str]
TOPIC = "t"
PARTS = [(TOPIC, f"p{i}") for i in range(6)]
CONFIG = GroupConfig("g", "", 0.5, 2.0, 0.5)
WAIT = 10.0
"""Real seconds the test waits for a condition before it fails."""


class Client:
    """What ``Membership`` needs of its consumer: positions, and a handover commit that
    blocks while ``hold`` is set (until ``release``)."""

    def __init__(self) -> None:
        self.hold = False
        self.release = threading.Event()
        self.committing: list[set[Key]] = []
        self.started: list[Key] = []
        self.positions: dict[Key, Position] = {}
        """What was handed out, as the consumer keeps it: forgotten when lost, set when
        started (at ``start_at``: the group's commits)."""
        self.start_at = 0
        self.member: GroupMember | None = None

    def _forget_partition(self, key: Key) -> None:
        del key

    def _handed_out(self, keys: Iterable[Key]) -> dict[Key, Position]:
        return dict.fromkeys(keys, 7)

    def _forget_positions(self, keys: Iterable[Key]) -> None:
        for key in keys:
            self.positions.pop(key, None)

    def _commit_handover(self, positions: dict[Key, Position]) -> dict[Key, Handed]:
        self.committing.append(set(positions))
        if self.hold:
            self.release.wait(WAIT * 2)
        return {}

    def _start_assigned(self, keys: list[Key], starts: dict[Key, Handed]) -> dict[Key, int]:
        del starts
        self.started += keys
        self.positions.update(dict.fromkeys(keys, self.start_at))
        return {} if self.member is None else self.member.tenures(keys)

    def to_commit(self) -> dict[Key, Position]:
        """The consumer's ``_to_commit(None)``."""
        return dict(self.positions)


class Listener(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.assigned: set[Key] = set()
        self.revoked: set[Key] = set()

    def on_partitions_assigned(self, assigned: set[Key]) -> None:
        self.assigned |= assigned

    def on_partitions_revoked(self, revoked: set[Key]) -> None:
        self.revoked |= revoked


class Runner:
    """m1's runner thread is the test's main thread: ``call``/``post`` from other threads
    queue work that :meth:`drain` runs."""

    def __init__(self) -> None:
        self.work: queue.Queue[tuple[Callable[[float], Any], Future[Any] | None]] = queue.Queue()

    def call(self, fn: Callable[[float], object]) -> object:
        done: Future[object] = Future()
        self.work.put((fn, done))
        return done.result(WAIT * 3)

    def post(self, fn: Callable[[float], None]) -> None:
        self.work.put((fn, None))

    def drain(self, now: float) -> None:
        while True:
            try:
                fn, done = self.work.get_nowait()
            except queue.Empty:
                return
            result = fn(now)
            if done is not None:
                done.set_result(result)


class Group:
    def __init__(self) -> None:
        self.consumer = GroupConsumerMachine(
            ConsumerMachine("m1"), GroupMember("m1", [TOPIC], CONFIG, 0.0)
        )
        self.others = {name: GroupMember(name, [TOPIC], CONFIG, 0.0) for name in ("m2", "m3")}
        self.alive = {"m1", "m2", "m3"}
        self.client = Client()
        self.client.member = self.consumer.member
        self.listener = Listener()
        self.membership = Membership(self.consumer, self.listener, self.client)
        self.runner = Runner()
        self.membership.post = self.runner.post
        self.woken = threading.Event()
        self.membership.wake = self.woken.set
        self.now = 0.0
        for member in self.members().values():
            member.partitions_seen(PARTS, 0.0)

    def members(self) -> dict[str, GroupMember]:
        return {"m1": self.consumer.member, **self.others}

    def machines(self) -> list[tuple[str, GroupConsumerMachine | GroupMember]]:
        return [("m1", self.consumer), *self.others.items()]

    def exchange(self) -> None:
        """Deliver beats among the live members until none is sent; the plain members hand
        over at once; m1's events go to its membership (the runner's end-of-turn hook)."""
        for _ in range(200):
            beats: list[tuple[str, MemberBeat]] = []
            for name, machine in self.machines():
                for action in machine.take_actions():
                    if isinstance(action, Send) and isinstance(action.message, MemberBeat):
                        beats.append((name, action.message))
            for member in self.others.values():
                for event in member.take_events():
                    if event.kind == "revoked":
                        member.revoked(event.partitions, self.now)
            self.membership.after_turn(self.now)
            if not beats:
                return
            for sender, beat in beats:
                if sender not in self.alive:
                    continue
                for name, machine in self.machines():
                    if name != sender and name in self.alive:
                        machine.on_message(beat, self.now)
        raise AssertionError("the beats never stopped")

    def tick(self, now: float) -> None:
        self.now = now
        for name, member in self.members().items():
            if name in self.alive:
                member.on_timer(now)
        self.exchange()

    def run(self, fn: Callable[[float], object]) -> object:
        """``fn`` in m1's runner turn: the test's main thread is that runner."""
        return fn(self.now)

    def rebalance(self) -> None:
        """The application's poll: it takes what m1's member decided, if anything."""
        if self.membership.pending:
            self.membership.rebalance(self.run)

    def join(self) -> list[Key]:
        """The join window, then beats every 0.5 s up to 2.0 s, the application polling
        after each: the group agrees, and m1 holds p2 and p3 (returned)."""
        self.tick(0.0)
        for step in range(1, 5):
            self.tick(step * 0.5)
            self.rebalance()
        keys = [(TOPIC, "p2"), (TOPIC, "p3")]
        assert self.consumer.member.assignment() == set(keys)
        return keys

    def pause_m1(self, since: float, until: float) -> float:
        """m1 paused (its process stopped): from ``since`` the other live members beat
        every 0.5 s and hear nothing from m1, up to ``until``; returns the last time."""
        t = since
        while t < until:
            t += 0.5
            self.now = t
            for name, member in self.others.items():
                if name in self.alive:
                    member.on_timer(t)
            self.alive.discard("m1")
            self.exchange()
            self.alive.add("m1")
        return t


def test_a_takeover_does_not_wait_behind_a_handover_commit() -> None:
    """m3 crashes; m1's assignment then gives its p2 to m2 and m3's p1 and p4 to m1. The
    handover commit of p2 is held (a slow store): m1's application still starts p1 and p4
    (``on_assign``) meanwhile, and p2 stays claimed by m1 - m2 does not take it - until
    the commit is done. Before, the poll committed p2 synchronously and only then
    assigned p1 and p4: here, not before the commit was released."""
    group = Group()
    membership, client, listener = group.membership, group.client, group.listener
    group.join()
    assert listener.assigned == {(TOPIC, "p2"), (TOPIC, "p3")}
    assert group.consumer.member.assignment() == listener.assigned

    client.hold = True
    stop = threading.Event()

    def poll() -> None:  # the application polls: rebalances whenever the member decides
        while not stop.is_set():
            if group.woken.wait(0.05):
                group.woken.clear()
            if membership.pending:
                membership.rebalance(group.runner.call)

    poller = threading.Thread(target=poll, name="application")
    poller.start()
    try:
        group.alive.discard("m3")  # m3 crashes after its beat at 2.0 s
        t = 2.0
        while t < 4.5:  # m3 is silent for session_timeout (2 s): counted dead at 4.0 s
            t += 0.5
            group.tick(t)

        def until(condition: Callable[[], bool]) -> bool:
            deadline = time.monotonic() + WAIT
            while not condition():
                if time.monotonic() > deadline:
                    return False
                group.runner.drain(group.now)
                group.exchange()
                time.sleep(0.005)
            return True

        took = until(lambda: {(TOPIC, "p1"), (TOPIC, "p4")} <= listener.assigned)
        assert client.committing == [{(TOPIC, "p2")}], client.committing
        assert took, (
            f"m1's takeover of p1 and p4 waited behind the handover commit of p2 "
            f"(on_assign so far: {sorted(listener.assigned)})"
        )
        assert not client.release.is_set()
        m1, m2 = group.consumer.member, group.others["m2"]
        assert (TOPIC, "p2") in m1.claims()  # held: not handed over yet
        assert (TOPIC, "p2") not in m2.assignment()
        client.release.set()
        assert until(lambda: (TOPIC, "p2") in m2.assignment())
        assert (TOPIC, "p2") not in m1.claims()
        assert m1.assignment() == {(TOPIC, "p1"), (TOPIC, "p3"), (TOPIC, "p4")}
    finally:
        client.release.set()
        stop.set()
        poller.join(WAIT)
        membership.close()


def test_a_queued_handover_of_partitions_lost_meanwhile_commits_nothing() -> None:
    """m1's handover of p2 (m3 crashed) waits behind a slow earlier handover commit; then m1
    is paused past session_timeout and counts itself lost. When the handover thread comes
    to p2 it must not commit it: another member may read and commit p2 by then, and m1 may
    even own p2 again, so an old position committed late would move the group back. Before,
    the queued handover committed p2's position all the same."""
    group = Group()
    membership, client, rebalance = group.membership, group.client, group.rebalance
    group.join()

    client.hold = True  # an earlier handover's commit is slow: the handover thread is busy
    membership._hand_over([], {}, group.run)
    group.alive.discard("m3")  # m3 crashes after its beat at 2.0 s
    t = 2.0
    while (TOPIC, "p2") not in group.listener.revoked:  # revoked: its handover is queued
        t += 0.5
        assert t < 6.0, "m1 never handed p2 over"
        group.tick(t)
        rebalance()
    assert group.alive == {"m1", "m2"}
    t = group.pause_m1(t, 9.0)  # only m2 beats, for longer than session_timeout (2 s)
    group.consumer.member.on_timer(t)  # m1 resumes: it counts itself lost first
    group.exchange()
    rebalance()
    client.release.set()
    deadline = time.monotonic() + WAIT
    while len(client.committing) < 2:
        assert time.monotonic() < deadline, "the queued handover never ran"
        time.sleep(0.005)
    membership.close()
    assert client.committing == [set(), set()], client.committing


def test_a_transactions_offsets_are_refused_if_their_partitions_were_taken_again_since() -> None:
    """m1 sends a transaction's offsets of p2 and p3 (its ownership check gives their
    tenures), then is paused past session_timeout: it counts itself lost and takes p2 and p3
    again once the group agrees. The check before the INTENT must refuse them: m1 owns them
    again, but another member may have read them from the group's commits meanwhile and
    written the same outputs. Before, the check looked at ownership alone and passed (in
    tests/integration/offsets/test_offsets_zombie.py at load 15, the paused member's
    transaction committed: 5 outputs twice)."""
    group = Group()
    membership, run, rebalance = group.membership, group.run, group.rebalance
    keys = group.join()
    sent = membership.refuse_lost(keys, run)  # send_offsets_to_transaction's check
    assert set(sent) == set(keys)

    t = group.pause_m1(2.0, 5.0)  # only the others beat, for longer than session_timeout
    t += 0.5
    group.tick(t)  # m1 resumes: it counts itself lost (and may take its share at once)
    rebalance()
    assert group.consumer.member.statistics().lost == 1
    while t < 12.0 and group.consumer.member.assignment() != set(keys):
        t += 0.5  # m1 joins again and gets its share back
        group.tick(t)
        rebalance()
    assert group.consumer.member.assignment() == set(keys)
    assert group.consumer.member.statistics().silences == 1
    again = membership.refuse_lost(keys, run)  # owned again: a new commit may carry them
    assert all(again[k] > sent[k] for k in keys)
    with pytest.raises(CommitFailedError):
        membership.refuse_lost(keys, run, sent)  # the check before the INTENT
    membership.close()


def test_a_commit_reads_its_positions_in_the_turn_of_its_ownership_check() -> None:
    """m1's application hands out p2 and p3 up to 7 and calls ``commit()``; its thread
    stalls before the ownership check runs (here: the check waits in the runner's queue)
    while m1's runner counts itself lost (a pause past session_timeout), joins again and
    takes p2 and p3 again under new tenures - the application has not polled, so they are
    not started again yet. The commit must not carry the old positions under the new
    tenures: the new owner meanwhile read from the group's commits, and those positions
    belong to the tenure that was lost. Before, ``commit()`` read the positions in the
    application's thread before the check, which passed (m1 owns them again) and gave the
    new tenures: p2 and p3 committed at 7 under them. Now it reads them in the check's
    runner turn (the loss forgot them) and refuses p2 and p3 - given to the application
    under a tenure the member no longer holds - with CommitFailedError: nothing is
    committed, and the application learns that what it processed of them is not."""
    group = Group()
    membership, client, runner = group.membership, group.client, group.runner
    run, rebalance = group.run, group.rebalance
    keys = group.join()
    client.positions.update(dict.fromkeys(keys, 7))  # handed out up to 7
    first = membership.check_commit(client.to_commit, run)
    assert first[0] == dict.fromkeys(keys, 7)

    answers: list[object] = []

    def commit() -> None:
        try:
            answers.append(membership.check_commit(client.to_commit, runner.call))
        except CommitFailedError as exc:
            answers.append(exc)

    app = threading.Thread(target=commit)
    app.start()  # the application's commit(): its check waits for the runner thread
    deadline = time.monotonic() + WAIT
    while runner.work.empty():
        assert time.monotonic() < deadline, "the commit never reached the runner"
        time.sleep(0.005)

    t = group.pause_m1(2.0, 5.0)  # only the others beat, for longer than session_timeout
    t += 0.5
    group.tick(t)  # m1 resumes: it counts itself lost (its positions are forgotten)
    assert group.consumer.member.statistics().lost == 1
    while t < 12.0 and group.consumer.member.assignment() != set(keys):
        t += 0.5  # m1 joins again and gets its share back (the application is not polling)
        group.tick(t)
    assert group.consumer.member.assignment() == set(keys)
    retaken = group.consumer.member.tenures(keys)
    assert all(retaken[k] > first[1][k] for k in keys)

    runner.drain(group.now)  # the stalled commit's check runs now
    app.join(WAIT)
    assert len(answers) == 1
    answer = answers[0]
    if isinstance(answer, tuple):
        positions, tenures = answer
        stale = {k: (positions[k], tenures.get(k)) for k in keys if k in positions}
        raise AssertionError(f"committed, old positions under the new tenures: {stale}")
    assert isinstance(answer, CommitFailedError)  # commits nothing: the poll says on_lost
    assert str(keys) in str(answer), answer
    # named offsets (commit(offsets)) are refused only for the partitions they name
    assert membership.check_commit(dict, run, every_started=False) == ({}, {})
    with pytest.raises(CommitFailedError):
        membership.check_commit(lambda: {keys[0]: 7}, run, every_started=False)

    client.start_at = 5  # the poll starts them again at the group's commits
    rebalance()
    positions, tenures = membership.check_commit(client.to_commit, run)
    assert {k: positions[k] for k in keys} == dict.fromkeys(keys, 5)
    assert {k: tenures[k] for k in keys} == retaken
    membership.close()
