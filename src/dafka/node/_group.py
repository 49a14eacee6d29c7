"""A consumer group member: membership and assignment without a coordinator (docs/groups.md).

Theory. Every member publishes a *beat* (MEMBER, ``Y`` + group) on its data PUB every
``heartbeat_interval``, and at once when its state changes, when it hears a peer's new
generation (to acknowledge it) or when a peer subscribes to the group's beats (a member
just connected). A beat says: the member's key (``group_instance_id``, else its member id),
the topics it reads, its *view* (the keys of the members it counts as alive, itself
included), its *claims* (the partitions it reads or is still handing over), its
*generation* (a counter that grows whenever its view or the partitions it knows change), a
*digest* of that view and those partitions, and its *acks* (the generation it last heard
from each member). A member whose beats stop for ``session_timeout`` leaves the view (a
crash); a member that closes says so in a last beat (``leaving``) and leaves it at once.

Assignment is a function of the digest's contents alone, so members with equal digests
compute the same owner for every partition: per topic, the members reading it share its
known partitions, each at most ``ceil(partitions / members)``, every partition going to the
member of highest ``blake2b(key, topic, partition)`` weight that still has room (rendezvous
hashing with bounded loads: balanced, and a join or a leave moves few partitions).
Members learn partitions from the records and heads they receive and from each other's
claims.

Handover. A member *releases* a partition as soon as its own assignment gives it to
another member: it stops reading at once, and the partition stays in its claims
(``revoking``) until the driver said the handover is done (:meth:`GroupMember.revoked`:
the position is committed). A member *takes* a partition its assignment gives it only when
(1) its join window is over (it has heard the group), (2) every member of its view *agrees*:
its latest beat has the same digest and acknowledges this member's current generation, and
(3) none of them claims the partition in that beat. So a partition moves only after its old
owner stopped and committed.

Why two members that each count the other alive never read a partition at once: say A took
it in its generation ``gA`` on a beat ``b`` of B that agreed (same digest, acknowledging
``gA``, not claiming it), and B took it in its generation ``gB`` on a beat ``a`` of A that
agreed likewise. Equal digests give one owner, so the two generations differ in content and
``a`` was sent in another generation of A than ``gA``. If A sent ``a`` before entering
``gA``, then B entered ``gB`` before A entered ``gA`` (``a`` acknowledges ``gB``), so B
sent ``b`` (which acknowledges ``gA``) after entering ``gB`` - and, having another content,
after leaving it: B held the partition from its take in ``gB`` until a release that ended
before ``b`` said it claims nothing, so A took it after B let it go. If A sent ``a`` after
leaving ``gA``, the same holds with the roles swapped. So overlapping readers need one of
them to have taken the partition while the other was not in its view: it counted it dead (a
crash, or beats lost for ``session_timeout``) or never heard it (a newcomer that heard
nobody in its join window takes everything). Two conflict rules end such an overlap the
moment both count each other alive: a member that hears a beat claiming a partition it
reads stops reading it, and one that hears again a member it counted dead stops reading
what it took since (that beat may predate a take of its sender); both hand the partition
over (``revoked``: what was handed out is committed, losing nothing; the conflict may be
only apparent). A member also learns that it was counted
dead from a beat of a member whose view held it before and no longer does: it stops reading
everything at once, and takes part again from the next beats. docs/groups.md has the
argument in full and what happens under a network partition.

Counting a member alive. A member counts a member it hears (for the first time, or again
after counting it dead) alive only from a beat that acknowledges it (sent after its sender
heard it); until then the sender is *pending*: out of the view, acknowledged, and nothing
is taken meanwhile; when it counts, what was taken since it was first heard is dropped.
So of two members that start counting each other alive, the later one hears a beat that
claims whatever its sender took before it, and its sender dropped what it took after
(two newcomers that each heard nobody could read one partition, counting each other alive
on beats sent before their takes, until their next beats).

Joining. A new member takes nothing until it heard a member that reads something and every
member named in the views it heard (one round trip: the members beat when its subscription
reaches them), or its join window ended (one that heard nobody is the first member).

Pure: beats, subscription notices and partitions seen in, Send/Subscribe actions and
:class:`GroupEvent`\\ s out, with ``now`` from the driver.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from dafka.node._errors import NodeArgumentError, check_name
from dafka.node.actions import Action, Send, Subscribe, SubscriptionNotices
from dafka.protocol import MEMBER_ID, DataMessage, MemberBeat

Key = tuple[str, str]
"""(topic, partition)."""
Handover = tuple[int, int, int]
"""A handover commit: (offset, index, version) of the position committed."""


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """A member's group settings (``ConsumerSettings`` builds it from Kafka's names)."""

    group_id: str
    instance_id: str = ""
    """Static membership: the member's key across restarts (Kafka's ``group.instance.id``)."""
    heartbeat_interval: float = 0.5
    session_timeout: float = 2.0
    join_window: float = 0.5
    """How long a new member listens to the group before it takes any partition, at most:
    it ends as soon as it heard a member that reads something and every member named in the
    views it heard."""

    def __post_init__(self) -> None:
        check_name("group_id", self.group_id)
        if self.instance_id:
            check_name("group_instance_id", self.instance_id)
        if not 0 < self.heartbeat_interval < self.session_timeout:
            raise NodeArgumentError(
                f"heartbeat_interval ({self.heartbeat_interval} s) must be above 0 and "
                f"below session_timeout ({self.session_timeout} s)"
            )
        if self.join_window < 0:
            raise NodeArgumentError(f"join_window must be >= 0, got {self.join_window}")


@dataclass(frozen=True, slots=True)
class GroupEvent:
    """What the driver must do: ``assigned`` (start reading these), ``revoked`` (stop, commit,
    then call :meth:`GroupMember.revoked`), ``lost`` (stop without committing: another member
    may read them already) or ``fenced`` (a newer member with our ``group_instance_id``)."""

    kind: Literal["assigned", "revoked", "lost", "fenced"]
    partitions: tuple[Key, ...]
    generation: int
    starts: tuple[tuple[Key, Handover], ...] = ()
    """``assigned``: where to start the partitions the previous owner handed over with a
    commit, (offset, index, version) - that commit, as its beats said; the others start at
    the group's committed offsets, read from the stores."""


