"""The group watcher: which members of consumer groups are alive, and what each reads.

``dafka groups`` shows a group's members next to its committed offsets. Members announce
themselves with MEMBER beats (``Y`` + group, docs/groups.md) a few times a second; this
machine subscribes to the beats of one group (or of every group: ``Y`` alone, ZeroMQ
matches by prefix) and keeps the last beat of each member with when it was heard. A
member not heard for ``expiry`` seconds, or whose last beat said it was leaving, is gone.
It sends nothing: watching a group never changes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from dafka.node._errors import check_name
from dafka.node.actions import Action, Subscribe
from dafka.protocol import MEMBER_ID, DataMessage, MemberBeat


@dataclass(frozen=True, slots=True)
class SeenMember:
    """A member's last beat and when (the watcher's clock) it was heard."""

    beat: MemberBeat
    heard: float


class GroupWatchMachine:
    """Pure machine of a group watcher (see the module docstring)."""

    def __init__(self, group: str | None = None, expiry: float = 5.0) -> None:
        prefix = MEMBER_ID if group is None else MEMBER_ID + check_name("group", group)
        self.group = group
        self.expiry = expiry
        self._out: list[Action] = [Subscribe(prefix)]
        self._members: dict[tuple[str, str], SeenMember] = {}
        self.beats = 0
        self.foreign = 0
        self.unexpected = 0

    def members(self, now: float) -> dict[str, list[MemberBeat]]:
        """Per group, the live members' last beats (by member id)."""
        out: dict[str, list[MemberBeat]] = {}
        for (group, _), seen in sorted(self._members.items()):
            if now - seen.heard <= self.expiry and not seen.beat.leaving:
                out.setdefault(group, []).append(seen.beat)
        return out

    def on_message(self, message: DataMessage, now: float) -> None:
        if type(message) is not MemberBeat:
            self.unexpected += 1
            return
        if self.group is not None and message.group != self.group:
            self.foreign += 1  # a group whose name starts with ours
            return
        key = (message.group, message.member)
        held = self._members.get(key)
        if held is not None and held.beat.sequence > message.sequence:
            return  # a late beat
        self.beats += 1
        self._members[key] = SeenMember(message, now)

    def on_timer(self, now: float) -> None:
        gone = [k for k, s in self._members.items() if now - s.heard > 10 * self.expiry]
        for key in gone:
            del self._members[key]

    def next_deadline(self) -> float | None:
        return None

    def take_actions(self) -> list[Action]:
        out = self._out
        self._out = []
        return out


__all__ = ["GroupWatchMachine", "SeenMember"]
