"""Exactly-once in a consumer group: consumed positions committed in the output's
transaction (``send_offsets_to_transaction``), across member kills and a zombie (issue 20).

Real processes: the cluster (a tower and two stores, ``LocalCluster``) and the member
(``eos_member.py``), which is made a zombie once (a transaction stuck in processing while a
successor with its transactional id takes over: it cannot commit) and SIGKILLed at random
points; every input message must be in the read-committed output exactly once, and the
group's commits must end at the input's end.
"""

from __future__ import annotations

import random
import signal
import sys
import time
from collections import Counter
from pathlib import Path

from dafka import Consumer, LocalCluster, Producer, ReadCommittedConsumer
from tests.integration.cluster.cluster_procs import Proc, Processes

MEMBER = str(Path(__file__).with_name("eos_member.py"))
TOTAL = 400


def _member(procs: Processes, cluster: LocalCluster) -> Proc:
    argv = [sys.executable, MEMBER, "--tower", cluster.towers, "--input", "eos-in"]
    return procs.spawn(
        "member", [*argv, "--output", "eos-out", "--group", "g-eos", "--tid", "loop"]
    )


def _outputs(cluster: LocalCluster, want: int, timeout: float) -> list[bytes]:
    """The read-committed output once it holds ``want`` messages (and is quiet and at end)."""
    with ReadCommittedConsumer(
        ["eos-out"], towers=cluster.towers, beacon_interval=0.2, offset_reset="earliest"
    ) as reader:
        got: list[bytes] = []
        quiet = time.monotonic()
        deadline = time.monotonic() + timeout
        while True:
            records = reader.poll(0.1)
            now = time.monotonic()
            if records:
                got += [r.value for r in records if r.value]
                quiet = now
            if len(got) >= want and now - quiet > 1.5 and reader.at_end():
                return got
            assert now < deadline, f"read {len(got)} of {want} outputs"


def test_a_group_loop_outputs_every_message_once_across_kills_and_a_zombie(
    cluster: LocalCluster, procs: Processes
) -> None:
    with Producer(
        "eos-in", towers=cluster.towers, beacon_interval=0.2, name="eos-src", partitions=2
    ) as source:
        input_ends = dict.fromkeys(source.partitions, 0)
        for start in range(0, TOTAL, 50):  # batched RECORDs, cut by the member's polls
            futures = [source.send(b"%d" % i, key=b"%d" % i) for i in range(start, start + 50)]
            assert source.flush(30) == 0
            for future in futures:
                meta = future.result()
                input_ends[meta.partition] = max(input_ends[meta.partition], meta.offset + 1)

    zombie = _member(procs, cluster)
    zombie.wait_event("txn", lambda e: e["n"] >= 3)
    zombie.send_signal(signal.SIGUSR2)  # its next transaction is stuck: a zombie
    zombie.wait_event("stuck")
    done = len([e for e in zombie.events() if e["event"] == "txn"])
    successor = _member(procs, cluster)
    successor.wait_event("txn")  # it fenced the zombie and took over
    zombie.wait_event("fenced")  # its stuck transaction cannot commit
    assert len([e for e in zombie.events() if e["event"] == "txn"]) == done

    rng = random.Random(20)
    member = successor
    for _ in range(2):
        time.sleep(rng.uniform(0.0, 0.8))  # a random point of its work, not a wait for state
        member.kill()
        member = _member(procs, cluster)
        member.wait_event("started")

    got = [v for v in _outputs(cluster, TOTAL, timeout=120) if v.startswith(b"out-")]
    counts = Counter(got)
    assert {v for v, n in counts.items() if n > 1} == set()
    assert set(counts) == {b"out-%d" % i for i in range(TOTAL)}
    member.kill()

    with Consumer(
        towers=cluster.towers, beacon_interval=0.2, group_id="g-eos", enable_auto_commit=False
    ) as check:
        committed = check.committed()
    ends = {key: (c.offset, c.index) for key, c in committed.items() if c is not None}
    assert ends == {("eos-in", p): (end, 0) for p, end in input_ends.items()}