@dataclass(slots=True)
class _Peer:
    member: str
    key: str
    sequence: int
    seen: float
    started: int
    topics: frozenset[str]
    view: frozenset[str]
    claims: frozenset[Key]
    generation: int = 0
    digest: str = ""
    acks: dict[str, int] = field(default_factory=dict)
    included_me: bool = False
    handed: dict[Key, Handover] = field(default_factory=dict)

    @classmethod
    def heard(cls, message: MemberBeat, key: str, view: frozenset[str], now: float) -> _Peer:
        """A member first heard of by its beat ``message``."""
        return cls(
            message.member,
            key,
            message.sequence,
            now,
            message.started,
            frozenset(message.topics),
            view,
            frozenset(message.claims),
        )


TENURE_AHEAD_US = 300_000_000
"""How far past its own wall clock a tenure heard or read may be (as a store's
``max_fence_ahead`` bounds a fence): further is a lie or a broken clock, ignored."""


@dataclass(frozen=True, slots=True)
class GroupStatistics:
    """Counters of a :class:`GroupMember` (a snapshot)."""

    generation: int
    members: int
    assigned: int
    revoking: int
    beats_sent: int
    beats_received: int
    stale_beats: int
    expired: int
    lost: int
    conflicts: int
    """Partitions released because another member claimed them or was heard again after
    it was counted dead (docs/groups.md, "Conflicts")."""
    agreed: bool
    silences: int = 0
    """Times this member found it had sent no beat for ``session_timeout`` (its process
    was paused: every partition lost, docs/groups.md "Paused")."""
    pending: int = 0
    """Members heard whose beats do not acknowledge this one yet (not counted alive until
    one does: docs/groups.md, "Counting a member alive"); this member takes nothing
    meanwhile."""
    tenure: int = 0
    """Its tenure clock: the highest tenure it gave a take or heard of (docs/groups.md,
    "Tenures")."""
    tenures_refused: int = 0
    """Tenures heard or read more than ``TENURE_AHEAD_US`` past this member's wall clock,
    ignored."""
    logs_fenced: int = 0
    """Transaction logs this member's consumer fenced before starting a partition from
    the group's commits (a previous owner's undecided transaction; docs/groups.md,
    "Fencing the previous owner's log"). Filled by the client (``Consumer.group_statistics``)."""
    fences_failed: int = 0
    """Such fences no store answered in time (the take went on unfenced, logged at
    ERROR). Filled by the client."""


def rendezvous(key: str, topic: str, partition: str) -> bytes:
    """The weight of ``key`` for a partition: the same bytes in every process."""
    data = b"\0".join(s.encode("utf-8", "surrogateescape") for s in (key, topic, partition))
    return hashlib.blake2b(data, digest_size=8).digest()


