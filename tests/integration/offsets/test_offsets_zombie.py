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
from collections import Counter
from pathlib import Path
from typing import Any

from dafka import Consumer, LocalCluster, Producer, ReadCommittedConsumer
from tests.integration.cluster.cluster_procs import Proc, Processes, wait_until

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


def _produce(cluster: LocalCluster, topic: str, name: str) -> dict[tuple[str, str], int]:
    """``TOTAL`` messages to 4 partitions in batched RECORDs (cut by the members' polls);
    returns each partition's end."""
    ends: dict[tuple[str, str], int] = {}
    with Producer(
        topic, towers=cluster.towers, beacon_interval=0.2, name=name, partitions=4
    ) as producer:
        for start in range(0, TOTAL, 50):
            futures = [producer.send(b"%d" % i, key=b"%d" % i) for i in range(start, start + 50)]
            assert producer.flush(30) == 0
            for future in futures:
                meta = future.result()
                key = (meta.topic, meta.partition)
                ends[key] = max(ends.get(key, 0), meta.offset + 1)
    assert len(ends) == 4
    return ends


def _handled(events: list[dict[str, Any]]) -> tuple[list[str], int]:
    """What a member printed it handled, and how many of those its last commit covers."""
    values: list[str] = []
    committed = 0
    for event in events:
        if event["event"] == "records":
            values += event["values"]
        elif event["event"] == "committed":
            committed = event["handled"]
    return values, committed


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
    handled_a, committed_a = _handled(a.events())
    assert committed_a < len(handled_a) < TOTAL

    b = _member(procs, cluster, "member-b")
    with Consumer(
        assign=dict.fromkeys(ends, 0), group_id=GROUP, towers=cluster.towers, beacon_interval=0.2
    ) as watcher:

        def committed() -> dict[tuple[str, str], int]:
            found = watcher.committed(list(ends))
            return {k: -1 if c is None else c.offset for k, c in found.items()}

        wait_until(lambda: committed() == ends, "B's commits to reach every end", timeout=90)

        a.send_signal(signal.SIGCONT)  # the zombie resumes, straight into its commit
        outcome = wait_until(
            lambda: _after(a, "pausing", ("committed", "commit_failed")),
            "the zombie's commit to end",
            timeout=60,
        )
        wait_until(lambda: _after(a, "pausing", ("assigned",)), "A to rejoin", timeout=60)
        after = committed()
        moved = {k: (ends[k], after[k]) for k in ends if after[k] != ends[k]}
        assert not moved, f"the zombie's commit moved the group's position (end, now): {moved}"

    assert outcome["event"] == "commit_failed", f"the zombie's commit was stored: {outcome}"
    assert outcome["error"] == "CommitFailedError", outcome
    assert [e for e in a.events() if e["event"] == "lost"], "A never learnt it lost its partitions"

    handled_b, _ = _handled(b.events())
    everything = {str(i) for i in range(TOTAL)}
    assert set(handled_a) | set(handled_b) == everything  # nothing lost
    twice = set(handled_a) & set(handled_b)
    tail = set(handled_a[committed_a:])
    assert twice <= tail, f"read twice before A's last commit: {sorted(twice - tail)[:10]}"


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
    handled_a, committed_a = _handled(a.events())  # its last commit stored before the pause
    assert committed_a < len(handled_a) < TOTAL

    b = _member(procs, cluster, "window-b", topic=topic, group=group)
    with Consumer(
        assign=dict.fromkeys(ends, 0), group_id=group, towers=cluster.towers, beacon_interval=0.2
    ) as watcher:

        def committed() -> dict[tuple[str, str], int]:
            found = watcher.committed(list(ends))
            return {k: -1 if c is None else c.offset for k, c in found.items()}

        wait_until(lambda: committed() == ends, "B's commits to reach every end", timeout=90)

        a.send_signal(signal.SIGCONT)  # the zombie resumes, into the write of its commit
        outcome = wait_until(
            lambda: _after(a, "pausing", ("committed", "commit_failed")),
            "the zombie's commit to end",
            timeout=60,
        )
        wait_until(lambda: _after(a, "pausing", ("lost",)), "A to learn it lost", timeout=60)
        after = committed()
        moved = {k: (ends[k], after[k]) for k in ends if after[k] != ends[k]}
        assert not moved, f"the zombie's late commit moved the group's position (end, now): {moved}"
    assert outcome["event"] == "committed", f"the check refused it: not this window: {outcome}"

    handled_a, _ = _handled(a.events())
    handled_b, _ = _handled(b.events())
    everything = {str(i) for i in range(TOTAL)}
    assert set(handled_a) | set(handled_b) == everything  # nothing lost
    twice = set(handled_a) & set(handled_b)
    tail = set(handled_a[committed_a:])
    assert twice <= tail, f"read twice before A's last commit: {sorted(twice - tail)[:10]}"


