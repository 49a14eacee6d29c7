"""Per-partition cursor with gap detection and FETCH retry, shared by consumers and store writers.

Theory. A reader of a partition (a consumer, or a store's writer) remembers ``last``, the
highest sequence it has taken in order, and ``known_head``, the highest sequence it knows to
exist (from a HEAD, a DIRECT-HEAD or a record that arrived ahead). Whenever
``known_head > last`` there is a gap, and the cursor has a FETCH outstanding for the window
``[last + 1, fetch_end)``; it is the only FETCH in flight for that partition, so a burst of
out-of-order records does not become a burst of FETCHes (a TODO of the C consumer).

* Progress (a record taken in order) pushes the retry deadline back to ``retry_initial`` and
  resets the backoff. When ``last`` reaches ``fetch_end - 1`` the next window is asked for at
  once (with ``FetchPolicy.pipeline``: when half of the window is left, from the same
  replier, so that it streams on without a pause); when it reaches ``known_head`` the cursor
  is caught up and stops fetching.
* No progress by the deadline: the FETCH is sent again from ``last + 1`` and the wait doubles
  up to ``retry_max``. So a lost FETCH, a lost reply, or a producer that went away while a
  store still has the records never stalls the partition (two C bugs, PROTOCOL.md section 5).
* An answer that brings only records the cursor already has (a DIRECT-RECORD at or below
  ``last``: :meth:`FetchScheduler.answered`) holds the retry off: the deadline moves to the
  answer's time plus the current wait. A replier answers FETCHes in order, each to its end,
  so such answers mean it is working through an earlier FETCH of this cursor (a retry's, or
  another replier's window) and the records still needed are queued behind them; a retry
  then would only queue one more window of duplicates ahead of them. That was the *retry
  storm* of a store starved of CPU (load 20-30): its first answer came after
  ``retry_initial``, the retry queued the same window again, the duplicates it sent later
  made no progress for another ``retry_initial``, the next retry queued another window...
  the partition stalled 4-22 s. Held off, but bounded: a retry is still due at most
  ``HOLD_ROUNDS x retry_max`` after the last progress (or the start of the FETCH), so a
  peer that sends duplicates without end (or a stranger replaying old records) delays
  retries once, by at most that, never forever. Records *ahead* of ``last + 1`` do not hold
  it off: they are holes (:meth:`FetchScheduler.hole`) and the evidence of records gone.
  (The store's side of it: a FETCH and a retry of it that a store reads in one turn get
  one reply, ``dafka.node._store``.)
* Answers that, retry after retry, start beyond ``last + 1`` mean the records are gone
  (storage retention removed them): after ``skip_after`` such retries in a row a consumer
  skips to the first sequence still available. A loss cannot fake this: it would have to
  hit the same record in every one of those answers from every replier.

Taking records in order (the hot path) is ``dafka.node._reader``; this module holds the
cursor and the FETCH side.
"""

from __future__ import annotations

from typing import Protocol

from dafka.node._config import FetchPolicy
from dafka.node.actions import Action, Send
from dafka.protocol import Fetch

NO_LIMIT = 1 << 64
"""``Cursor.limit`` of a partition read without an end (above any u64 sequence)."""

HOLD_ROUNDS = 2
"""Answers of duplicates hold a retry off at most ``HOLD_ROUNDS x retry_max`` after the last
progress (see the module docstring): at the default 5 s, 10 s - time for a store starved of
CPU to send a whole window of 10,000 duplicates at 1,000 records/s."""


class Router(Protocol):
    """Chooses who is asked to answer a FETCH: the requester string it carries.

    A plain requester id reaches every replier (producer and all stores); a consumer may
    address one store (see ``dafka.node._stores``). ``failed`` reports that a FETCH sent
    with ``cursor.target`` went unanswered until its retry deadline.
    """

    def requester(self, cursor: Cursor, now: float) -> str: ...

    def failed(self, cursor: Cursor, now: float) -> None: ...


class Cursor:
    """The state of one partition (topic, producer) as seen by one reader."""

    __slots__ = (
        "ahead",
        "answer_low",
        "attempt",
        "deadline",
        "delay",
        "durable",
        "fetch_end",
        "fetching",
        "hole_mark",
        "known_head",
        "last",
        "limit",
        "moved",
        "pending",
        "pending_first",
        "producer",
        "refused",
        "target",
        "topic",
    )

    def __init__(self, topic: str, producer: str, last: int) -> None:
        self.topic = topic
        self.producer = producer
        self.last = last
        """Highest sequence taken in order; -1 when nothing yet."""
        self.known_head = last
        """Highest sequence known to exist (never below ``last`` when it matters)."""
        self.ahead: dict[int, bytes] = {}
        """Records that arrived ahead of ``last + 1`` during a fetch, kept (at most one window
        of them) until the gap before them is filled, so they need not be fetched again."""
        self.pending: list[bytes] = []
        """Contents taken in order since the outbox was last drained (Deliver/Persist)."""
        self.pending_first = 0
        self.fetching = False
        self.fetch_end = 0
        self.deadline = 0.0
        self.delay = 0.0
        self.moved = 0.0
        """When the FETCH last made progress (or started): answers of duplicates hold its
        retry off until ``HOLD_ROUNDS x retry_max`` after it, no longer."""
        self.durable = last
        """Store writers only: highest sequence the driver reported durable."""
        self.hole_mark = -2
        """``fetch_end`` of the window whose hole was re-fetched (one hole re-fetch per window)."""
        self.answer_low = -1
        """Lowest sequence answered (ahead of ``last + 1``) since the last retry; -1: none."""
        self.refused = 0
        """Retries in a row answered only from beyond ``last + 1`` (the records are gone)."""
        self.limit = NO_LIMIT
        """Highest sequence this reader may take (an end offset - 1); :data:`NO_LIMIT` if none."""
        self.attempt = 0
        """Sends of the current FETCH without progress (0: first send); picks the replier."""
        self.target = ""
        """The store the outstanding FETCH was addressed to ("" : every replier)."""


