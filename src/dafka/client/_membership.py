"""A group consumer's membership: the seam between its :class:`GroupMember` machine (in the
runner thread) and the application (docs/groups.md).

The runner thread sees the member's decisions first (:meth:`Membership.after_turn`, the
runner's end-of-turn hook): a partition revoked or lost stops being read at once (the
consumer machine disowns it, what was queued of it is dropped); an assigned one is noted.
Everything the application must see happens in its own thread, at its next ``poll`` (or
``close``), as in Kafka: :meth:`Membership.rebalance` calls ``on_revoke``, then hands the
commit of the positions handed out (auto-commit) to its handover thread, which tells the
member the handover is done only once the stores hold that commit (the member's beats carry
it), so the next owner starts at that commit; for an assigned partition it takes where the
previous owner's beats said it was handed over, else it reads the group's committed
offset, starts the partition there (``offset_reset`` where nothing was committed) and
calls ``on_assign``; a lost one (another member may read it already) is dropped without a
commit and told to ``on_lost``.

The handover commit runs off the poll path: waited for in the poll, it held a takeover of
another partition in the same poll behind it (a crashed member's partitions, read again
~10 s after the kill instead of ~2.5 s, when a loaded store took ~7 s to acknowledge).
Safety is the member's: a partition being handed over stays in its claims until the
commit is stored (or failed, after ``commit_timeout``: the producer's delivery timeout),
so its next owner still starts only after it.

Every commit of a member is checked by the member first, in the runner thread
(:meth:`Membership.check_commit`, which reads the positions there too): a partition of its
topics that it neither reads nor hands over is refused with :class:`CommitFailedError` -
its process may have been paused past the session timeout while another member took the
partition and committed it (docs/groups.md, "Paused members").
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar, runtime_checkable

from dafka.client._errors import FencedMemberError
from dafka.client._offsets import CommitError, CommitFailedError, Position
from dafka.errors import DafkaError
from dafka.node import GroupConsumerMachine, GroupEvent, GroupMember

log = logging.getLogger(__name__)

Key = tuple[str, str]
Callback = Callable[[set[Key]], object]
Handed = tuple[int, int, int]
"""A handover commit: (offset, index, version)."""
P = TypeVar("P")
"""What a checked commit maps its partitions to (a :data:`Position`)."""


@runtime_checkable
class RebalanceListener(Protocol):
    """Kafka's ``ConsumerRebalanceListener`` (aiokafka's names); subclass
    :class:`ConsumerRebalanceListener` for the defaults."""

    def on_partitions_revoked(self, revoked: set[Key]) -> None: ...

    def on_partitions_assigned(self, assigned: set[Key]) -> None: ...

    def on_partitions_lost(self, lost: set[Key]) -> None: ...


class ConsumerRebalanceListener:
    """Callbacks of a group consumer, called in the thread that polls (``poll``, ``close``).

    * ``on_partitions_revoked``: these partitions move to another member; they are no longer
      handed out; commit what you processed of them now (auto-commit does it after this
      returns). The new owner starts only after this returned and the commit is stored.
    * ``on_partitions_assigned``: these partitions are this member's now, starting at the
      group's committed offsets.
    * ``on_partitions_lost``: another member may read these already (this member was counted
      dead: beats lost for ``session_timeout``); do not commit them. Default: as Kafka, calls
      ``on_partitions_revoked``.
    """

    def on_partitions_revoked(self, revoked: set[Key]) -> None:
        del revoked

    def on_partitions_assigned(self, assigned: set[Key]) -> None:
        del assigned

    def on_partitions_lost(self, lost: set[Key]) -> None:
        self.on_partitions_revoked(lost)


class _Callables(ConsumerRebalanceListener):
    def __init__(
        self, on_assign: Callback | None, on_revoke: Callback | None, on_lost: Callback | None
    ) -> None:
        self._assign, self._revoke, self._lost = on_assign, on_revoke, on_lost

    def on_partitions_revoked(self, revoked: set[Key]) -> None:
        if self._revoke is not None:
            self._revoke(revoked)

    def on_partitions_assigned(self, assigned: set[Key]) -> None:
        if self._assign is not None:
            self._assign(assigned)

    def on_partitions_lost(self, lost: set[Key]) -> None:
        if self._lost is not None:
            self._lost(lost)
        else:
            self.on_partitions_revoked(lost)


def listener_of(
    listener: object,
    on_assign: Callback | None,
    on_revoke: Callback | None,
    on_lost: Callback | None,
) -> RebalanceListener:
    """One listener from the consumer's ``listener=`` or ``on_assign``/``on_revoke``/``on_lost``
    arguments (not both: a :class:`TypeError`)."""
    callables = (on_assign, on_revoke, on_lost)
    for callback in callables:
        if callback is not None and not callable(callback):
            raise TypeError(f"on_assign/on_revoke/on_lost take callables, got {callback!r}")
    if listener is not None:
        if any(c is not None for c in callables):
            raise TypeError("give either listener= or on_assign/on_revoke/on_lost, not both")
        if not isinstance(listener, RebalanceListener):
            raise TypeError(
                "listener must have on_partitions_revoked, on_partitions_assigned and "
                f"on_partitions_lost (subclass ConsumerRebalanceListener), got {listener!r}"
            )
        return listener
    return _Callables(on_assign, on_revoke, on_lost)


class GroupClient(Protocol):
    """What :class:`Membership` needs of its consumer (a :class:`Consumer`)."""

    def _forget_partition(self, key: Key) -> None: ...

    def _handed_out(self, keys: Iterable[Key]) -> dict[Key, Position]: ...

    def _forget_positions(self, keys: Iterable[Key]) -> None: ...

    def _commit_handover(self, positions: dict[Key, Position]) -> dict[Key, Handed]: ...

    def _start_assigned(self, keys: list[Key], starts: dict[Key, Handed]) -> dict[Key, int]:
        """Start ``keys``; returns the tenures they are started under (those still owned),
        read in the runner turn that sets their positions."""
        ...


class Membership:
    """The group part of one consumer (see the module docstring)."""

    def __init__(
        self, machine: GroupConsumerMachine, listener: RebalanceListener, client: GroupClient
    ) -> None:
        self.machine = machine
        self.listener = listener
        self._client = client
        self._lock = threading.Lock()
        self._events: list[GroupEvent] = []
        self._assignment: set[Key] = set()
        self._started: dict[Key, int] = {}
        """The tenure under which each partition of ``_assignment`` was started (application
        thread): a commit refuses one the member holds under another tenure now, or not at
        all - lost (and perhaps taken again) since, the application not told yet."""
        self._fenced = False
        self.wake: Callable[[], None] = lambda: None
        """Set by the consumer: wakes its waiting ``poll`` (runner thread)."""
        self.post: Callable[[Callable[[float], None]], None] | None = None
        """Set by the consumer: runs a function in the runner thread without waiting (the
        handover thread reports a finished handover with it; None: ``rebalance``'s ``run``)."""
        self._handovers: ThreadPoolExecutor | None = None
        """The handover commits, one at a time in order, off the poll path (started lazily)."""
        self._handing: dict[Key, int] = {}
        """The handover under way per partition (a token): a late end of an older one (the
        partition lost, taken again and revoked again meanwhile) does not end a newer one."""
        self._token = 0

    # -- runner thread -------------------------------------------------------------------------

    def after_turn(self, now: float) -> None:
        """The runner's end-of-turn hook: stop reading what the member gave up, queue the
        events for the application's thread."""
        del now
        events = self.machine.take_events()
        if not events:
            return
        for event in events:
            if event.kind in ("revoked", "lost"):
                for topic, partition in event.partitions:
                    self.machine.consumer.disown(topic, partition)
                    self._client._forget_partition((topic, partition))
            if event.kind == "lost":  # at once: no commit may carry them from now on
                self._client._forget_positions(event.partitions)
                with self._lock:  # nor a handover still queued (it would commit them later,
                    for key in event.partitions:  # maybe once they are this member's again)
                        self._handing.pop(key, None)
        with self._lock:
            self._events += events
        self.wake()

    # -- application thread --------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        """Events wait for :meth:`rebalance` (or this member was fenced)."""
        return bool(self._events) or self._fenced

    def assignment(self) -> set[Key]:
        return set(self._assignment)

    def refuse_lost(
        self,
        keys: Iterable[Key],
        run: Callable[[Callable[[float], object]], object],
        held: Mapping[Key, int] | None = None,
    ) -> dict[Key, int]:
        """Raise :class:`CommitFailedError` if this member may not commit some of ``keys``
        (``run`` executes a function in the runner thread, where the member lives): they are
        partitions of its topics that it no longer reads or hands over. The member checks
        first whether it was silent for a session timeout (a paused process), so the first
        commit after a pause is refused even before the runner handled anything else.
        Returns the tenure of each key it owns, in the same look: the commit carries them,
        so that if it is written late - the process paused after this check - it ranks
        below the next owner's commits (docs/groups.md, "Tenures").

        ``held``: the tenures under which the member owned the partitions when the commit
        was prepared (a transaction's offsets, sent before its INTENT): a partition it
        holds under another tenure now was lost and taken again since - the new owner
        meanwhile read from the group's commits and may have processed what this commit
        covers - and is refused too."""
        wanted = dict.fromkeys(keys, 0)
        if not wanted:
            return {}
        return self.check_commit(lambda: wanted, run, held, started=False)[1]

    def check_commit(
        self,
        read: Callable[[], Mapping[Key, P]],
        run: Callable[[Callable[[float], object]], object],
        held: Mapping[Key, int] | None = None,
        *,
        started: bool = True,
        every_started: bool = True,
    ) -> tuple[Mapping[Key, P], dict[Key, int]]:
        """:meth:`refuse_lost` of the positions ``read`` returns - read in the runner
        thread, in the same turn as the check and the tenures. A loss forgets the
        positions handed out in the turn that decides it (:meth:`after_turn`), and a
        partition taken again has positions only once the application's poll started it
        (``_start_assigned``, under its new tenure); positions read before the check, in
        the application's thread, could be a lost tenure's, and a thread stalled between
        the read and the check while the member lost the partition and took it again
        committed them under the new tenure. Returns the positions and their tenures.

        ``started`` (an application's commit): also refused are the partitions the
        application was given (``on_assign``) under a tenure the member no longer holds -
        lost since, perhaps taken again, and the application not told yet (its next poll
        does): their positions were forgotten with the loss, and a commit that left them
        out silently would not tell it that what it processed of them is not committed.
        ``every_started`` False (the application named its offsets): only those of them
        that are in the positions read."""
        member = self.machine.member
        given = dict(self._started) if started else {}
        answer = run(functools.partial(_checked, member, read, list(given)))
        assert isinstance(answer, tuple)
        positions, refused, tenures = answer
        if not every_started:
            given = {k: t for k, t in given.items() if k in positions}
        expected = {**given, **(held or {})}
        if expected:
            refused = refused | {k for k, t in expected.items() if tenures.get(k, 0) != t}
        tenures = {k: t for k, t in tenures.items() if k in positions}
        if refused:
            raise CommitFailedError(
                f"group {member.config.group_id}: commit refused: this member no longer owns "
                f"{sorted(refused)} (it lost them: counted dead - beats lost, or its process "
                "paused, for session_timeout - and another member may read and commit them "
                "now); nothing was committed, their new owner reads again from the group's "
                "last commit"
            )
        return positions, dict(tenures)

    def rebalance(self, run: Callable[[Callable[[float], object]], object]) -> None:
        """Handle the member's events in order (``run`` executes a function in the runner
        thread): see the module docstring. Raises :class:`FencedMemberError` once a newer
        member took this one's ``group_instance_id``."""
        with self._lock:
            events, self._events = self._events, []
        member = self.machine.member
        for index, event in enumerate(events):
            keys = set(event.partitions)
            if event.kind == "revoked":
                self._assignment -= keys
                for key in keys:
                    self._started.pop(key, None)
                positions = self._client._handed_out(keys)
                try:
                    self.listener.on_partitions_revoked(keys)
                finally:
                    self._client._forget_positions(positions)
                    self._hand_over(list(event.partitions), positions, run)
                log.info("group %s: revoked %d partitions", member.config.group_id, len(keys))
            elif event.kind == "lost":
                self._assignment -= keys
                for key in keys:
                    self._started.pop(key, None)
                self._client._forget_positions(keys)  # never committed by this member now
                log.warning(
                    "group %s: lost %d partitions (counted dead by another member: beats "
                    "lost, or this process paused, for session_timeout); not committed",
                    member.config.group_id,
                    len(keys),
                )
                self.listener.on_partitions_lost(keys)
            elif event.kind == "assigned":
                try:
                    started = self._client._start_assigned(sorted(keys), dict(event.starts))
                except CommitError as exc:  # no store answered: the next poll asks again
                    log.warning(
                        "group %s: cannot read the committed offsets of %d assigned "
                        "partitions yet (%s); asking again",
                        member.config.group_id,
                        len(keys),
                        exc,
                    )
                    with self._lock:
                        self._events[:0] = events[index:]
                    return
                self._assignment |= keys
                self._started.update(started)
                log.info("group %s: assigned %d partitions", member.config.group_id, len(keys))
                self.listener.on_partitions_assigned(keys)
            else:
                self._fenced = True
        if self._fenced:
            raise FencedMemberError(
                f"group {member.config.group_id}: another consumer with group_instance_id "
                f"{member.config.instance_id!r} started after this one; this one reads nothing "
                "more (close it)"
            )

    def _hand_over(
        self,
        keys: list[Key],
        positions: dict[Key, Position],
        run: Callable[[Callable[[float], object]], object],
    ) -> None:
        """Commit ``positions`` in the handover thread, then (runner thread) tell the member
        that ``keys`` are handed over: they stay claimed until then."""
        with self._lock:
            self._token += 1
            token = self._token
            for key in keys:
                self._handing[key] = token
            if self._handovers is None:
                self._handovers = ThreadPoolExecutor(1, thread_name_prefix="handover")
            handovers = self._handovers
        post = self.post or run
        group = self.machine.member.config.group_id

        def commit_then_release() -> None:
            committed: dict[Key, Handed] = {}
            with self._lock:  # lost while queued: not this member's to commit any more
                live = {k: p for k, p in positions.items() if self._handing.get(k) == token}
            try:
                committed = self._client._commit_handover(live)
            except Exception:  # reported, and the partitions released all the same
                log.exception("group %s: the handover commit of %s failed", group, keys)
            finally:
                try:
                    post(functools.partial(self._handed_over, keys, token, committed))
                except DafkaError as exc:  # the node is gone: nothing to hand over any more
                    log.info("group %s: handover not reported: %s", group, exc)

        handovers.submit(commit_then_release)

    def _handed_over(
        self, keys: list[Key], token: int, committed: dict[Key, Handed], now: float
    ) -> None:
        """Runner thread: the handover commit is stored (or failed): release ``keys``."""
        with self._lock:
            done = [key for key in keys if self._handing.get(key) == token]
            for key in done:
                del self._handing[key]
        if done:
            self.machine.member.revoked(done, now, committed)

    def close(self) -> None:
        """Stop the handover thread (``close()`` waited for the handovers: leaving needs
        them; one still committing ends with its commit, bounded by ``commit_timeout``)."""
        with self._lock:
            handovers, self._handovers = self._handovers, None
        if handovers is not None:
            handovers.shutdown(wait=False)


def _checked(
    member: GroupMember, read: Callable[[], Mapping[Key, P]], given: list[Key], now: float
) -> tuple[Mapping[Key, P], frozenset[Key], dict[Key, int]]:
    positions = read()
    keys = list(positions)
    refused = member.refused_commits(keys, now)  # first: a pause is noticed here
    return positions, refused, member.tenures([*keys, *given])


__all__ = ["ConsumerRebalanceListener", "Membership", "RebalanceListener", "listener_of"]