EOS_MEMBER = Path(__file__).with_name("eos_member.py")
EOS_TOTAL = 200


def _eos_member(procs: Processes, cluster: LocalCluster, name: str, *extra: str) -> Proc:
    argv = [sys.executable, str(EOS_MEMBER), "--tower", cluster.towers, "--input", "zeos-in"]
    argv += ["--output", "zeos-out", "--group", "g-zeos", "--tid", name, "--txn-size", "5"]
    return procs.spawn(name, [*argv, *extra])


def test_a_paused_members_transaction_with_lost_offsets_is_aborted(
    cluster: LocalCluster, procs: Processes
) -> None:
    # The exactly-once loop: each member its own transactional id (nothing fences one
    # member's producer when another takes its partitions). A stops itself inside a
    # transaction, after sending its output and offsets; B takes every partition over and
    # commits everything; A resumes into commit_transaction(). Before, A's transaction
    # committed: its output was in the read-committed output twice (B had written it too)
    ends: dict[tuple[str, str], int] = {}
    with Producer(
        "zeos-in", towers=cluster.towers, beacon_interval=0.2, name="zeos-src", partitions=2
    ) as source:
        for start in range(0, EOS_TOTAL, 50):
            futures = [source.send(b"%d" % i, key=b"%d" % i) for i in range(start, start + 50)]
            assert source.flush(30) == 0
            for future in futures:
                meta = future.result()
                key = (meta.topic, meta.partition)
                ends[key] = max(ends.get(key, 0), meta.offset + 1)

    a = _eos_member(procs, cluster, "zeos-a", "--work", "0.05", "--pause-after", "3")
    a.wait_event("pausing", timeout=90)

    _eos_member(procs, cluster, "zeos-b")
    with Consumer(
        assign=dict.fromkeys(ends, 0), group_id="g-zeos", towers=cluster.towers, beacon_interval=0.2
    ) as watcher:

        def committed() -> dict[tuple[str, str], int]:
            found = watcher.committed(list(ends))
            return {k: -1 if c is None else c.offset for k, c in found.items()}

        wait_until(lambda: committed() == ends, "B's commits to reach every end", timeout=90)
        a.send_signal(signal.SIGCONT)  # into commit_transaction()
        outcome = wait_until(
            lambda: _after(a, "pausing", ("txn", "commit_failed")),
            "the zombie's commit to end",
            timeout=60,
        )
        assert committed() == ends

    with ReadCommittedConsumer(
        ["zeos-out"], towers=cluster.towers, beacon_interval=0.2, offset_reset="earliest"
    ) as reader:
        got: list[bytes] = []

        def read_all() -> bool:
            got.extend(r.value for r in reader.poll(0.1) if r.value)
            return len(set(got)) >= EOS_TOTAL and reader.at_end()

        wait_until(read_all, "the read-committed output", timeout=90)
        got.extend(r.value for r in reader.poll(0.5) if r.value)
    twice = sorted(v for v, n in Counter(got).items() if n > 1)
    assert not twice, f"{len(twice)} outputs committed twice: {twice[:10]} (A's: {outcome})"
    assert set(got) == {b"out-%d" % i for i in range(EOS_TOTAL)}
    assert outcome["event"] == "commit_failed", outcome
    assert outcome["error"] == "CommitFailedError", outcome
