"""The group watcher's pure machine: live members from MEMBER beats (``dafka groups``)."""

from __future__ import annotations

from dafka.node import GroupWatchMachine
from dafka.node.actions import Subscribe
from dafka.protocol import Head, MemberBeat


def beat(member: str, sequence: int, group: str = "g", **fields: object) -> MemberBeat:
    return MemberBeat(group, member, sequence, **fields)  # type: ignore[arg-type]


def test_it_subscribes_to_its_group_or_every_group_and_sends_nothing_else() -> None:
    assert GroupWatchMachine("g").take_actions() == [Subscribe(b"Yg")]
    assert GroupWatchMachine().take_actions() == [Subscribe(b"Y")]


def test_live_members_are_the_last_beats_heard_within_the_expiry() -> None:
    m = GroupWatchMachine("g", expiry=2.0)
    m.on_message(beat("a", 1, claims=(("t", "p.0"),)), 0.0)
    m.on_message(beat("b", 1), 0.0)
    m.on_message(beat("a", 2, claims=(("t", "p.1"),)), 1.0)
    m.on_message(beat("a", 1, claims=(("t", "p.0"),)), 1.5)  # late: ignored
    assert [(b.member, b.claims) for b in m.members(1.5)["g"]] == [
        ("a", (("t", "p.1"),)),
        ("b", ()),
    ]
    assert [b.member for b in m.members(2.5)["g"]] == ["a"]  # b not heard for 2.5 s
    m.on_message(beat("a", 3, leaving=True), 2.6)
    assert m.members(2.6) == {}


def test_other_groups_and_other_messages_are_counted_not_kept() -> None:
    m = GroupWatchMachine("g")
    m.on_message(beat("x", 1, group="g2"), 0.0)  # "Yg" also matches "Yg2"
    m.on_message(Head("t", "p.0", 5), 0.0)
    assert (m.members(0.0), m.foreign, m.unexpected) == ({}, 1, 1)
    every = GroupWatchMachine()
    every.on_message(beat("x", 1, group="g2"), 0.0)
    every.on_message(beat("y", 1, group="g"), 0.0)
    assert sorted(every.members(0.0)) == ["g", "g2"]
