"""A consumer machine and a group member as one node machine (docs/groups.md).

The runner drives one machine per node: a group consumer is its :class:`ConsumerMachine`
(reading the partitions it owns) and its :class:`GroupMember` (deciding which), composed
here. Beats go to the member, everything else to the consumer; after each input the
partitions the consumer heard of go to the member. What the member decides
(:class:`GroupEvent`) is the driver's to act on (:meth:`take_events`): the client starts a
partition at its committed offset, and hands one over after committing it.
"""

from __future__ import annotations

from collections.abc import Sequence

from dafka.node._consumer import ConsumerMachine
from dafka.node._group import GroupEvent, GroupMember
from dafka.node.actions import (
    Action,
    DirectRecordRuns,
    RecordRuns,
    RunDirectRecords,
    RunRecords,
    SubscriptionNotices,
)
from dafka.protocol import DataMessage, MemberBeat


class GroupConsumerMachine(
    RecordRuns, DirectRecordRuns, RunRecords, RunDirectRecords, SubscriptionNotices
):
    """``consumer`` (its topics subscribed with ``subscribe_group``) and ``member``."""

    def __init__(self, consumer: ConsumerMachine, member: GroupMember) -> None:
        self.consumer = consumer
        self.member = member

    def on_message(self, message: DataMessage, now: float) -> None:
        if type(message) is MemberBeat:
            self.member.on_message(message, now)
            return
        self.consumer.on_message(message, now)
        self._sync(now)

    def on_records(
        self, topic: str, producer: str, first_sequence: int, contents: Sequence[bytes], now: float
    ) -> None:
        self.consumer.on_records(topic, producer, first_sequence, contents, now)
        self._sync(now)

    def on_direct_records(
        self,
        recipient: str,
        topic: str,
        producer: str,
        first_sequence: int,
        contents: Sequence[bytes],
        now: float,
    ) -> None:
        self.consumer.on_direct_records(recipient, topic, producer, first_sequence, contents, now)
        self._sync(now)

    def on_run_records(
        self,
        topic: str,
        producer: str,
        first_sequence: int,
        contents: Sequence[bytes],
        epoch: int,
        run_start: int,
        now: float,
    ) -> None:
        self.consumer.on_run_records(
            topic, producer, first_sequence, contents, epoch, run_start, now
        )
        self._sync(now)

    def on_run_direct_records(
        self,
        recipient: str,
        topic: str,
        producer: str,
        first_sequence: int,
        contents: Sequence[bytes],
        epoch: int,
        run_start: int,
        now: float,
    ) -> None:
        self.consumer.on_run_direct_records(
            recipient, topic, producer, first_sequence, contents, epoch, run_start, now
        )
        self._sync(now)

    def on_subscription(self, prefix: bytes, subscribed: bool, now: float) -> None:
        self.member.on_subscription(prefix, subscribed, now)

    def on_timer(self, now: float) -> None:
        self.consumer.on_timer(now)
        self.member.on_timer(now)

    def next_deadline(self) -> float | None:
        a = self.consumer.next_deadline()
        b = self.member.next_deadline()
        if a is None:
            return b
        if b is None:
            return a
        return min(a, b)

    def take_actions(self) -> list[Action]:
        return self.consumer.take_actions() + self.member.take_actions()

    def take_events(self) -> list[GroupEvent]:
        return self.member.take_events()

    def _sync(self, now: float) -> None:
        found = self.consumer.take_discovered()
        if found:
            self.member.partitions_seen(found, now)
        member = self.member
        if not member.joined:  # the first take waits for the whole list (GroupMember)
            consumer = self.consumer
            member.partitions_listed(all(consumer.heads_answered(t) for t in member.topics), now)


__all__ = ["GroupConsumerMachine"]