@dataclass(slots=True)
class _State:
    owned: set[Key] = field(default_factory=set)
    revoking: set[Key] = field(default_factory=set)
    taken_at: dict[Key, float] = field(default_factory=dict)
    taken_no: dict[Key, int] = field(default_factory=dict)
    """Which take (a counter) took each owned partition: what was taken after a member
    was first heard, even at the same instant."""
    takes: int = 0
    """When each owned partition was taken (a member re-admitted drops what was taken since
    it was counted dead)."""
    tenures: dict[Key, int] = field(default_factory=dict)
    """The tenure of each partition read or handed over: its commits carry it."""


_EXPIRED_KEPT = 1024
"""How many expired members a member remembers (their expiry times), oldest dropped first."""


class GroupMember(SubscriptionNotices):
    """Pure state machine of one group member (see the module docstring, docs/groups.md).

    The driver feeds beats (:meth:`on_message`), XPUB notices (:meth:`on_subscription`),
    partitions it learnt of (:meth:`partitions_seen`) and finished handovers
    (:meth:`revoked`); it executes :meth:`take_actions` and handles :meth:`take_events`.
    """

    def __init__(
        self,
        member_id: str,
        topics: Iterable[str],
        config: GroupConfig,
        now: float,
        *,
        started: int = 0,
    ) -> None:
        """``started``: this incarnation's start (ms since the epoch): of two members with
        the same ``instance_id``, the later one stays, the other is fenced."""
        check_name("member id", member_id)
        self.member_id = member_id
        self.config = config
        self.key = config.instance_id or member_id
        topic_set = frozenset(topics)
        for topic in topic_set:
            check_name("topic", topic)
        self.topics = topic_set
        self._now = now
        self._started = started
        self._born = now
        self._tenures_refused = 0
        self._clock = 0
        """The highest tenure given or heard of (a hybrid clock: see :meth:`_tenure`)."""
        self._peers: dict[str, _Peer] = {}
        self._pending: dict[str, _Peer] = {}
        """Members heard whose beats do not acknowledge this one yet (they have not heard
        it): not in the view until one does (see :meth:`_hear_pending`)."""
        self._pending_since: dict[str, int] = {}
        """The takes made before each pending member was first heard: what this member
        takes from then on is taken without its agreement."""
        self._gone: dict[str, int] = {}
        """Members that left (their last sequence): a late beat does not bring them back."""
        self._handed: dict[Key, tuple[Handover, float]] = {}
        """Partitions handed over with a commit, and until when the beats say so."""
        self._left_handed: dict[Key, tuple[Handover, float]] = {}
        """The handovers of members that said goodbye (until a session timeout)."""
        self._expired: dict[str, float] = {}
        """Members counted dead (silent for ``session_timeout``) and when: one heard again
        may have read, meanwhile, what this member took since."""
        self._partitions: set[Key] = set()
        self._state = _State()
        self._view: frozenset[str] = frozenset((self.key,))
        self.generation = 0
        self._digest = ""
        self._owners: dict[Key, str] | None = None
        """The assignment of the current generation (computed when first needed)."""
        self._join_end = now + config.join_window
        self._joined = config.join_window == 0
        self._listed = True
        """The driver knows every partition of the topics (the stores said "that is all"):
        a first take after the window then covers them all; while not, the join waits up
        to one more window (a loaded machine's heads answers came in pieces, and a lone
        member's on_assign named one partition at a time)."""
        self._sequence = 0
        self._next_beat = now
        self._beat_now = True
        self._leaving = False
        self.left = False
        """True once a closing member released everything and said goodbye."""
        self.fenced = False
        self._events: list[GroupEvent] = []
        self._out: list[Action] = [Subscribe(MEMBER_ID + _raw(config.group_id))]
        self._digest = self._state_digest()
        self.generation = 1
        self._beats_sent = 0
        self._beats_received = 0
        self._stale = 0
        self._expired_count = 0
        self._lost = 0
        self._conflicts = 0
        self._last_beat: float | None = None
        """When this member last beat (None: never): silent for ``session_timeout``, the
        others may have counted it dead (:meth:`_check_silence`)."""
        self._silences = 0

    # -- queries ---------------------------------------------------------------------------

    def assignment(self) -> frozenset[Key]:
        """The partitions this member reads now."""
        return frozenset(self._state.owned)

    def view(self) -> frozenset[str]:
        """The member keys this member counts as alive (itself included)."""
        return self._view

    def claims(self) -> frozenset[Key]:
        """What its beats claim: read now or still handed over."""
        return frozenset(self._state.owned | self._state.revoking)

    def agreed(self) -> bool:
        """Every member of the view announced this member's digest and acknowledged its
        current generation."""
        digest, me, generation = self._digest, self.member_id, self.generation
        return all(
            p.digest == digest and p.acks.get(me, -1) >= generation for p in self._peers.values()
        )

    def settled(self) -> bool:
        """Joined, the views agree, and this member reads every known partition it wins
        and nothing else (no handover under way)."""
        if not self._joined or not self.agreed() or self._state.revoking:
            return False
        me = self.key
        return all((self.owner(k) == me) == (k in self._state.owned) for k in self._partitions)

    def statistics(self) -> GroupStatistics:
        return GroupStatistics(
            generation=self.generation,
            members=len(self._view),
            assigned=len(self._state.owned),
            revoking=len(self._state.revoking),
            beats_sent=self._beats_sent,
            beats_received=self._beats_received,
            stale_beats=self._stale,
            expired=self._expired_count,
            lost=self._lost,
            conflicts=self._conflicts,
            agreed=self.agreed(),
            silences=self._silences,
            pending=len(self._pending),
            tenure=self._clock,
            tenures_refused=self._tenures_refused,
        )

    def owner(self, key: Key) -> str | None:
        """The key of the member this member's assignment gives ``key`` to (None: a
        partition it does not know, or nobody reads its topic)."""
        owners = self._owners
        if owners is None:
            owners = self._owners = assign(self._members(), self._partitions)
        return owners.get(key)

    def refused_commits(self, keys: Iterable[Key], now: float) -> frozenset[Key]:
        """Which of ``keys`` this member may not commit now: partitions of its topics that
        it neither reads nor is handing over (another member may own them: a late commit
        would move the group's position under the new owner). Checks first whether this
        member was silent for ``session_timeout`` (:meth:`_check_silence`): a member resumed
        from a pause learns here, before its first commit, that it lost everything."""
        self._now = now
        self._check_silence(now)
        state = self._state
        topics = self.topics
        return frozenset(
            k for k in keys if k[0] in topics and k not in state.owned and k not in state.revoking
        )

    def tenures(self, keys: Iterable[Key]) -> dict[Key, int]:
        """The tenure under which this member reads or hands over each of ``keys`` (the
        others are absent): its commits of them carry it, so that a commit it writes late,
        after losing them, ranks below their next owner's (docs/groups.md, "Tenures")."""
        tenures = self._state.tenures
        return {k: tenures[k] for k in keys if k in tenures}

    def pending_members(self) -> frozenset[str]:
        """The keys of the members heard whose beats do not acknowledge this one yet."""
        return frozenset(p.key for p in self._pending.values())

    # -- inputs ----------------------------------------------------------------------------

    def tenure_read(self, key: Key, tenure: int) -> None:
        """The driver read a commit of ``key`` made under ``tenure`` (the group's committed
        offset, where it starts a partition taken): later takes rank above it, and so does
        this member's own tenure of ``key`` if it reads it (a take whose tenure came from a
        clock behind the committer's host, without a beat of that committer heard)."""
        if not self._heard_tenure(tenure):
            return
        tenures = self._state.tenures
        if key in tenures and tenures[key] <= tenure:
            tenures[key] = self._clock = self._clock + 1

    def restart_join(self, now: float) -> None:
        """Start the join window now (a driver that built the member before its node was
        connected: the window is for hearing the group, which needs the connections)."""
        self._now = now
        self._join_end = now + self.config.join_window
        self._joined = self.config.join_window == 0
        self._beat_now = True

    @property
    def joined(self) -> bool:
        """The join is over: this member takes what it wins."""
        return self._joined

    def partitions_listed(self, listed: bool, now: float) -> None:
        """Whether every partition of this member's topics is known (see ``_listed``)."""
        if listed == self._listed:
            return
        self._listed = listed
        if listed and not self._joined:
            self._update(now)

    def partitions_seen(self, keys: Iterable[Key], now: float) -> None:
        """Partitions known to exist (of any topic: those this member reads count)."""
        self._now = now
        added = False
        for key in keys:
            if key[0] in self.topics and key not in self._partitions:
                self._partitions.add(key)
                added = True
        if added:
            self._update(now)

    def revoked(
        self, keys: Iterable[Key], now: float, committed: Mapping[Key, Handover] | None = None
    ) -> None:
        """The driver finished handing these partitions over (stopped, committed).
        ``committed``: the positions it committed, (offset, index, version); the beats
        carry them for a session timeout, so the next owner starts there at once."""
        self._now = now
        revoking = self._state.revoking
        done = [k for k in keys if k in revoking]
        if committed:
            until = now + self.config.session_timeout
            for key in done:
                position = committed.get(key)
                if position is not None:
                    self._handed[key] = (position, until)
        if done:
            revoking.difference_update(done)
            for key in done:
                self._state.tenures.pop(key, None)
            self._beat_now = True
            self._update(now)

    def leave(self, now: float) -> None:
        """Close: release every partition (``revoked`` events), then a last beat. A static
        member (``instance_id``) says no goodbye, as in Kafka: the others keep its
        partitions for it until ``session_timeout``, so a restart moves nothing."""
        self._now = now
        if self._leaving:
            return
        self._leaving = True
        self._update(now)

    def on_subscription(self, prefix: bytes, subscribed: bool, now: float) -> None:
        self._now = now
        self._check_silence(now)
        ours = MEMBER_ID + _raw(self.config.group_id)
        if subscribed and prefix[:1] == MEMBER_ID and ours.startswith(prefix):
            self._beat_now = True  # a member or a watcher (Y: every group) connected

    def on_message(self, message: DataMessage, now: float) -> None:
        self._now = now
        if type(message) is not MemberBeat:
            return
        if message.group != self.config.group_id or message.member == self.member_id:
            return
        if self.fenced or self.left:
            return
        self._check_silence(now)
        self._beats_received += 1
        member = message.member
        peer = self._peers.get(member)
        if peer is not None:
            last = peer.sequence
        elif member in self._pending:
            last = self._pending[member].sequence
        else:
            last = self._gone.get(member, -1)
        if message.sequence <= last:
            self._stale += 1
            return
        # a take of ours from now on ranks above its sender's takes
        self._heard_tenure(message.tenure)
        if message.leaving:
            until = now + self.config.session_timeout
            for t, p, o, i, v in message.handed:  # a goodbye: its handovers outlive it
                self._left_handed[(t, p)] = ((o, i, v), until)
            self._gone[member] = message.sequence
            if peer is not None:
                del self._peers[member]
            self._pending.pop(member, None)
            self._pending_since.pop(member, None)
            self._update(now)
            return
        key = message.instance or member
        if key == self.key:  # another incarnation of our group_instance_id
            if (message.started, member) > (self._started, self.member_id):
                self._fence()
            return
        acked = peer is not None or any(m == self.member_id for m, _ in message.acks)
        for other in [*self._peers.values(), *self._pending.values()]:
            if other.key == key and other.member != member:
                if (other.started, other.member) > (message.started, member):
                    self._stale += 1
                    return  # an older incarnation of a static member
                if not acked and other.member in self._peers:
                    continue  # replaced once the new one counts: a restart moves nothing
                self._peers.pop(other.member, None)
                self._pending.pop(other.member, None)
                self._pending_since.pop(other.member, None)
                self._gone[other.member] = other.sequence
        view = frozenset(message.view)
        includes_me = self.key in view
        if peer is None:
            if not acked:
                self._hear_pending(message, key, view, now)
                return
            self._pending.pop(member, None)
            since = self._pending_since.pop(member, None)
            expired = self._expired.pop(member, None)
            # counted dead or heard before it heard us, alive after all: it may read what
            # this member took since, without its agreement
            state = self._state
            self._drop(
                [
                    k
                    for k in state.owned
                    if (expired is not None and state.taken_at[k] >= expired)
                    or (since is not None and state.taken_no[k] > since)
                ]
            )
            peer = _Peer.heard(message, key, view, now)
            self._peers[member] = peer
            self._beat_now = True  # acknowledge it
        else:
            if peer.included_me and not includes_me:
                self._lose()  # it counted us dead: someone may read our partitions now
            if message.generation != peer.generation:
                self._beat_now = True  # acknowledge it
            peer.sequence = message.sequence
            peer.seen = now
            peer.topics = frozenset(message.topics)
            peer.view = view
            peer.claims = frozenset(message.claims)
        peer.generation = message.generation
        peer.digest = message.digest
        peer.acks = dict(message.acks)
        peer.included_me = includes_me
        peer.handed = {(t, p): (o, i, v) for t, p, o, i, v in message.handed}
        self._claimed(message.claims)
        self._update(now)

    def _hear_pending(
        self, message: MemberBeat, key: str, view: frozenset[str], now: float
    ) -> None:
        """A beat of a member that has not heard this one (it does not acknowledge it):
        kept aside, acknowledged by the next beat, and counted alive only from its first
        beat that acknowledges this member. Two newcomers that each heard nobody took
        everything, each after a beat claiming nothing; counted alive on those beats, each
        went on reading what its own assignment gave it - for two different sets of
        partitions known, the same partition - until the other's next beat. A beat that
        acknowledges this member was sent after its sender heard it, so it claims what
        its sender took before; what its sender takes after it, while this member is not
        in its view, the sender drops when it counts this member alive, and what this
        member took while the sender was pending it drops now (:meth:`on_message`)."""
        member = message.member
        pending = self._pending.get(member)
        if pending is None:
            pending = _Peer.heard(message, key, view, now)
            self._pending[member] = pending
            self._pending_since.setdefault(member, self._state.takes)
            self._beat_now = True  # acknowledge it: then it counts this member alive
        else:
            if message.generation != pending.generation:
                self._beat_now = True
            pending.sequence = message.sequence
            pending.seen = now
            pending.topics = frozenset(message.topics)
            pending.view = view
            pending.claims = frozenset(message.claims)
        pending.generation = message.generation
        pending.digest = message.digest
        pending.acks = dict(message.acks)
        pending.handed = {(t, p): (o, i, v) for t, p, o, i, v in message.handed}
        self._claimed(message.claims)
        self._update(now)

    def _claimed(self, claims: Iterable[Key]) -> None:
        """Another member claims these: stop reading them (it took them while it did not
        count this member alive), nothing to hand on, and they exist."""
        claims = frozenset(claims)
        for claim in claims:
            self._handed.pop(claim, None)  # read by its new owner: nothing to hand on
        conflict = self._state.owned.intersection(claims)
        if conflict:  # it reads them too (it took them while it did not count us alive)
            self._drop(conflict)
        topics = self.topics
        for claim in claims:
            if claim[0] in topics:
                self._partitions.add(claim)  # a claim says the partition exists

    def on_timer(self, now: float) -> None:
        self._now = now
        if self.fenced or self.left:
            return
        if now >= self._next_beat:
            self._beat_now = True
        self._update(now)

    def next_deadline(self) -> float | None:
        if self.fenced or self.left:
            return None
        due = self._next_beat
        timeout = self.config.session_timeout
        for peer in [*self._peers.values(), *self._pending.values()]:
            due = min(due, peer.seen + timeout)
        if not self._joined:
            end = self._join_end
            if not self._listed and self._now >= end:
                end += self.config.join_window  # the window is over: the wait for the list
            due = min(due, end)
        return due

    def take_actions(self) -> list[Action]:
        if self._beat_now and not self.fenced and not self.left:
            self._beat()
        out = self._out
        self._out = []
        return out

    def take_events(self) -> list[GroupEvent]:
        events = self._events
        self._events = []
        return events

    # -- internals -------------------------------------------------------------------------

    def _members(self) -> list[tuple[str, frozenset[str]]]:
        members = [(p.key, p.topics) for p in self._peers.values()]
        if not self._leaving:
            members.append((self.key, self.topics))
        return sorted(members, key=lambda m: m[0])

    def _state_digest(self) -> str:
        """What the assignment is computed from: the members (keys and topics) and the
        known partitions, hashed."""
        h = hashlib.blake2b(digest_size=12)
        for key, topics in self._members():
            h.update(_raw(key) + b"\0" + b"\1".join(_raw(t) for t in sorted(topics)) + b"\2")
        h.update(b"\3")
        for topic, partition in sorted(self._partitions):
            h.update(_raw(topic) + b"\0" + _raw(partition) + b"\2")
        return h.hexdigest()

    def _heard_group(self) -> bool:
        """A newcomer heard the group before its join window ended: a member that reads
        something, and every member named in the views it heard (the window is for hearing
        them all; a member it has not heard keeps it waiting until the window ends)."""
        peers = self._peers.values()
        if not any(p.claims for p in peers):
            return False
        known = {p.key for p in peers}
        known.add(self.key)
        return all(p.view <= known for p in peers)

    def _update(self, now: float) -> None:
        """Expire silent peers, recompute the view, release what we no longer win, take
        what we win once the handover allows it."""
        if self.fenced:
            return
        self._check_silence(now)
        timeout = self.config.session_timeout
        for peer in [p for p in self._pending.values() if p.seen + timeout <= now]:
            del self._pending[peer.member]  # never heard us, silent since: forgotten
            del self._pending_since[peer.member]
        for peer in [p for p in self._peers.values() if p.seen + timeout <= now]:
            del self._peers[peer.member]
            self._expired_count += 1
            self._expired[peer.member] = now
            if len(self._expired) > _EXPIRED_KEPT:
                del self._expired[next(iter(self._expired))]
        view = frozenset(p.key for p in self._peers.values()) | {self.key}
        self._view = view
        digest = self._state_digest()
        if digest != self._digest:
            self._digest = digest
            self.generation += 1
            self._owners = None
            self._beat_now = True
        if not self._joined and (
            (now >= self._join_end or self._heard_group())
            and (self._listed or now >= self._join_end + self.config.join_window)
        ):
            self._joined = True
        state = self._state
        me = self.key
        release = sorted(k for k in state.owned if self._leaving or self.owner(k) != me)
        if release:
            state.owned.difference_update(release)
            for k in release:
                del state.taken_at[k]
                del state.taken_no[k]
            state.revoking.update(release)
            self._events.append(GroupEvent("revoked", tuple(release), self.generation))
            self._beat_now = True
        for handed in (self._handed, self._left_handed):
            for key in [k for k, (_, until) in handed.items() if until <= now]:
                del handed[key]
        if self._leaving:
            if not state.revoking and not self.left:
                self._beat(goodbye=True)
                self.left = True
            return
        if not self._joined or not self.agreed() or self._pending:
            return  # (a member heard that has not heard this one: it counts in a moment)
        claimed: set[Key] = set()
        for peer in self._peers.values():
            claimed |= peer.claims
        take = sorted(
            k
            for k in self._partitions
            if k not in state.owned
            and k not in state.revoking
            and k not in claimed
            and self.owner(k) == me
        )
        if take:
            state.owned.update(take)
            state.taken_at.update(dict.fromkeys(take, now))
            state.tenures.update(dict.fromkeys(take, self._tenure(now)))
            state.takes += 1
            state.taken_no.update(dict.fromkeys(take, state.takes))
            starts = self._handovers(take)
            self._events.append(GroupEvent("assigned", tuple(take), self.generation, starts))
            self._beat_now = True

    def _heard_tenure(self, tenure: int) -> bool:
        """Raise the tenure clock to a tenure heard (a beat) or read (a commit), unless it is
        more than ``TENURE_AHEAD_US`` past this member's wall clock: counted
        (``tenures_refused``) and ignored. A peer's word: one tenure of 2**63 - 1 made the
        next take's tenure unencodable (every beat after it dropped: the member counted
        dead) - hosts whose clocks are that far apart break the tenure's premise anyway."""
        if tenure > self._wall_us(self._now) + TENURE_AHEAD_US:
            self._tenures_refused += 1
            return False
        self._clock = max(self._clock, tenure)
        return True

    def _wall_us(self, now: float) -> int:
        return self._started * 1000 + int((now - self._born) * 1_000_000)

    def _tenure(self, now: float) -> int:
        """A new take's tenure: the wall clock in microseconds (this incarnation's start
        plus the time since), but above every tenure given or heard of - a hybrid clock. A
        member takes a partition from another only after hearing it (the beat that claims
        it, or the one without the claim: a handover; beats carry the clock) or after
        counting it dead - ``session_timeout`` after its last beat, sent after its take - so
        the new tenure is above the old owner's: by the clock heard, and by the wall clocks
        of hosts less than ``session_timeout`` apart when every beat of the old owner since
        its take was lost."""
        self._clock = max(self._wall_us(now), self._clock + 1)
        return self._clock

    def _handovers(self, keys: list[Key]) -> tuple[tuple[Key, Handover], ...]:
        """Where the partitions just taken were handed over, when the beats say so with one
        voice (two members that each handed one over lately and disagree: the stores
        decide)."""
        out = []
        for key in keys:
            self._handed.pop(key, None)
            said = {p.handed[key] for p in self._peers.values() if key in p.handed}
            left = self._left_handed.pop(key, None)
            if left is not None:
                said.add(left[0])
            if len(said) == 1:
                out.append((key, said.pop()))
        return tuple(out)

    def _drop(self, keys: Iterable[Key]) -> None:
        """Stop reading these owned partitions at once: another member this one counts alive
        may read them. A handover (``revoked``: the position handed out is committed) rather
        than ``lost``: the conflict may be only apparent - a dead member's last beat read
        after its expiry looks like a member heard again - and what was handed out was
        processed, so committing it loses nothing; the partition stays claimed until then."""
        state = self._state
        release = sorted(keys)
        if not release:
            return
        state.owned.difference_update(release)
        for k in release:
            del state.taken_at[k]
            del state.taken_no[k]
        state.revoking.update(release)
        self._beat_now = True
        self._conflicts += 1
        self._events.append(GroupEvent("revoked", tuple(release), self.generation))

    def _check_silence(self, now: float) -> None:
        """A member that sent no beat for ``session_timeout`` - its process was paused
        (SIGSTOP, swapped out) or its thread starved - may have been counted dead: another
        member may read its partitions and commit them already. It cannot know, so it loses
        everything at once (``lost``: nothing committed), before it handles anything heard
        or committed after the pause. Its peers' beats are as old as its own: it counts
        them heard now (rather than expiring them all and taking every partition as a lone
        member), and takes part again as a newcomer: it listens to the group for a join
        window first (a member it never heard - one that started during the pause - is
        heard then, rather than everything being taken back as by a lone member), and then
        by fresh agreement: it enters a new generation, so that no beat sent before or
        during the pause (they acknowledge an older one) lets it take anything."""
        last = self._last_beat
        if last is None or now - last < self.config.session_timeout:
            return
        if self.fenced or self.left:
            return
        self._silences += 1
        self._last_beat = now  # once per pause: the beat it sends next says it is back
        for peer in self._peers.values():
            peer.seen = max(peer.seen, now)
        self.generation += 1
        self._join_end = now + self.config.join_window
        self._joined = self.config.join_window == 0
        self._lose()

    def _lose(self) -> None:
        state = self._state
        lost = sorted(state.owned | state.revoking)
        state.owned.clear()
        state.revoking.clear()
        state.taken_at.clear()
        state.taken_no.clear()
        state.tenures.clear()
        self._beat_now = True
        if lost:
            self._lost += 1
            self._events.append(GroupEvent("lost", tuple(lost), self.generation))

    def _fence(self) -> None:
        self._lose()
        self.fenced = True
        self._events.append(GroupEvent("fenced", (), self.generation))

    def _beat(self, *, goodbye: bool = False) -> None:
        self._check_silence(self._now)  # a beat after a pause must not claim what it lost
        self._beat_now = False
        self._next_beat = self._now + self.config.heartbeat_interval
        self._last_beat = self._now
        state = self._state
        leaving = goodbye and not self.config.instance_id
        self._out.append(
            Send(
                MemberBeat(
                    self.config.group_id,
                    self.member_id,
                    self._sequence,
                    self.config.instance_id,
                    tuple(sorted(self.topics)),
                    () if leaving else tuple(sorted(self._view)),
                    tuple(sorted(state.owned | state.revoking)),
                    leaving,
                    self._started,
                    self.generation,
                    self._digest,
                    tuple(
                        sorted(
                            (m, p.generation)
                            for peers in (self._peers, self._pending)
                            for m, p in peers.items()
                        )
                    ),
                    tuple(
                        sorted((t, p, *position) for (t, p), (position, _) in self._handed.items())
                    ),
                    self._clock,
                )
            )
        )
        self._sequence += 1
        self._beats_sent += 1


