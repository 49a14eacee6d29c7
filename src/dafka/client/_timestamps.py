"""``offsets_for_times``: the first RECORD of a partition at or after a time, by binary
search over single records - never reading a whole partition.

Theory. A partition's RECORDs are numbered 0..head; a producer stamps each message with its
clock (``timestamp``, ms since the epoch), so in a partition the times grow with the
offsets (as Kafka assumes for its time index). The time of a RECORD is the latest of its
messages' timestamps (Kafka's batch ``maxTimestamp``); the answer for a time ``t`` is the
first RECORD whose time is ``>= t`` - the RECORD that holds the first message at or after
``t`` (messages before it in that RECORD are handed out too: offsets count RECORDs). With
``[lo, hi]`` the offsets that may still be the answer, each round reads the record at the
middle (a one-record FETCH, :class:`~dafka.node.ProbeMachine`) and halves the range: at most
``ceil(log2(head + 2))`` records per partition (20 for a million RECORDs), all partitions
probed in parallel, one round trip each round.

What a probe may find: a batch with timestamps (its time); a plain RECORD (a C producer's,
or ``batching=False``) or a batch without timestamps - no time, taken as *before* any time
(a partition of plain RECORDs answers None: nothing is known to be at or after ``t``); no
answer at all after ``probe_attempts`` tries of ``probe_timeout`` each - a record no store
holds (below the partition's start after retention, or lost): taken as before too, so the
search moves past a start that retention moved. Our stores say where their logs start
(LOG-START): a probe below the start of every store that greeted the searcher is not waited
for. The heads are in once every store said "that is all" (HEADS-END) for the searcher's
ask, without a window of quiet (with a store that does not say it: 0.3 s of quiet). Times
that go backwards inside a partition (a producer given explicit, unordered timestamps)
still give *a* RECORD at or after ``t`` whose predecessor is before it, not necessarily
the first.

The searcher is its own node (it joins through the towers, like a head watcher): the
consumer's node and machine are untouched, and ``dafka consume --from-timestamp`` uses the
same code through :meth:`Consumer.seek_to_timestamp`.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterable, Mapping

from dafka.client._errors import NoStoreError
from dafka.client._heads import STALLED_ROUND
from dafka.lifecycle import Closing
from dafka.node import ProbeMachine, check_name
from dafka.protocol import new_node_id
from dafka.records import CorruptBatchError, decode_batch, is_batch
from dafka.transport.config import TransportConfig
from dafka.transport.runner import Identity, NodeRunner
from dafka.transport.sockets import ZmqContext

Key = tuple[str, str]


def record_time(content: bytes) -> int | None:
    """The time a RECORD stands for: the latest timestamp of its messages; None for a plain
    RECORD, a batch without timestamps, or one that does not decode."""
    if not is_batch(content):
        return None
    try:
        stamps = decode_batch(content).timestamps
    except CorruptBatchError:
        return None
    known = [t for t in stamps if t is not None]
    return max(known) if known else None


class Bisection:
    """The binary search of one partition: the first offset in ``[0, head]`` whose time is
    ``>= target`` (pure: :meth:`probe` says where to read, :meth:`answer` takes what was
    found there)."""

    __slots__ = ("head", "hi", "lo", "target")

    def __init__(self, target: int, head: int) -> None:
        self.target = target
        self.head = head
        self.lo = 0
        self.hi = head

    @property
    def done(self) -> bool:
        return self.lo > self.hi

    def probe(self) -> int:
        """The offset to read next (while not :attr:`done`)."""
        return (self.lo + self.hi) // 2

    def answer(self, found: int | None) -> None:
        """The time of the record at :meth:`probe` (None: no time, or not there)."""
        mid = self.probe()
        if found is not None and found >= self.target:
            self.hi = mid - 1
        else:
            self.lo = mid + 1

    def result(self) -> int | None:
        """The first offset at or after the target, None when none is (yet)."""
        return self.lo if self.lo <= self.head else None


def checked_times(times: Mapping[Key, int]) -> dict[Key, int]:
    """``{(topic, partition): ms}`` checked in the caller's thread."""
    out: dict[Key, int] = {}
    for key, stamp in dict(times).items():
        if not (isinstance(key, tuple) and len(key) == 2):
            raise TypeError(f"offsets_for_times takes (topic, partition) keys, got {key!r}")
        check_name("topic", key[0])
        check_name("partition", key[1])
        out[key] = checked_timestamp(stamp)
    return out


def checked_timestamp(stamp: object) -> int:
    if isinstance(stamp, bool) or not isinstance(stamp, int):
        raise TypeError(f"a timestamp is an int of ms since the epoch, got {stamp!r}")
    if stamp < 0:
        raise ValueError(f"a timestamp is >= 0 ms since the epoch, got {stamp}")
    return stamp


