"""A group member paused mid-commit (SIGSTOP) and resumed after the group took its partitions
over: its late commit is refused and the group's position never moves (issue 20).

Real processes: the cluster (``LocalCluster``: a tower, two stores) and two members
(``group_member.py``). Member A reads alone, committing every 20 records; it stops itself
right before a commit (``--pause-after``: SIGSTOP, a zombie mid-commit). Member B joins,
takes every partition from the group's commits (A is silent past ``session_timeout``),
reads the rest and commits it: the group's commits reach every partition's end. Then A is
resumed (SIGCONT) straight into its commit of positions B has long passed. Before, that
commit was stored and ranked above B's (its version is the later wall clock): the group's
position went back, and a restarted group would read again what B had committed. Now A's
member finds it was silent for a session timeout, counts its partitions lost, and the
commit raises ``CommitFailedError``; nothing is lost, and only A's uncommitted tail is
read twice.
"""

from __future__ import annotations

import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dafka import Consumer, LocalCluster, Producer, ReadCommittedConsumer
from tests.integration.cluster.cluster_procs import Proc, Processes, wait_until
from tests.integration.offsets.group_member import handled

MEMBER = Path(__file__).with_name("group_member.py")
TOTAL = 600
TOPIC = "zombie-in"
GROUP = "g-zombie"


def _member(
    procs: Processes,
    cluster: LocalCluster,
    name: str,
    *extra: str,
    topic: str = TOPIC,
    group: str = GROUP,
) -> Proc:
    argv = [sys.executable, str(MEMBER), "--tower", cluster.towers, "--topic", topic]
    argv += ["--group", group, "--commit-every", "20", "--max-records", "10", "--commit-idle"]
    return procs.spawn(name, [*argv, *extra])


def _produce(
    cluster: LocalCluster, topic: str, name: str, total: int = TOTAL, partitions: int = 4
) -> dict[tuple[str, str], int]:
    """``total`` messages to ``partitions`` partitions in batched RECORDs (cut by the
    members' polls); returns each partition's end."""
    ends: dict[tuple[str, str], int] = {}
    with Producer(
        topic, towers=cluster.towers, beacon_interval=0.2, name=name, partitions=partitions
    ) as producer:
        _feed(producer, ends, 0, total)
    assert len(ends) == partitions
    return ends


def _feed(producer: Producer, ends: dict[tuple[str, str], int], first: int, last: int) -> None:
    """Messages ``first`` to ``last`` (keyed by their number), stored 50 at a time; ``ends``
    follows each partition's end."""
    for start in range(first, last, 50):
        futures = [producer.send(b"%d" % i, key=b"%d" % i) for i in range(start, start + 50)]
        assert producer.flush(30) == 0
        for future in futures:
            meta = future.result()
            key = (meta.topic, meta.partition)
            ends[key] = max(ends.get(key, 0), meta.offset + 1)


@contextmanager
def _group_commits(
    cluster: LocalCluster, group: str, ends: dict[tuple[str, str], int]
) -> Iterator[Callable[[], dict[tuple[str, str], int]]]:
    """``committed()``: the group's committed offset of each partition of ``ends`` (-1:
    none), asked by a consumer that reads nothing."""
    with Consumer(
        assign=dict.fromkeys(ends, 0), group_id=group, towers=cluster.towers, beacon_interval=0.2
    ) as watcher:

        def committed() -> dict[tuple[str, str], int]:
            found = watcher.committed(list(ends))
            return {k: -1 if c is None else c.offset for k, c in found.items()}

        yield committed


def _resume_after_takeover(
    a: Proc,
    committed: Callable[[], dict[tuple[str, str], int]],
    ends: dict[tuple[str, str], int],
    outcomes: tuple[str, ...],
) -> dict[str, Any]:
    """Once B's commits reach every partition's end, A (stopped) resumes straight into its
    commit: the first of ``outcomes`` it prints after its ``pausing``."""
    wait_until(lambda: committed() == ends, "B's commits to reach every end", timeout=90)
    a.send_signal(signal.SIGCONT)
    return wait_until(
        lambda: _after(a, "pausing", outcomes), "the zombie's commit to end", timeout=60
    )


def _unmoved(
    committed: Callable[[], dict[tuple[str, str], int]], ends: dict[tuple[str, str], int]
) -> None:
    after = committed()
    moved = {k: (ends[k], after[k]) for k in ends if after[k] != ends[k]}
    assert not moved, f"the zombie's late commit moved the group's position (end, now): {moved}"


def _read_once_but_as_tail(handled_a: list[str], committed_a: int, b: Proc) -> None:
    """A and B read every message between them, and what both read is only what A read
    after its last commit before the pause."""
    handled_b, _ = handled(b.events())
    everything = {str(i) for i in range(TOTAL)}
    assert set(handled_a) | set(handled_b) == everything  # nothing lost
    twice = set(handled_a) & set(handled_b)
    tail = set(handled_a[committed_a:])
    assert twice <= tail, f"read twice before A's last commit: {sorted(twice - tail)[:10]}"


