"""The chaos soak's consumer-group operation (issue 20): members join, leave and die while a
producer of 6 partitions runs; at the end every message must have been read by the group.

    nice -n 10 .venv/bin/python scripts/chaos_groups.py [--minutes 2] [--seed 1]

runs it alone (a tower and two stores, no other fault): the 2-minute version of
``tests/integration/groups``' join/leave loop; ``scripts/chaos.py`` runs it among its
other faults.

A producer (``tests/integration/groups/group_client.py produce``) publishes the values
0, 1, ... of its own topic over 6 partitions for the whole soak; group members
(``group_client.py member``, one process each, ``session_timeout_ms`` 2,000) come and go on
a timer of their own: a new member joins, a member leaves (SIGTERM: ``close()`` hands its
partitions over after committing them) or dies (SIGKILL), at least one member always left.
:meth:`GroupMembers.finish` waits for the producer, keeps one member reading until every
message was read, and counts: lost (never read: must be 0), read twice by members that
died (their uncommitted tail: expected) and read twice otherwise (a handover whose commit
failed while a store or the tower was down: counted, not a failure).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.cluster.cluster_procs import Proc, Processes  # noqa: E402

CLIENT = ROOT / "tests" / "integration" / "groups" / "group_client.py"
TOPIC = "chaos-group"


class GroupMembers:
    """Joins, leaves and deaths of a consumer group's members, and the final check."""

    def __init__(
        self, procs: Processes, tower_spec: str, rng: random.Random, seconds: float
    ) -> None:
        self._procs = procs
        self._tower = tower_spec
        self._rng = rng
        self.records = int(200 * seconds)
        self._producer = self._spawn(
            "group-producer", "produce", "--records", str(self.records), "--rate", "200"
        )
        self._members: list[Proc] = []
        self._dead: list[Proc] = []
        self._left: list[Proc] = []
        self.joins = self.leaves = self.deaths = 0
        self.failures: list[str] = []
        self._join()

    def _spawn(self, name: str, mode: str, *args: str) -> Proc:
        argv = [
            sys.executable,
            str(CLIENT),
            mode,
            "--tower",
            self._tower,
            "--topic",
            TOPIC,
            "--beacon-interval",
            "1.0",
            *args,
        ]
        return self._procs.spawn(name, argv)

    def _join(self) -> None:
        member = self._spawn("group-member", "member", "--group", "chaos", "--session-ms", "2000")
        member.wait_event("ready", timeout=60)
        self._members.append(member)
        self.joins += 1

    def run(self) -> None:
        """One operation: join (up to 4 members), leave or die (never the last member)."""
        roll = self._rng.random()
        if (roll < 0.4 and len(self._members) < 4) or len(self._members) < 2:
            self._join()
            return
        member = self._members.pop(self._rng.randrange(len(self._members)))
        if roll < 0.7:
            code = member.stop(timeout=60)
            if code != 0:
                self.failures.append(f"{member.name} exited {code} on SIGTERM")
            self._left.append(member)
            self.leaves += 1
        else:
            member.kill()
            self._dead.append(member)
            self.deaths += 1

    def report(self) -> str:
        return (
            f"{self.joins} joins, {self.leaves} leaves, {self.deaths} deaths, "
            f"{len(self._members)} members now"
        )

    def finish(self) -> dict[str, int]:
        """Wait for the producer and for the group to read everything; count."""
        code = self._producer.wait_exit(600)
        if code != 0:
            self.failures.append(f"the group's producer exited {code}")
        everyone = [*self._members, *self._left, *self._dead]
        deadline = time.monotonic() + 300
        counts: Counter[int] = Counter()
        while time.monotonic() < deadline:
            counts = Counter(v for m in everyone for v in _values(m))
            if len(counts) >= self.records:
                break
            time.sleep(1.0)
        for member in self._members:
            member.stop(timeout=60)
        died = set().union(*(set(_values(m)) for m in self._dead)) if self._dead else set()
        twice = {v for v, n in counts.items() if n > 1}
        lost = self.records - len(set(counts) & set(range(self.records)))
        if lost:
            self.failures.append(f"{lost} of {self.records} messages never read by the group")
        return {
            "records": self.records,
            "lost": lost,
            "twice_dead_tail": len(twice & died),
            "twice_other": len(twice - died),
        }


def _values(member: Proc) -> list[int]:
    events = member.events()
    return [int(r[3]) for e in events if e["event"] == "records" for r in e["r"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    seconds = args.minutes * 60
    with tempfile.TemporaryDirectory(prefix="dafka-groups-") as tmp:
        logs = Path(tmp) / "logs"
        logs.mkdir()
        procs = Processes(logs)
        try:
            tower = procs.tower()
            for i in range(2):
                procs.store(Path(tmp) / f"store-{i}", [tower], fsync="ms:5")
            group = GroupMembers(procs, tower.spec, rng, seconds)
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                time.sleep(rng.uniform(3, 8))
                group.run()
                print(f"{time.strftime('%H:%M:%S')} group: {group.report()}", flush=True)
            counts = group.finish()
        finally:
            procs.close()
    print(
        f"group: {group.report()}: {counts['records']} messages, {counts['lost']} lost, read "
        f"twice: {counts['twice_dead_tail']} from dead members' uncommitted tails, "
        f"{counts['twice_other']} else"
    )
    for failure in group.failures:
        print(f"FAILED: {failure}")
    print("OK" if not group.failures else "FAILED")
    return 0 if not group.failures else 1


__all__ = ["GroupMembers"]

if __name__ == "__main__":
    sys.exit(main())