class TimestampSearch(Closing):
    """``with TimestampSearch(transport) as s: s.offsets_for_times({(t, p): ms})`` - see the
    module docstring. One node for any number of lookups."""

    def __init__(
        self,
        transport: TransportConfig | None = None,
        *,
        ready_timeout: float | None = 10.0,
        context: ZmqContext | None = None,
        probe_timeout: float = 0.5,
        probe_attempts: int = 3,
    ) -> None:
        self.node_id = new_node_id()
        self._machine = ProbeMachine(self.node_id, refresh=0.2)
        self._changed = threading.Condition()
        self._found: dict[tuple[str, str, int], bytes] = {}
        self._version = 0
        self._stores = 0
        self._heads: dict[Key, int] = {}
        self._answered = 0
        self._may_be_ours = True
        self._starts: dict[Key, dict[str, int]] = {}
        self._probe_timeout = probe_timeout
        self._attempts = probe_attempts
        self.probes = 0
        """Records read so far (probes sent, repeats included)."""
        self._runner = NodeRunner(
            self._machine,
            [Identity(self.node_id)],
            transport or TransportConfig(),
            context=context,
            after_turn=self._after_turn,
            name="timestamps",
        )
        self._runner.start(ready_timeout)

    def offsets_for_times(
        self,
        times: Mapping[Key, int],
        *,
        topics: Mapping[str, int] | None = None,
        heads: Mapping[Key, int] | None = None,
        timeout: float = 10.0,
    ) -> dict[Key, int | None]:
        """The first offset at or after each partition's time (None: no RECORD is, yet).

        ``topics``: ``{topic: ms}`` for every partition of the topic the stores know.
        ``heads``: heads the caller knows (a consumer's), taken where higher. Waits up to
        ``timeout`` for a store to answer (:class:`NoStoreError` if none does) and for the
        heads to settle; partitions nobody knows answer None."""
        wanted = checked_times(times)
        per_topic = {t: checked_timestamp(ms) for t, ms in dict(topics or {}).items()}
        for topic in per_topic:
            check_name("topic", topic)
        for topic in sorted({t for t, _ in wanted} | set(per_topic)):
            self._runner.call(functools.partial(self._subscribe, topic))
        known = self._settle(timeout)
        for key, head in dict(heads or {}).items():
            if head > known.get(key, -1):
                known[key] = head
        for topic, partition in known:
            if topic in per_topic and (topic, partition) not in wanted:
                wanted[(topic, partition)] = per_topic[topic]
        searches = {
            key: Bisection(ms, known[key]) for key, ms in wanted.items() if known.get(key, -1) >= 0
        }
        self._search(searches)
        return {key: searches[key].result() if key in searches else None for key in wanted}

    def heads(self) -> dict[Key, int]:
        """The heads learnt so far (a snapshot)."""
        with self._changed:
            return dict(self._heads)

    def _settle(self, timeout: float) -> dict[Key, int]:
        """Wait for a store, then for every store's "that is all" to a fresh ask (or, with
        a store that does not say it, until the heads were quiet for a moment); the heads."""
        deadline = time.monotonic() + timeout
        quiet = max(0.3, self._probe_timeout)
        with self._changed:
            while self._stores == 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise NoStoreError(f"no store answered within {timeout} s")
                self._changed.wait(remaining)
        asked = time.monotonic()
        round_ = self._runner.call(self._machine.ask_now)
        with self._changed:
            version, since = self._version, asked
            while True:
                now = time.monotonic()
                if self._answered >= round_:
                    return dict(self._heads)
                wait_answer = self._may_be_ours and now < asked + STALLED_ROUND
                if now >= deadline or (not wait_answer and now - since >= quiet):
                    return dict(self._heads)
                wake = asked + STALLED_ROUND if wait_answer else since + quiet
                self._changed.wait(max(min(deadline, wake) - now, 0.001))
                if self._version != version:
                    version, since = self._version, time.monotonic()

    def _below_start(self, key: tuple[str, str, int]) -> bool:
        """Every store that greeted us said its log starts above this record (LOG-START):
        no one will answer its probe."""
        starts = self._starts.get((key[0], key[1]))
        if not starts:
            return False
        return len(starts) >= self._stores and min(starts.values()) > key[2]

    def _search(self, searches: Mapping[Key, Bisection]) -> None:
        """Every search to its end, one probe per unfinished partition per round."""
        while True:
            round_ = {k: b.probe() for k, b in searches.items() if not b.done}
            if not round_:
                return
            found = self._read(round_)
            for key, offset in round_.items():
                content = found.get((key[0], key[1], offset))
                searches[key].answer(None if content is None else record_time(content))

    def _read(self, at: Mapping[Key, int]) -> dict[tuple[str, str, int], bytes]:
        """The records at ``at`` (asked up to ``probe_attempts`` times each); those that
        did not come are missing from the result."""
        wanted = {(t, p, o) for (t, p), o in at.items()}
        got: dict[tuple[str, str, int], bytes] = {}
        for _ in range(self._attempts):
            with self._changed:
                ask = sorted(k for k in wanted - got.keys() if not self._below_start(k))
            if not ask:
                break
            self.probes += len(ask)
            self._runner.call(functools.partial(self._probe, ask))
            deadline = time.monotonic() + self._probe_timeout
            with self._changed:
                while True:
                    for key in ask:
                        if key in self._found:
                            got[key] = self._found.pop(key)
                    gone = {k for k in wanted - got.keys() if self._below_start(k)}
                    remaining = deadline - time.monotonic()
                    if wanted <= got.keys() | gone or remaining <= 0:
                        break
                    self._changed.wait(remaining)
        with self._changed:
            self._found.clear()  # late answers of this round
        return got

    def _subscribe(self, topic: str, now: float) -> None:
        self._machine.subscribe(topic, now)

    def _probe(self, ask: Iterable[tuple[str, str, int]], now: float) -> None:
        for topic, partition, offset in ask:
            self._machine.probe(topic, partition, offset, now)

    # -- runner thread ---------------------------------------------------------------------

    def _after_turn(self, now: float) -> None:
        del now
        machine = self._machine
        if machine.version == self._version:
            return
        found = machine.take_found()
        with self._changed:
            self._version = machine.version
            self._stores = machine.stores
            self._heads = machine.heads()
            self._answered = machine.answered_round
            self._may_be_ours = machine.may_be_ours
            self._starts = machine.log_starts()
            self._found.update(found)
            self._changed.notify_all()

    def close(self) -> None:
        self._runner.stop()


__all__ = ["Bisection", "TimestampSearch", "checked_times", "record_time"]
