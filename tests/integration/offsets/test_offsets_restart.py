"""A group restarted from scratch resumes at its commits, across process kills (issue 20).

Real processes: a tower, two stores, group members (``group_member.py``). A member is
SIGKILLed mid-stream, then one store is SIGKILLed for good; a new member process of the
group reads the rest from the surviving store, starting at the group's last commit: nothing
is lost, and only the dead member's uncommitted tail is read twice.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dafka import Producer
from tests.integration.cluster.cluster_procs import Proc, Processes, TowerProc, wait_until
from tests.integration.offsets.group_member import handled

MEMBER = Path(__file__).with_name("group_member.py")
TOTAL = 3000


def _member(procs: Processes, tower: TowerProc, topic: str, group: str, every: int) -> Proc:
    argv = [sys.executable, str(MEMBER), "--tower", tower.spec, "--topic", topic]
    return procs.spawn("member", [*argv, "--group", group, "--commit-every", str(every)])


def _produce(tower: TowerProc, topic: str) -> None:
    """TOTAL messages over 3 partitions, flushed in rounds: many batched RECORDs each."""
    with Producer(
        topic, towers=tower.spec, beacon_interval=0.2, name=f"{topic}-w", partitions=3
    ) as producer:
        for start in range(0, TOTAL, 100):
            for i in range(start, start + 100):
                producer.send(b"%d" % i, key=b"%d" % i)
            assert producer.flush(30) == 0


def test_a_group_restarted_from_scratch_resumes_at_its_commits_on_the_surviving_store(
    procs: Processes, tmp_path: Path
) -> None:
    tower = procs.tower()
    doomed = procs.store(tmp_path / "a", [tower], name="store-a")
    procs.store(tmp_path / "b", [tower], name="store-b")
    _produce(tower, "resume")

    first = _member(procs, tower, "resume", "g-resume", every=200)
    wait_until(lambda: handled(first.events())[1] >= 1000, "the first member's commits", timeout=60)
    first.kill()  # SIGKILL: no closing commit
    before, committed = handled(first.events())
    assert 0 < committed <= len(before)
    doomed.proc.kill()  # the commits must be on the other store too

    second = _member(procs, tower, "resume", "g-resume", every=200)
    everything = {str(i) for i in range(TOTAL)}

    def done() -> bool:
        return set(before) | set(handled(second.events())[0]) == everything

    wait_until(done, "the second member to read the rest", timeout=90)
    after, _ = handled(second.events())
    assert len(before) == len(set(before))
    assert len(after) == len(set(after))
    twice = set(before) & set(after)
    tail = set(before[committed:])
    assert twice <= tail, f"read again before the last commit: {sorted(twice - tail)[:10]}"
    assert not set(before[:committed]) & set(after)
    print(f"first member: {len(before)} handled, {committed} committed; read twice: {len(twice)}")