def _after(proc: Proc, mark: str, events: tuple[str, ...]) -> dict[str, Any] | None:
    """The first of ``events`` that ``proc`` printed after its ``mark`` event, if any."""
    seen = False
    for event in proc.events():
        if seen and event["event"] in events:
            return event
        seen = seen or event["event"] == mark
    return None


def test_a_paused_members_late_commit_is_refused_and_moves_nothing(
    cluster: LocalCluster, procs: Processes
) -> None:
    ends = _produce(cluster, TOPIC, "zombie-w")
    a = _member(procs, cluster, "member-a", "--work", "0.05", "--pause-after", "70")
    a.wait_event("pausing", timeout=90)  # stopped itself right before a commit
    handled_a, committed_a = handled(a.events())
    assert committed_a < len(handled_a) < TOTAL

    b = _member(procs, cluster, "member-b")
    with _group_commits(cluster, GROUP, ends) as committed:
        outcome = _resume_after_takeover(a, committed, ends, ("committed", "commit_failed"))
        wait_until(lambda: _after(a, "pausing", ("assigned",)), "A to rejoin", timeout=60)
        _unmoved(committed, ends)

    assert outcome["event"] == "commit_failed", f"the zombie's commit was stored: {outcome}"
    assert outcome["error"] == "CommitFailedError", outcome
    assert [e for e in a.events() if e["event"] == "lost"], "A never learnt it lost its partitions"
    _read_once_but_as_tail(handled_a, committed_a, b)  # what A handled before the pause


def test_a_commit_paused_past_its_ownership_check_ranks_below_the_new_owners(
    cluster: LocalCluster, procs: Processes
) -> None:
    # The check-to-write window: A stops itself inside a commit, after its member's
    # ownership check passed and before the write (dafka.testing.stop_mid_commit). B takes
    # every partition over and commits their ends; A resumes and its commit - positions B
    # has long passed - is written and stored: no check can refuse it any more. Before the
    # tenures it ranked above B's (the later version: its wall clock) and the group's
    # position went back; now it carries the tenure of A's take, below B's, and the
    # position stays at the ends (docs/groups.md, "Tenures").
    topic, group = "window-in", "g-window"
    ends = _produce(cluster, topic, "window-w")
    a = _member(
        procs,
        cluster,
        "window-a",
        "--work",
        "0.05",
        "--pause-in-commit",
        "70",
        topic=topic,
        group=group,
    )
    a.wait_event("pausing", timeout=90)
    handled_a, committed_a = handled(a.events())  # its last commit stored before the pause
    assert committed_a < len(handled_a) < TOTAL

    b = _member(procs, cluster, "window-b", topic=topic, group=group)
    with _group_commits(cluster, group, ends) as committed:
        # the zombie resumes into the write of its commit
        outcome = _resume_after_takeover(a, committed, ends, ("committed", "commit_failed"))
        wait_until(lambda: _after(a, "pausing", ("lost",)), "A to learn it lost", timeout=60)
        _unmoved(committed, ends)
    assert outcome["event"] == "committed", f"the check refused it: not this window: {outcome}"
    _read_once_but_as_tail(handled(a.events())[0], committed_a, b)  # A's whole run


EOS_MEMBER = Path(__file__).with_name("eos_member.py")
EOS_TOTAL = 200


def _eos_member(
    procs: Processes, cluster: LocalCluster, name: str, *extra: str, prefix: str = "zeos"
) -> Proc:
    """An exactly-once member of group ``g-PREFIX``: PREFIX-in to PREFIX-out."""
    argv = [sys.executable, str(EOS_MEMBER), "--tower", cluster.towers]
    argv += ["--input", f"{prefix}-in", "--output", f"{prefix}-out", "--group", f"g-{prefix}"]
    argv += ["--tid", name, "--txn-size", "5"]
    return procs.spawn(name, [*argv, *extra])


def _read_committed(cluster: LocalCluster, topic: str, total: int) -> list[bytes]:
    """Every value of ``topic`` read committed: until ``total`` distinct ones and the end,
    and then whatever else comes within half a second (a duplicate must show)."""
    with ReadCommittedConsumer(
        [topic], towers=cluster.towers, beacon_interval=0.2, offset_reset="earliest"
    ) as reader:
        got: list[bytes] = []

        def read_all() -> bool:
            got.extend(r.value for r in reader.poll(0.1) if r.value)
            return len(set(got)) >= total and reader.at_end()

        wait_until(read_all, "the read-committed output", timeout=90)
        got.extend(r.value for r in reader.poll(0.5) if r.value)
    return got