def assign(
    members: Iterable[tuple[str, frozenset[str]]], partitions: Iterable[Key]
) -> dict[Key, str]:
    """Owner (member key) of each partition: per topic, the members reading it share its
    partitions, at most ``ceil(partitions / members)`` each. Every (partition, member) pair
    has a weight (:func:`rendezvous`); going through the pairs from the heaviest, a
    partition goes to the member of the pair if it has no owner yet and the member has
    room. Without the bound this is rendezvous hashing; with it, balanced, and a join or a
    leave moves about the share of one member. Deterministic: equal inputs, equal output,
    in every process."""
    by_topic: dict[str, list[str]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    readers: dict[str, list[str]] = {}
    for key, topics in members:
        for topic in topics:
            readers.setdefault(topic, []).append(key)
    owners: dict[Key, str] = {}
    for topic, names in by_topic.items():
        keys = readers.get(topic)
        if not keys:
            continue
        room = -(-len(names) // len(keys))
        load = dict.fromkeys(keys, 0)
        pairs = sorted(((rendezvous(k, topic, p), k, p) for p in names for k in keys), reverse=True)
        left = len(names)
        for _, key, partition in pairs:
            where = (topic, partition)
            if where in owners or load[key] >= room:
                continue
            owners[where] = key
            load[key] += 1
            left -= 1
            if not left:
                break
    return owners


def _raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


__all__ = [
    "GroupConfig",
    "GroupEvent",
    "GroupMember",
    "GroupStatistics",
    "assign",
    "rendezvous",
]
