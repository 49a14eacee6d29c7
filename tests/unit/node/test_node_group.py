"""The group member machine (dafka.node.GroupMember) on a virtual clock and an in-memory
network: joins, leaves, crashes, static members, expulsion, and hypothesis runs with random
membership changes, message loss and reordering (docs/groups.md).

Safety, checked after every delivery step: two members read the same partition at once
only when one of them counts the other dead (a crash, or beats lost for a whole
``session_timeout``); so never two readers of a partition in one generation (the same view).
Liveness: once losses stop, the views agree on the live members and every known partition
is read by exactly one member, the one rendezvous hashing names.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dafka.node import (
    ConsumerConfig,
    ConsumerMachine,
    Deliver,
    GroupConfig,
    GroupEvent,
    GroupMember,
    NodeArgumentError,
    Send,
    assign,
)
from dafka.node.actions import Action, SubscriptionNotices
from dafka.protocol import DataMessage, Fetch, MemberBeat, Record
from dafka.records import CommitRecord, CommittedOffset, fold_commits
from dafka.testing import ManualClock, MemoryNetwork

Key = tuple[str, str]
TOPIC = "t"
PARTS = [(TOPIC, f"p{i}") for i in range(6)]


class Driven(SubscriptionNotices):
    """A member and the part of a driver that matters here: it stops a revoked partition at
    once and reports the handover done ``commit_delay`` seconds later (a commit's time)."""

    def __init__(
        self,
        name: str,
        clock: ManualClock,
        *,
        instance: str = "",
        commit_delay: float = 0.05,
        topics: tuple[str, ...] = (TOPIC,),
        started: int = 0,
        join_window: float = 0.5,
    ) -> None:
        config = GroupConfig("g", instance, 0.5, 2.0, join_window)
        self.member = GroupMember(name, topics, config, clock.now, started=started)
        self.commit_delay = commit_delay
        self.pending: list[tuple[float, tuple[Key, ...]]] = []
        self.events: list[GroupEvent] = []
        self.clock = clock
        self.on_assigned: Callable[[Driven, tuple[Key, ...]], None] | None = None
        self.handover: tuple[int, int, int] | None = None
        """The (offset, index, version) its handover commits report (None: none)."""

    def on_message(self, message: DataMessage, now: float) -> None:
        self.member.on_message(message, now)
        self._events(now)

    def on_subscription(self, prefix: bytes, subscribed: bool, now: float) -> None:
        self.member.on_subscription(prefix, subscribed, now)

    def on_timer(self, now: float) -> None:
        due = [p for p in self.pending if p[0] <= now]
        self.pending = [p for p in self.pending if p[0] > now]
        for _, keys in due:
            handover = self.handover
            committed = None if handover is None else dict.fromkeys(keys, handover)
            self.member.revoked(keys, now, committed)
        self.member.on_timer(now)
        self._events(now)

    def next_deadline(self) -> float | None:
        times = [p[0] for p in self.pending]
        d = self.member.next_deadline()
        if d is not None:
            times.append(d)
        return min(times) if times else None

    def take_actions(self) -> list[Action]:
        self._events(self.clock.now)
        return self.member.take_actions()

    def _events(self, now: float) -> None:
        for event in self.member.take_events():
            self.events.append(event)
            if event.kind == "assigned" and self.on_assigned is not None:
                self.on_assigned(self, event.partitions)
            if event.kind == "revoked":
                self.pending.append((now + self.commit_delay, event.partitions))
            elif event.kind == "lost":
                lost = set(event.partitions)
                self.pending = [
                    (t, tuple(k for k in keys if k not in lost)) for t, keys in self.pending
                ]


class Group:
    """Members on a MemoryNetwork, the partitions they know, and the checks."""

    def __init__(
        self,
        *,
        seed: int = 0,
        drop_rate: float = 0.0,
        interleave: bool = True,
        partitions: Iterable[Key] = (),
    ) -> None:
        self.clock = ManualClock()
        self.cut: Callable[[DataMessage, str], bool] | None = None
        """When set, only what it selects can be lost (``drop_rate`` near 1: a cut link)."""
        self.net = MemoryNetwork(
            self.clock,
            drop_rate=drop_rate,
            seed=seed,
            interleave=interleave,
            droppable=lambda m, to: self.cut is None or self.cut(m, to),
        )
        self.members: dict[str, Driven] = {}
        self.partitions: set[Key] = set()
        self.steps = 0
        for key in partitions:
            self.add_partition(key)

    def join(self, name: str, **kw: object) -> Driven:
        driven = Driven(name, self.clock, **kw)  # type: ignore[arg-type]
        driven.on_assigned = self.check_handover
        driven.member.partitions_seen(self.partitions, self.clock.now)
        self.members[name] = driven
        self.net.add(name, driven)
        return driven

    def crash(self, name: str) -> None:
        self.net.remove(name)
        del self.members[name]

    def leave(self, name: str, within: float = 30.0) -> None:
        driven = self.members[name]
        driven.member.leave(self.clock.now)
        self.run_until(lambda: driven.member.left, within)
        self.net.settle()  # the goodbye beat leaves before the connections close
        self.net.remove(name)
        del self.members[name]

    def add_partition(self, key: Key) -> None:
        self.partitions.add(key)
        for driven in self.members.values():
            driven.member.partitions_seen([key], self.clock.now)

    def check_handover(self, taker: Driven, keys: tuple[Key, ...]) -> None:
        """When a member starts a partition, no member it counts alive reads it or is still
        handing it over (claims it) - unless that member counts the taker dead."""
        mt = taker.member
        for other in self.members.values():
            mo = other.member
            if other is taker:
                continue
            both = set(keys) & mo.claims()
            if both and mo.key in mt.view() and mt.key in mo.view():
                raise AssertionError(
                    f"{mt.key} took {sorted(both)} that {mo.key} still claims, each counting "
                    f"the other alive ({sorted(mt.view())} / {sorted(mo.view())})"
                )

    def check_safety(self) -> None:
        live = list(self.members.values())
        for a, b in itertools.combinations(live, 2):
            ma, mb = a.member, b.member
            both = ma.assignment() & mb.assignment()
            if not both:
                continue
            counted = mb.key in ma.view() and ma.key in mb.view()
            assert not counted, (
                f"{ma.key} and {mb.key} both read {sorted(both)} while each counts the other "
                f"alive (views {sorted(ma.view())} / {sorted(mb.view())})"
            )
            assert ma.view() != mb.view(), f"two claims of {sorted(both)} in one generation"

    def step_checked(self, limit: float) -> bool:
        """One delivery step (or a clock jump), then the safety check; False at ``limit``.

        Two members read a partition at once only if one counts the other dead."""
        self.steps += 1
        if not self.net.step():
            machines = [self.net.machine(n) for n in self.members]
            if not self.clock.jump(machines, limit):
                return False
        self.check_safety()
        return True

    def run(self, seconds: float) -> None:
        limit = self.clock.now + seconds
        while self.step_checked(limit):
            pass
        self.clock.advance(max(0.0, limit - self.clock.now))

    def run_until(self, condition: object, within: float = 30.0) -> float:
        start = self.clock.now
        limit = start + within
        while not condition():  # type: ignore[operator]
            if not self.step_checked(limit):
                raise AssertionError(f"not within {within} virtual s: {self.describe()}")
        return self.clock.now - start

    def converged(self) -> bool:
        live = list(self.members.values())
        keys = {d.member.key for d in live}
        owners: dict[Key, list[str]] = {}
        for d in live:
            if d.member.view() != keys or d.member.claims() != d.member.assignment():
                return False
            for p in d.member.assignment():
                owners.setdefault(p, []).append(d.member.key)
        if not live:
            return True
        judge = live[0].member
        return all(owners.get(p) == [judge.owner(p)] for p in self.partitions)

    def describe(self) -> str:
        return "; ".join(
            f"{n}: view={sorted(d.member.view())}"
            f" owns={sorted(p for _, p in d.member.assignment())}"
            f" claims={sorted(p for _, p in d.member.claims())}"
            for n, d in self.members.items()
        )


def owned_by(group: Group) -> dict[str, set[Key]]:
    return {n: set(d.member.assignment()) for n, d in group.members.items()}


def test_three_members_share_six_partitions_disjointly_and_completely() -> None:
    group = Group(partitions=PARTS)
    for name in ("a", "b", "c"):
        group.join(name)
    group.run_until(group.converged)
    owned = owned_by(group)
    assert set().union(*owned.values()) == set(PARTS)
    assert [len(s) for s in owned.values()] == [2, 2, 2]


def test_a_member_joining_an_existing_group_reads_once_it_heard_the_group() -> None:
    group = Group(partitions=PARTS)
    group.join("a")
    group.join("b")
    group.run_until(group.converged)
    group.run(3.0)
    joined_at = group.clock.now
    c = group.join("c")
    group.run_until(lambda: bool(c.member.assignment()))
    took = group.clock.now - joined_at
    # not the join window (0.5 s): a's and b's beats name every member, so c joins at
    # once; then their handover commits (0.05 s) and a beat
    assert took <= 0.05 + 0.01, took
    group.run_until(group.converged)
    a_events = [e.kind for e in group.members["a"].events]
    assert a_events == ["assigned", "revoked"]


def test_a_handed_over_partition_starts_where_its_beats_said_it_was_committed() -> None:
    # the old owners' beats carry their handover commits: the newcomer starts there
    # without reading the commits; a partition nobody handed over (a new one) has no start
    group = Group(partitions=PARTS)
    for name in ("a", "b"):
        group.join(name).handover = (41, 2, 7)
    group.run_until(group.converged)
    group.run(1.0)
    c = group.join("c")
    group.run_until(group.converged)
    assigned = [e for e in c.events if e.kind == "assigned"]
    starts = dict(s for e in assigned for s in e.starts)
    assert set(starts) == c.member.assignment()
    assert set(starts.values()) == {(41, 2, 7)}
    group.add_partition((TOPIC, "new"))
    group.run_until(group.converged)
    for driven in group.members.values():
        news = [e for e in driven.events if (TOPIC, "new") in e.partitions]
        assert all(not e.starts for e in news)
    # a session timeout later the beats no longer carry them: a later take reads the commits
    group.run(2.5)
    for old_owner in ("a", "b"):
        member = group.members[old_owner].member
        member.on_timer(group.clock.now + 0.5)
        beats = [x.message for x in member.take_actions() if isinstance(x, Send)]
        assert beats
        assert all(isinstance(b, MemberBeat) and not b.handed for b in beats)


def test_a_newcomer_that_hears_nobody_waits_its_whole_join_window() -> None:
    group = Group(partitions=PARTS)
    a = group.join("a")
    group.run_until(lambda: bool(a.member.assignment()))
    assert group.clock.now == pytest.approx(0.5)  # alone: the window, then everything
    group.run(3.0)
    b = group.join("b", instance="x")  # hears a; a's beats name only a, then a and b
    group.run_until(lambda: bool(b.member.assignment()))
    assert group.clock.now - 3.5 < 0.5
    group.run_until(group.converged)


def test_a_lone_members_first_take_waits_for_the_whole_partition_list() -> None:
    """On a loaded machine the stores' heads came in pieces after the window: a lone member
    took p0 alone, then p1... (one on_assign each). It now waits, up to one more window,
    until its driver knows every partition (the stores said "that is all")."""
    group = Group()
    a = group.join("a")
    a.member.partitions_listed(False, group.clock.now)
    group.add_partition(PARTS[0])
    group.run(0.7)  # the window is over: not listed, nothing taken
    assert not a.member.assignment()
    for p in PARTS[1:]:
        group.add_partition(p)
    a.member.partitions_listed(True, group.clock.now)
    assert a.member.assignment() == set(PARTS)
    group.run(0.01)
    assert [(e.kind, set(e.partitions)) for e in a.events] == [("assigned", set(PARTS))]
    b = group.join("b")  # never listed (a C store says no "that is all"): one more window
    b.member.partitions_listed(False, group.clock.now)
    group.run_until(lambda: bool(b.member.assignment()))
    group.run_until(group.converged)


def test_a_crashed_members_partitions_are_taken_over_after_session_timeout() -> None:
    group = Group(partitions=PARTS)
    for name in ("a", "b", "c"):
        group.join(name)
    group.run_until(group.converged)
    group.run(1.7)
    lost = group.members["c"].member.assignment()
    assert lost
    crashed_at = group.clock.now
    group.crash("c")
    group.run_until(
        lambda: (
            lost <= group.members["a"].member.assignment() | group.members["b"].member.assignment()
        )
    )
    took = group.clock.now - crashed_at
    assert 1.5 <= took <= 2.0 + 0.01, took  # the last beat was up to one interval before
    group.run_until(group.converged)


def test_a_leaving_member_hands_over_at_once() -> None:
    group = Group(partitions=PARTS)
    group.join("a")
    group.join("b")
    group.run_until(group.converged)
    mine = group.members["b"].member.assignment()
    start = group.clock.now
    group.leave("b")
    group.run_until(lambda: group.members["a"].member.assignment() == set(PARTS))
    assert group.clock.now - start < 0.2  # commit delay + beats, no session timeout
    assert mine


def test_a_new_partition_is_assigned_as_it_appears() -> None:
    group = Group()
    group.join("a")
    group.join("b")
    group.run_until(group.converged)
    group.add_partition((TOPIC, "new"))
    group.run_until(group.converged)
    owners = [n for n, s in owned_by(group).items() if (TOPIC, "new") in s]
    assert len(owners) == 1


def test_a_static_member_restarting_within_the_timeout_moves_nothing() -> None:
    group = Group(partitions=PARTS)
    group.join("a", instance="w1", started=1)
    group.join("b", instance="w2", started=1)
    group.run_until(group.converged)
    before = owned_by(group)
    a_events = len(group.members["a"].events)
    group.crash("b")
    group.run(1.0)
    group.join("b2", instance="w2", started=2)
    group.run_until(group.converged)
    after = owned_by(group)
    assert after["a"] == before["a"]
    assert after["b2"] == before["b"]
    assert len(group.members["a"].events) == a_events  # a never revoked or took anything


def test_a_static_member_closing_keeps_its_partitions_until_the_timeout() -> None:
    group = Group(partitions=PARTS)
    group.join("a", instance="w1")
    group.join("b", instance="w2")
    group.run_until(group.converged)
    b_parts = group.members["b"].member.assignment()
    group.leave("b")
    group.run(1.0)
    assert not (b_parts & group.members["a"].member.assignment())
    group.run_until(lambda: group.members["a"].member.assignment() == set(PARTS))


def test_two_incarnations_of_one_instance_id_fence_the_older() -> None:
    group = Group(partitions=PARTS)
    old = group.join("a", instance="w1", started=1)
    group.run_until(group.converged)
    new = group.join("a2", instance="w1", started=2)
    group.run_until(lambda: old.member.fenced)
    assert old.events[-1].kind == "fenced"
    assert not old.member.assignment()
    group.crash("a")
    group.run_until(group.converged)
    assert new.member.assignment() == set(PARTS)


def test_a_member_counted_dead_learns_it_and_stops_reading() -> None:
    # b's beats to a are lost for a whole session timeout: a expels b and takes its
    # partitions; b hears a's view without it and stops at once (lost, no commit)
    group = Group(partitions=PARTS)
    a = group.join("a")
    b = group.join("b")
    group.run_until(group.converged)
    b_parts = b.member.assignment()
    assert b_parts
    cut = {"on": True}
    group.net._droppable = lambda m, to: cut["on"] and isinstance(m, MemberBeat) and m.member == "b"
    group.net.drop_rate = 0.999999
    group.run_until(lambda: "b" not in a.member.view())
    group.run_until(lambda: any(e.kind == "lost" for e in b.events))
    assert not b.member.assignment()
    group.net.drop_rate = 0.0
    group.run_until(group.converged)


def test_a_member_that_cannot_hear_one_member_takes_nothing_until_the_views_agree() -> None:
    # n hears b but not a (a one-way cut); b hears both: n's view lacks a, b's has it, so
    # they disagree and n takes nothing, although it wins partitions in its own view
    group = Group(partitions=PARTS)
    a = group.join("a")
    group.run_until(group.converged)
    group.cut = lambda m, to: isinstance(m, MemberBeat) and m.member == "a" and to == "n"
    group.net.drop_rate = 0.999999
    b = group.join("b")
    n = group.join("n")
    group.run(5.0)
    assert b.member.view() == {"a", "b", "n"}
    assert n.member.view() == {"b", "n"}
    assert not n.member.assignment()
    assert not (a.member.assignment() & b.member.assignment())
    group.net.drop_rate = 0.0
    group.run_until(group.converged)
    assert n.member.assignment()


@given(
    members=st.sets(st.text("abcdefgh", min_size=1, max_size=4), min_size=1, max_size=6),
    count=st.integers(0, 40),
)
def test_the_assignment_is_balanced_and_moves_little_on_a_join(
    members: set[str], count: int
) -> None:
    topics = frozenset((TOPIC,))
    parts = [(TOPIC, f"p{i}") for i in range(count)]
    before = assign([(m, topics) for m in members], parts)
    assert set(before) == set(parts)
    loads = Counter(before.values())
    assert max(loads.values(), default=0) <= -(-count // len(members))
    after = assign([(m, topics) for m in [*members, "new"]], parts)
    moved = sum(1 for p in parts if before[p] != after[p])
    share = -(-count // (len(members) + 1))  # what the new member gets
    assert moved <= 2 * share + len(members)  # about a share, more when the bound tightens


def test_a_member_beats_at_once_for_a_subscription_to_its_beats() -> None:
    # a joining member subscribes to Y + group, a watcher (dafka groups) to Y alone: both
    # hear the member now instead of at its next heartbeat; other prefixes change nothing
    member = GroupMember("a", [TOPIC], GroupConfig("g"), 0.0)
    member.take_actions()
    for prefix, beats in ((b"Yg", True), (b"Y", True), (b"Yg2", False), (b"Mg", False)):
        member.on_subscription(prefix, True, 0.1)
        sent = [a for a in member.take_actions() if isinstance(a, Send)]
        assert bool(sent) == beats, prefix


def test_config_is_checked() -> None:
    with pytest.raises(NodeArgumentError):
        GroupConfig("g", heartbeat_interval=3.0, session_timeout=2.0)
    with pytest.raises(NodeArgumentError):
        GroupConfig("")


def test_beats_of_another_group_and_stale_beats_are_ignored() -> None:
    clock = ManualClock()
    m = GroupMember("a", [TOPIC], GroupConfig("g", join_window=0), clock.now)
    m.partitions_seen(PARTS, clock.now)
    m.on_message(MemberBeat("other", "x", 5, "", (TOPIC,), ("x",), tuple(PARTS)), clock.now)
    assert m.view() == {"a"}
    heard = (("a", 1),)  # x heard a: it counts from this beat (before: pending)
    m.on_message(MemberBeat("g", "x", 5, "", (TOPIC,), ("x",), (), acks=heard), clock.now)
    m.on_message(MemberBeat("g", "x", 4, "", (TOPIC,), ("x",), tuple(PARTS), acks=heard), clock.now)
    assert m.statistics().stale_beats == 1
    assert m.view() == {"a", "x"}


Op = tuple[str, int]
ops = st.lists(
    st.tuples(
        st.sampled_from(["join", "join", "leave", "crash", "partition", "run", "run"]),
        st.integers(0, 5),
    ),
    min_size=3,
    max_size=14,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=ops,
    seed=st.integers(0, 2**16),
    drop=st.sampled_from([0.0, 0.05, 0.3]),
    commit=st.sampled_from([0.0, 0.05, 0.8]),
)
# a newcomer hears nobody in its join window (beats lost) and takes everything; a member
# that reads p0 hears it, then it hears that member's beat claiming p0: both kept p0
@example(ops=[("join", 3), ("crash", 0), ("join", 4)], seed=239, drop=0.3, commit=0.0)
def test_random_membership_changes_loss_and_reordering(
    ops: list[Op], seed: int, drop: float, commit: float
) -> None:
    group = Group(seed=seed, drop_rate=drop, partitions=PARTS[:3])
    names = itertools.count()
    group.join(f"m{next(names)}", commit_delay=commit)
    for op, arg in ops:
        live = sorted(group.members)
        if op == "join" and len(live) < 5:
            static = arg % 2 == 0
            n = next(names)
            group.join(
                f"m{n}",
                commit_delay=commit,
                instance=f"i{arg}"
                if static
                and f"i{arg}" not in {d.member.config.instance_id for d in group.members.values()}
                else "",
                started=n,
            )
        elif op == "leave" and live:
            name = live[arg % len(live)]
            if drop == 0.0:
                group.leave(name)
            else:  # a goodbye can be lost: the leaver closes at once anyway
                group.members[name].member.leave(group.clock.now)
                group.run(0.3)
                if name in group.members:
                    group.crash(name)
        elif op == "crash" and live:
            group.crash(live[arg % len(live)])
        elif op == "partition":
            group.add_partition((TOPIC, f"x{arg}"))
        group.run(0.1 + arg * 0.4)
    group.net.drop_rate = 0.0
    group.run_until(group.converged, within=60.0)


def test_a_group_topic_is_read_only_in_the_partitions_the_member_owns() -> None:
    consumer = ConsumerMachine("C", ConsumerConfig(offset_reset="latest"))
    consumer.subscribe_group(TOPIC, 0.0)
    consumer.take_actions()
    consumer.on_records(TOPIC, "p0", 0, [b"a", b"b"], 0.0)
    consumer.on_message(Record(TOPIC, "p1", 7, b"x"), 0.0)
    assert not [a for a in consumer.take_actions() if isinstance(a, Deliver)]
    assert consumer.take_discovered() == {(TOPIC, "p0"): 1, (TOPIC, "p1"): 7}
    assert consumer.take_discovered() == {}
    assert consumer.statistics().dropped_not_owned == 2
    consumer.own(TOPIC, "p0", 0, 1.0)  # a committed offset: fetched from there
    fetches = [a.message for a in consumer.take_actions() if isinstance(a, Send)]
    assert [(f.producer, f.sequence) for f in fetches if isinstance(f, Fetch)] == [("p0", 0)]
    consumer.own(TOPIC, "p1", None, 1.0)  # latest, nothing committed: after the last heard of
    consumer.on_message(Record(TOPIC, "p1", 8, b"y"), 1.0)
    delivered = [a for a in consumer.take_actions() if isinstance(a, Deliver)]
    assert [(d.producer, d.first_sequence, d.contents) for d in delivered] == [("p1", 8, (b"y",))]
    consumer.on_message(Record(TOPIC, "p1", 9, b"z"), 1.0)
    consumer.disown(TOPIC, "p1")  # taken but not handed out: dropped
    assert not [a for a in consumer.take_actions() if isinstance(a, Deliver)]
    consumer.on_message(Record(TOPIC, "p1", 10, b"w"), 1.0)
    assert not [a for a in consumer.take_actions() if isinstance(a, Deliver)]


def _crossing_names() -> tuple[str, str, str, Key]:
    """Member keys a, b, c and a partition that {a, b} gives to b and {a, b, c} to a."""
    topics = frozenset((TOPIC,))
    for i, j, k in itertools.product(range(12), repeat=3):
        a, b, c = f"a{i}", f"b{j}", f"c{k}"
        two = assign([(a, topics), (b, topics)], PARTS[:4])
        three = assign([(a, topics), (b, topics), (c, topics)], PARTS[:4])
        for p in PARTS[:4]:
            if two[p] == b and three[p] == a:
                return a, b, c, p
    raise AssertionError("no crossing names")


def test_crossing_generations_never_give_one_partition_to_two_members() -> None:
    # b hears c at once, a only a second later, and c then dies for b alone: b goes
    # {a,b} -> {a,b,c} -> {a,b} while a goes {a,b} -> {a,b,c}, and a's news is late at b.
    # {a,b} gives p to b, {a,b,c} to a: without acks each would take p on a stale beat of
    # the other that agrees with its own state. A beat agrees only once it acknowledges
    # the taker's current generation, so each waits for the other's news: no two take p
    na, nb, nc, p = _crossing_names()
    config = GroupConfig("g", "", 0.5, 2.0, 0.0)
    clock = {"now": 0.0}
    a = GroupMember(na, [TOPIC], config, 0.0)
    b = GroupMember(nb, [TOPIC], config, 0.0)
    c = GroupMember(nc, [TOPIC], config, 0.0)
    for m in (a, b, c):
        m.partitions_seen(PARTS[:4], 0.0)
    links = {(x, y): "deliver" for x in "abc" for y in "abc" if x != y}
    links.update({("a", "c"): "drop", ("b", "c"): "drop", ("c", "a"): "drop", ("c", "b"): "drop"})
    members = {"a": a, "b": b, "c": c}
    held: list[MemberBeat] = []

    def flush(rounds: int = 6) -> None:
        now = clock["now"]
        for _ in range(rounds):
            for m in members.values():
                for event in m.take_events():
                    if event.kind == "revoked":
                        m.revoked(event.partitions, now)  # committed at once
            for name, m in members.items():
                for action in m.take_actions():
                    if not isinstance(action, Send):
                        continue
                    for other, to in members.items():
                        link = links.get((name, other))
                        if link == "deliver":
                            to.on_message(action.message, now)
                        elif link == "hold":
                            held.append(action.message)  # type: ignore[arg-type]

    flush()  # a and b alone: b reads p
    assert p in b.assignment()
    links.update({("a", "b"): "hold", ("a", "c"): "deliver", ("b", "c"): "deliver"})
    links[("c", "b")] = "deliver"
    c.on_timer(0.0)
    flush(1)  # b hears c once; a's beats to b are held from now on
    links[("c", "b")] = "drop"
    flush()
    stale = list(held)  # what a sent before it heard c
    clock["now"] = 1.0
    links[("c", "a")] = "deliver"
    c.on_timer(1.0)
    flush()  # a hears c
    clock["now"] = 1.9
    for beat in stale:
        b.on_message(beat, 1.9)  # a is alive for b, with its news from before c
    clock["now"] = 2.01
    for m in members.values():
        m.on_timer(2.01)  # c's beats stopped reaching b at 0.0: it expires there
    flush()
    assert nc not in b.view()
    assert nc in a.view()
    readers = [m.key for m in (a, b) if p in m.assignment()]
    assert len(readers) <= 1, f"{p} read by {readers}"


def test_a_member_counted_dead_and_heard_again_gets_back_what_was_taken_meanwhile() -> None:
    # b's beats to a are lost for a session timeout: a counts b dead and takes b's
    # partitions, while b, alive, still reads them. When a hears b again it stops reading
    # what it took since - whatever that beat claims: b may have taken more after sending
    # it, so a beat that claims nothing does not prove b reads nothing. A handover (commit):
    # b may as well be dead, its last beat read late
    config = GroupConfig("g", "", 0.5, 2.0, 0.0)
    a = GroupMember("a", [TOPIC], config, 0.0)
    b = GroupMember("b", [TOPIC], config, 0.0)
    for m in (a, b):
        m.partitions_seen(PARTS[:4], 0.0)
    for _ in range(6):
        for m, other in ((a, b), (b, a)):
            for event in m.take_events():
                if event.kind == "revoked":
                    m.revoked(event.partitions, 0.0)  # committed at once
            for action in m.take_actions():
                if isinstance(action, Send):
                    other.on_message(action.message, 0.0)
    assert len(a.assignment()) == len(b.assignment()) == 2
    mine, theirs = a.assignment(), b.assignment()
    a.take_events()
    for t in (0.5, 1.0, 1.5):  # a beats on (b does not hear it: irrelevant here)
        a.on_timer(t)
        a.take_actions()
    a.on_timer(2.0)  # b silent for session_timeout: dead for a, which takes everything
    assert a.assignment() == set(PARTS[:4])
    sequence = b.statistics().beats_sent
    heard = (("a", a.generation),)  # b never stopped hearing a
    a.on_message(MemberBeat("g", "b", sequence, "", (TOPIC,), ("a", "b"), (), acks=heard), 2.1)
    assert a.assignment() == mine
    released = [e for e in a.take_events() if e.kind == "revoked"]
    assert [set(e.partitions) for e in released] == [theirs]
    assert a.claims() == set(PARTS[:4])  # claimed until handed over (committed)
    assert a.statistics().conflicts == 1


@pytest.mark.parametrize("first", ["timer", "beats"])
def test_a_paused_member_loses_everything_before_it_commits_or_takes_anything(first: str) -> None:
    # b's process is paused (SIGSTOP) past the session timeout: a counts it dead and takes
    # its partitions. When b resumes, its first input - a timer, or a's beats that waited in
    # its socket - must tell it that it lost everything (no commit). Before, b expired a
    # (whose last beats it had were as old as its own), took every partition as a lone
    # member, and on hearing a's claims handed its own partitions over with a commit: a
    # zombie's commit, ranked above a's
    group = Group(partitions=PARTS)
    a = group.join("a")
    b = group.join("b")
    group.run_until(group.converged)
    b_parts = b.member.assignment()
    assert b_parts
    group.net.pause("b")
    del group.members["b"]  # its timers do not run either
    group.run_until(lambda: a.member.assignment() == set(PARTS))
    group.run(1.0)
    paused_events = len(b.events)
    group.net.resume("b")
    group.members["b"] = b
    now = group.clock.now
    if first == "timer":
        b.on_timer(now)
    else:
        group.net.step()  # a's beats sent during the pause
    resumed = b.events[paused_events:]
    assert [e.kind for e in resumed] == ["lost"], (first, resumed)
    assert set(resumed[0].partitions) == b_parts
    assert not b.member.assignment()
    assert not b.member.claims()
    assert b.member.refused_commits(b_parts, now) == b_parts
    assert b.member.statistics().silences == 1
    group.run_until(group.converged)
    after = b.events[paused_events + 1 :]
    assert all(e.kind != "revoked" or not set(e.partitions) & b_parts for e in after), after


@pytest.mark.parametrize("b_clock_ahead_ms", [0, 60_000])
def test_a_commit_written_after_a_pause_past_its_check_ranks_below_the_new_owners(
    b_clock_ahead_ms: int,
) -> None:
    # The check-to-write window (docs/groups.md, "Tenures"): b checks that it owns its
    # partitions, and its process is paused (SIGSTOP) before its commit RECORD leaves. a
    # counts it dead, takes them over and commits them further; b resumes and its commit
    # is written - after a's, with a later version (its clock reads later). The fold of the
    # two records must give a's positions. Before the tenures (rank by version alone) it
    # gave b's: the group's position moved back. With b's host clock a minute ahead of a's,
    # a's tenure is still above b's: b's beats carried its tenure clock, and a's take ranks
    # above what it heard.
    group = Group(partitions=PARTS)
    a = group.join("a")
    b = group.join("b", started=b_clock_ahead_ms)
    group.run_until(group.converged)
    group.run(1.0)  # b reads a while (its beats since its take reach a) before it commits
    b_parts = b.member.assignment()
    assert b_parts
    assert not b.member.refused_commits(b_parts, group.clock.now)  # b's last check: passes
    b_tenures = b.member.tenures(b_parts)
    assert set(b_tenures) == b_parts
    group.net.pause("b")  # ... and b is stopped before its write
    del group.members["b"]
    group.run_until(lambda: a.member.assignment() == set(PARTS))
    assert not a.member.refused_commits(b_parts, group.clock.now)
    a_tenures = a.member.tenures(b_parts)
    a_version = int(group.clock.now * 1_000_000)
    a_commit = CommitRecord(
        "g", "a", {k: CommittedOffset(12, 0, a_version, "", a_tenures[k]) for k in b_parts}
    )
    group.run(1.0)
    group.net.resume("b")  # b's commit leaves now, its version from its clock (ahead)
    b_version = int(group.clock.now * 1_000_000) + b_clock_ahead_ms * 1000
    assert b_version > a_version
    b_commit = CommitRecord(
        "g", "b", {k: CommittedOffset(7, 0, b_version, "", b_tenures[k]) for k in b_parts}
    )
    folded = fold_commits([a_commit, b_commit])
    moved = {p: c.offset for (_, p), c in folded.items() if c.offset != 12}
    assert not moved, f"b's late commit moved the group's position back to {moved}"
    assert fold_commits([b_commit, a_commit]) == folded


def test_a_take_ranks_above_every_tenure_heard_and_read() -> None:
    # a's wall clock reads 0 and b's a minute ahead: a's take after hearing b is above b's
    # tenures all the same, and a tenure read from the stores (a committer whose beats a
    # never heard) raises a's own above it
    group = Group(partitions=PARTS)
    a = group.join("a")
    b = group.join("b", started=60_000)
    group.run_until(group.converged)
    group.run(1.0)
    b_parts = b.member.assignment()
    b_top = max(b.member.tenures(b_parts).values())
    assert b_top >= 60_000_000
    assert a.member.statistics().tenure >= b_top  # heard in b's beats
    assert min(a.member.tenures(a.member.assignment()).values()) < b_top  # taken before
    group.crash("b")
    group.run_until(lambda: a.member.assignment() == set(PARTS))
    assert all(t > b_top for t in a.member.tenures(b_parts).values())
    key = sorted(a.member.assignment())[0]
    read = a.member.statistics().tenure + 200_000_000  # a committer's clock 200 s ahead
    a.member.tenure_read(key, read)
    assert a.member.tenures([key])[key] > read
    # a tenure further ahead than TENURE_AHEAD_US is a lie (2**63 - 1 made the next take's
    # tenure unencodable: every beat dropped) or a broken clock: counted, ignored
    a.member.tenure_read(key, 2**63 - 1)
    assert a.member.tenures([key])[key] == read + 1
    assert a.member.statistics().tenures_refused == 1
    assert a.member.statistics().tenure == a.member.tenures([key])[key]


def _newcomer_names() -> tuple[str, str, Key]:
    """Keys a, b and a partition that a's assignment over PARTS[:3] and b's over PARTS[:4]
    (a and b both members) each give to itself."""
    topics = frozenset((TOPIC,))
    for i, j in itertools.product(range(20), repeat=2):
        a, b = f"a{i}", f"b{j}"
        mine = assign([(a, topics), (b, topics)], PARTS[:3])
        theirs = assign([(a, topics), (b, topics)], PARTS[:4])
        for p in PARTS[:3]:
            if mine[p] == a and theirs[p] == b:
                return a, b, p
    raise AssertionError("no such names")


def test_two_newcomers_that_heard_nobody_never_read_one_partition_counting_each_other() -> None:
    # a and b start together; their first beats (claiming nothing) arrive only after both
    # windows ended, and the beats they sent on taking everything are lost. b knows one
    # partition more than a, so their assignments over {a, b} differ: each gives p to
    # itself. Before, each counted the other alive on that first beat and kept p: two
    # readers counting each other alive until the next beat. Now a member counts another
    # alive only from a beat that acknowledges it (sent after its sender heard it), and
    # meanwhile takes nothing: a's next beat acknowledges b and claims p, b drops it
    na, nb, p = _newcomer_names()
    config = GroupConfig("g", "", 0.5, 2.0, 0.5)
    a = GroupMember(na, [TOPIC], config, 0.0)
    b = GroupMember(nb, [TOPIC], config, 0.0)
    a.partitions_seen(PARTS[:3], 0.0)
    b.partitions_seen(PARTS[:4], 0.0)

    def beats(m: GroupMember) -> list[DataMessage]:
        for event in m.take_events():
            if event.kind == "revoked":
                m.revoked(event.partitions, m_now[0])  # committed at once
        return [x.message for x in m.take_actions() if isinstance(x, Send)]

    m_now = [0.0]
    first_a, first_b = beats(a), beats(b)  # held
    m_now[0] = 0.5
    a.on_timer(0.5)
    b.on_timer(0.5)
    assert p in a.assignment()  # each alone: everything
    assert p in b.assignment()
    beats(a)  # lost
    beats(b)
    m_now[0] = 0.6

    def check() -> None:
        counted = a.key in b.view() and b.key in a.view()
        assert not (counted and a.assignment() & b.assignment()), (
            f"{sorted(a.assignment() & b.assignment())} read by both, each counting the other "
            f"alive ({sorted(a.view())} / {sorted(b.view())})"
        )

    for beat in first_b:
        a.on_message(beat, 0.6)
    for beat in first_a:
        b.on_message(beat, 0.6)
    check()
    for _ in range(8):  # then every beat arrives
        sent_a, sent_b = beats(a), beats(b)
        for beat in sent_a:
            b.on_message(beat, m_now[0])
            check()
        for beat in sent_b:
            a.on_message(beat, m_now[0])
            check()
    assert a.view() == b.view() == {a.key, b.key}
    assert not a.assignment() & b.assignment()


def test_pending_members_are_counted_until_they_acknowledge_this_one() -> None:
    a = GroupMember("a", [TOPIC], GroupConfig("g", "", 0.5, 2.0, 0.5), 0.0)
    a.take_actions()
    b_first = MemberBeat("g", "b", 0, "", (TOPIC,), ("b",), (), generation=1)
    a.on_message(b_first, 0.1)  # b has not heard a: pending
    assert (a.statistics().pending, a.pending_members()) == (1, frozenset({"b"}))
    assert a.view() == {"a"}
    acked = MemberBeat("g", "b", 1, "", (TOPIC,), ("a", "b"), (), generation=2, acks=(("a", 1),))
    a.on_message(acked, 0.2)
    assert (a.statistics().pending, a.pending_members()) == (0, frozenset())
    assert a.view() == {"a", "b"}