def test_a_paused_members_transaction_with_lost_offsets_is_aborted(
    cluster: LocalCluster, procs: Processes
) -> None:
    # The exactly-once loop: each member its own transactional id (nothing fences one
    # member's producer when another takes its partitions). A stops itself inside a
    # transaction, after sending its output and offsets; B takes every partition over and
    # commits everything; A resumes into commit_transaction(). Before, A's transaction
    # committed: its output was in the read-committed output twice (B had written it too)
    ends = _produce(cluster, "zeos-in", "zeos-src", EOS_TOTAL, partitions=2)
    a = _eos_member(procs, cluster, "zeos-a", "--work", "0.05", "--pause-after", "3")
    a.wait_event("pausing", timeout=90)

    _eos_member(procs, cluster, "zeos-b")
    with _group_commits(cluster, "g-zeos", ends) as committed:
        # into commit_transaction()
        outcome = _resume_after_takeover(a, committed, ends, ("txn", "commit_failed"))
        assert committed() == ends

    got = _read_committed(cluster, "zeos-out", EOS_TOTAL)
    twice = sorted(v for v, n in Counter(got).items() if n > 1)
    assert not twice, f"{len(twice)} outputs committed twice: {twice[:10]} (A's: {outcome})"
    assert set(got) == {b"out-%d" % i for i in range(EOS_TOTAL)}
    assert outcome["event"] == "commit_failed", outcome
    assert outcome["error"] == "CommitFailedError", outcome


def test_a_member_paused_before_its_intent_is_fenced_by_the_taker(
    cluster: LocalCluster, procs: Processes
) -> None:
    # The window the ownership check cannot close: A stops itself inside
    # commit_transaction(), after its last ownership check and before its INTENT
    # (TransactionalProducer(intent_fault=stop_mid_commit())). B takes every partition
    # over: the group's last commit of them is A's undecided transaction, so B first fences
    # A's transaction log (a fencing claim, as a new instance of A's id would make), then
    # reads the commits and writes the same outputs. A resumes into its INTENT: the stores
    # refuse it (ProducerFencedError), A restarts its producer and goes on. Before, A's
    # INTENT was stored: its outputs counted, and B had written them too (twice in the
    # read-committed output). Then more input: the restarted producer's transactions work.
    def member(name: str, *extra: str) -> Proc:
        return _eos_member(procs, cluster, name, "--restart-fenced", *extra, prefix="zfence")

    ends: dict[tuple[str, str], int] = {}
    with Producer(
        "zfence-in", towers=cluster.towers, beacon_interval=0.2, name="zfence-src", partitions=2
    ) as source:
        _feed(source, ends, 0, EOS_TOTAL)
        a = member("zfence-a", "--work", "0.05", "--pause-in-commit", "3")
        a.wait_event("pausing", timeout=90)  # stopped between its last check and its INTENT

        b = member("zfence-b")
        with _group_commits(cluster, "g-zfence", ends) as committed:
            # into its INTENT
            outcome = _resume_after_takeover(a, committed, ends, ("txn", "fenced", "commit_failed"))
            assert committed() == ends
            total = EOS_TOTAL
            if outcome["event"] == "fenced":  # the loop goes on with a new instance
                wait_until(lambda: _after(a, "fenced", ("restarted",)), "A's restart", timeout=60)
                # more input until A (rejoined: B hands it a partition) commits with its
                # new producer instance
                deadline = time.monotonic() + 60
                while not _after(a, "restarted", ("txn",)) and time.monotonic() < deadline:
                    _feed(source, ends, total, total + 50)
                    total += 50
                    time.sleep(0.5)  # the feed's pace, not a settle: the loop waits on A
                wait_until(lambda: committed() == ends, "every new input committed", timeout=90)

    got = _read_committed(cluster, "zfence-out", total)
    twice = sorted(v for v, n in Counter(got).items() if n > 1)
    assert not twice, f"{len(twice)} outputs committed twice: {twice[:10]} (A's: {outcome})"
    assert set(got) == {b"out-%d" % i for i in range(total)}
    assert outcome["event"] == "fenced", f"A's transaction was not fenced: {outcome}"
    assert "fenced" in outcome["error"], outcome
    txns_b = [e for e in b.events() if e["event"] == "txn"]
    assert txns_b, "B committed nothing"
    assert txns_b[-1]["logs_fenced"] >= 1, "B never fenced A's log"
    # A rejoined and B handed it a partition in a normal rebalance: its last transaction
    # was decided, so nothing fenced B's log - unless B was counted dead meanwhile (no beat
    # heard for session_timeout, 2 s: a loaded machine starves a process that long, at load
    # ~30 in an integration run), when the taker of its partitions must fence its undecided
    # transaction; and A's restarted producer committed
    if "counted dead by another member" not in b.stderr():
        assert not [e for e in b.events() if e["event"] == "fenced"], "B was fenced needlessly"
    assert _after(a, "restarted", ("txn",)), "A's restarted producer committed nothing"