class FetchScheduler:
    """Issues the FETCHes of many cursors and runs their retry timers."""

    __slots__ = (
        "_active",
        "_hold",
        "_policy",
        "_requester",
        "_skip_after",
        "fetch_retries",
        "fetches_sent",
        "router",
        "skipped",
    )

    def __init__(self, requester: str, policy: FetchPolicy, skip_after: int | None = None) -> None:
        """``skip_after``: retries in a row answered only from beyond the gap, after which
        :meth:`on_timer` reports the gap gone (None: never; a store must not skip)."""
        self._requester = requester
        self._policy = policy
        self._hold = HOLD_ROUNDS * policy.retry_max
        self._skip_after = skip_after
        self.skipped = 0
        # A dict, not a set: iteration in insertion order keeps runs reproducible.
        self._active: dict[Cursor, None] = {}
        self.fetches_sent = 0
        self.fetch_retries = 0
        self.router: Router | None = None
        """Addresses each FETCH (None: the plain requester id, every replier answers)."""

    def gap(self, cursor: Cursor, head: int, now: float, out: list[Action]) -> None:
        """``head`` is known to exist: fetch up to it unless a FETCH already covers ``last + 1``."""
        cursor.known_head = max(cursor.known_head, head)
        if head <= cursor.last:
            return
        if cursor.fetching and cursor.last + 1 < cursor.fetch_end:
            return
        cursor.delay = self._policy.retry_initial
        cursor.attempt = 0
        cursor.moved = now
        self._send(cursor, now, out)

    def early(
        self,
        cursor: Cursor,
        sequence: int,
        content: bytes,
        direct: bool,
        now: float,
        out: list[Action],
    ) -> None:
        """A record arrived ahead of ``last + 1``: keep it (within one window) and fetch the gap.

        The C nodes drop such records and fetch them again; keeping them makes a lost record
        cost one small FETCH instead of a re-send of everything after it. Memory stays
        bounded: only records less than one window ahead are kept.
        """
        if sequence - cursor.last <= self._policy.window:
            cursor.ahead[sequence] = content
        if direct:
            self.hole(cursor, sequence, now, out)
        else:
            self.gap(cursor, sequence, now, out)

    def hole(self, cursor: Cursor, sequence: int, now: float, out: list[Action]) -> None:
        """A FETCH reply skipped ``last + 1``: ask at once for just the hole.

        Repliers send in order, so a DIRECT-RECORD inside the window but ahead of ``last + 1``
        means the one before was lost - or that this replier no longer holds it (a producer
        releases what *any* store ACKed, while another store may still need it). Waiting for
        the retry timer would stall the partition, so the hole ``[last + 1, sequence)`` is
        asked for at once (what follows it is kept by :meth:`early`) - but at most once per
        window: with several repliers, one of them can be ahead of ``last + 1`` for a whole
        window, and a re-fetch per progress step would answer every reply with another reply
        (a storm seen with two stores and a producer). The retry timer covers the rest.
        """
        if not cursor.fetching or sequence >= cursor.fetch_end:
            self.gap(cursor, sequence, now, out)
            return
        if cursor.answer_low < 0 or sequence < cursor.answer_low:
            cursor.answer_low = sequence
        if cursor.hole_mark == cursor.fetch_end:
            return
        cursor.hole_mark = cursor.fetch_end
        self.fetch_retries += 1
        self.fetches_sent += 1
        start = cursor.last + 1
        count = sequence - start
        requester = self._requester
        if cursor.target:
            requester = f"{requester}{TARGET_MARK}{cursor.target}"
        out.append(Send(Fetch(cursor.producer, requester, cursor.topic, start, count)))

    def progress(self, cursor: Cursor, now: float, out: list[Action]) -> None:
        """Called after a cursor that is fetching took records in order (and those kept
        ahead that followed them: ``dafka.node._reader``)."""
        cursor.refused = 0
        cursor.answer_low = -1
        cursor.attempt = 0
        cursor.moved = now
        last = cursor.last
        if last >= cursor.known_head:
            cursor.fetching = False
            cursor.ahead.clear()
            self._active.pop(cursor, None)
            return
        policy = self._policy
        cursor.delay = policy.retry_initial
        end = cursor.fetch_end
        if last + 1 >= end:
            self._send(cursor, now, out)
            return
        cursor.deadline = now + cursor.delay
        if (
            policy.pipeline
            and end <= cursor.known_head
            and 2 * (end - last - 1) <= policy.window
            and not cursor.ahead  # records kept ahead: filling a gap, not streaming history
        ):
            self._pipeline(cursor, out)

    def answered(self, cursor: Cursor, now: float) -> None:
        """A FETCH reply brought records ``cursor`` already has: hold its retry off.

        The replier is working through an earlier FETCH of this partition, in order, and
        what is still needed is queued behind (module docstring): the retry is due the
        current wait after this answer, but never later than ``HOLD_ROUNDS x retry_max``
        after the last progress, so that duplicates cannot postpone it forever.
        """
        if not cursor.fetching:
            return
        due = min(now + cursor.delay, cursor.moved + self._hold)
        cursor.deadline = max(cursor.deadline, due)

    def restart(self, cursor: Cursor, now: float, out: list[Action]) -> None:
        """Ask again now, with the first wait (a peer that may hold the gap came)."""
        if cursor.last >= cursor.known_head:
            return
        cursor.delay = self._policy.retry_initial
        cursor.attempt = 0
        cursor.moved = now
        self._send(cursor, now, out)

    def forget(self, cursor: Cursor) -> None:
        """Stop fetching for ``cursor`` (its partition is dropped or repositioned)."""
        cursor.fetching = False
        cursor.ahead.clear()
        self._active.pop(cursor, None)

    def on_timer(self, now: float, out: list[Action]) -> list[tuple[Cursor, int]]:
        """Send again every FETCH whose partition made no progress by its deadline.

        Returns the partitions whose missing records are gone (see ``skip_after``) with the
        first sequence still available: the caller decides whether to :meth:`skip` to it.
        """
        retry_max = self._policy.retry_max
        skip_after = self._skip_after
        gone: list[tuple[Cursor, int]] = []
        for cursor in [c for c in self._active if c.deadline <= now]:
            if cursor.last >= cursor.known_head:
                self.forget(cursor)
                continue
            low = cursor.answer_low
            cursor.answer_low = -1
            if low > cursor.last + 1:
                cursor.refused += 1
            elif low >= 0 or not cursor.target:
                cursor.refused = 0
            # else: the one store asked did not answer at all - no news about the gap
            if skip_after is not None and cursor.refused >= skip_after:
                gone.append((cursor, low))
                continue
            cursor.delay = min(cursor.delay * 2.0, retry_max)
            self.fetch_retries += 1
            if self.router is not None and cursor.target:
                self.router.failed(cursor, now)
            cursor.attempt += 1
            self._send(cursor, now, out)
        return gone

    def skip(self, cursor: Cursor, first: int, now: float, out: list[Action]) -> None:
        """Move ``cursor`` to ``first`` (what lies before is gone) and fetch on from there."""
        self.skipped += first - (cursor.last + 1)
        cursor.last = first - 1
        cursor.ahead = {k: v for k, v in cursor.ahead.items() if k > cursor.last}
        cursor.refused = 0
        cursor.answer_low = -1
        cursor.delay = self._policy.retry_initial
        cursor.moved = now
        if cursor.known_head > cursor.last:
            self._send(cursor, now, out)
        else:
            self.forget(cursor)

    def next_deadline(self) -> float | None:
        if not self._active:
            return None
        return min(c.deadline for c in self._active)

    def in_flight(self) -> int:
        """How many partitions have a FETCH outstanding."""
        return len(self._active)

    def _pipeline(self, cursor: Cursor, out: list[Action]) -> None:
        """Ask for the window after ``fetch_end`` now (half of the current one is left), from
        the replier the current FETCH went to: it answers FETCHes in order, so the next window
        follows the current one without a pause. ``fetch_end`` moves on: a retry re-asks
        from ``last + 1`` as before, and at most 1.5 windows are in flight."""
        start = cursor.fetch_end
        count = min(self._policy.window, cursor.known_head + 1 - start)
        cursor.fetch_end = start + count
        self.fetches_sent += 1
        requester = self._requester
        if cursor.target:
            requester = f"{requester}{TARGET_MARK}{cursor.target}"
        out.append(Send(Fetch(cursor.producer, requester, cursor.topic, start, count)))

    def _send(self, cursor: Cursor, now: float, out: list[Action]) -> None:
        start = cursor.last + 1
        count = min(self._policy.window, cursor.known_head - cursor.last)
        cursor.fetch_end = start + count
        cursor.fetching = True
        cursor.deadline = now + cursor.delay
        self._active[cursor] = None
        self.fetches_sent += 1
        router = self.router
        requester = self._requester if router is None else router.requester(cursor, now)
        out.append(Send(Fetch(cursor.producer, requester, cursor.topic, start, count)))


TARGET_MARK = "@"
"""Separates a requester id from the store it addresses: ``requester@store-reader-id``."""

__all__ = ["HOLD_ROUNDS", "NO_LIMIT", "TARGET_MARK", "Cursor", "FetchScheduler", "Router"]
