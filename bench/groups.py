"""Consumer groups in one run: join-to-first-record, crash-to-takeover, and a 3-member
group's throughput against one consumer (docs/groups.md).

    .venv/bin/python bench/groups.py [--messages 300000] [--beacon-interval 1.0] [--rounds 3]

A ``LocalCluster`` (a tower and one store, each its own process) with the default beacon
interval (1 s: ``session_timeout_ms`` 2,000, ``heartbeat_interval_ms`` 500), a producer of
6 partitions and group members, each its own process (``tests/integration/groups/
group_client.py``, default settings):

* **join**: two members read a live stream (1,000 msg/s); a third starts. Time from its
  ``Consumer(...)`` call to its first record (the aim: 1 s), and to the others' revoke,
  its constructor's return and its ``on_assign``.
* **takeover**: one member of three is SIGKILLed. Time from the kill to a survivor's
  first ``on_assign`` of its partitions, to the last (every one of them owned again) and to
  the first record of them read again (the aim: 2 beacon intervals + 1 s).
* **throughput**: a group of one and a group of three (``poll_columns``, each member its
  own process) share 6 partitions; then a producer publishes ``--messages`` messages flat
  out: messages/s from the producer's start to the last message read by the group. (A
  group joining a topic that is already stored reads it while its members come and go, a
  rebalance per join; this measures the settled group.)

Each scenario runs ``--rounds`` times; the figures printed are per round.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dafka import LocalCluster

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "tests" / "integration" / "groups" / "group_client.py"


class Child:
    """A group_client.py process with its JSON lines in a file."""

    def __init__(self, log_dir: Path, name: str, argv: list[str]) -> None:
        self.out = log_dir / f"{name}.out"
        self.err = log_dir / f"{name}.err"
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.popen = subprocess.Popen(
                [sys.executable, str(CLIENT), *argv], stdout=out, stderr=err
            )

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        lines = self.out.read_text(errors="replace").splitlines(keepends=True)
        found = [json.loads(line) for line in lines if line.endswith("\n")]
        return [e for e in found if kind is None or e["event"] == kind]

    def wait(self, kind: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            found = self.events(kind)
            if found:
                return found[0]
            if self.popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"no {kind!r} from {self.out.name}: {self.err.read_text()[-2000:]}"
                )
            time.sleep(0.02)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()


def _until(condition: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _owned(child: Child) -> set[str]:
    owned: set[str] = set()
    for event in child.events():
        if event["event"] == "assigned":
            owned |= set(event["partitions"])
        elif event["event"] in ("revoked", "lost"):
            owned -= set(event["partitions"])
    return owned


def _count(child: Child) -> dict[str, Any]:
    counts = child.events("count")
    return counts[-1] if counts else {"n": {}, "first": 0.0, "last": 0.0}


class Bench:
    def __init__(self, cluster: LocalCluster, log_dir: Path, beacon: float) -> None:
        self.cluster = cluster
        self.log_dir = log_dir
        self.beacon = beacon
        self.children: list[Child] = []
        self.serial = 0

    def spawn(self, mode: str, topic: str, *args: str) -> Child:
        self.serial += 1
        argv = [mode, "--topic", topic, "--beacon-interval", str(self.beacon)]
        for tower in self.cluster.towers.split(","):
            host, port = tower.rsplit(":", 1)
            argv += ["--tower", f"{host}:{port}:{int(port) + 1}"]
        child = Child(self.log_dir, f"{mode}{self.serial}", [*argv, *args])
        self.children.append(child)
        return child

    def member(self, topic: str, group: str, *args: str) -> Child:
        return self.spawn(
            "member", topic, "--group", group, "--quiet", "--commit-ms", "1000", *args
        )

    def close(self) -> None:
        for child in self.children:
            child.kill()

    def join(self, round_: int) -> tuple[float, float, float, float]:
        topic = f"join{round_}"
        producer = self.spawn("produce", topic, "--records", "1000000", "--rate", "1000")
        producer.wait("ready")
        first = [self.member(topic, "g") for _ in range(2)]
        _until(lambda: all(len(_owned(m)) == 3 for m in first), "2 members, 3 partitions each")
        _until(lambda: all(_count(m)["last"] for m in first), "both reading")
        joiner = self.member(topic, "g")
        start = joiner.wait("start")["t"]
        _until(lambda: _count(joiner)["first"], "the joiner's first record")
        revoked = min(
            (e["t"] for m in first for e in m.events("revoked") if e["t"] > start),
            default=float("nan"),
        )
        ready = joiner.wait("ready")["t"]
        assigned = joiner.wait("assigned")["t"]
        for child in [joiner, *first, producer]:
            child.kill()
        return _count(joiner)["first"] - start, revoked - start, ready - start, assigned - start

    def takeover(self, round_: int) -> tuple[float, float, float]:
        topic = f"crash{round_}"
        producer = self.spawn("produce", topic, "--records", "1000000", "--rate", "1000")
        producer.wait("ready")
        members = [self.member(topic, "g") for _ in range(3)]
        _until(lambda: all(len(_owned(m)) == 2 for m in members), "2 partitions each")
        victim, survivors = members[2], members[:2]
        orphans = _owned(victim)
        time.sleep(0.3)
        victim.kill()
        killed = time.time()
        assigned = _until(
            lambda: min(
                (
                    e["t"]
                    for m in survivors
                    for e in m.events("assigned")
                    if e["t"] > killed and orphans & set(e["partitions"])
                ),
                default=0.0,
            ),
            "a takeover",
        )

        def all_taken() -> float:
            taken = [
                (e["t"], set(e["partitions"]) & orphans)
                for m in survivors
                for e in m.events("assigned")
                if e["t"] > killed
            ]
            if set().union(*(keys for _, keys in taken)) != orphans:
                return 0.0
            return float(max(t for t, keys in taken if keys))

        every = _until(all_taken, "every orphan taken over")

        def reread() -> float:
            for m in survivors:
                c = _count(m)
                if orphans & set(c["n"]) and c["last"] > assigned:
                    return float(c["last"])
            return 0.0

        read = _until(reread, "the orphans read again")
        for child in [*members, producer]:
            child.kill()
        return assigned - killed, every - killed, read - killed

    def throughput(self, round_: int, messages: int) -> tuple[float, float]:
        """Messages/s of a settled group of one and of three, live: the members first share
        the partitions of a first small run, then the producer (same name: it resumes)
        publishes ``messages`` flat out; from its start to the last message read."""
        out = []
        for size in (1, 3):
            topic = f"tput{round_}-{size}"
            name = f"t{round_}-{size}"
            first = self.spawn("produce", topic, "--records", "600", "--name", name)
            first.wait("done")
            members = [self.member(topic, f"tput{round_}-{size}") for _ in range(size)]

            def total(ms: list[Child] = members) -> int:
                return sum(sum(_count(m)["n"].values()) for m in ms)

            _until(lambda ms=members: all(len(_owned(m)) == 6 // len(ms) for m in ms), "shares")
            _until(lambda ms=members: total(ms) >= 600, "the first run read")
            burst = self.spawn(
                "produce", topic, "--records", str(messages), "--rate", "0", "--name", name
            )
            start = burst.wait("ready")["t"]
            _until(lambda ms=members: total(ms) >= 600 + messages, "the burst read", 600)
            last = max(_count(m)["last"] for m in members)
            out.append(messages / (last - start))
            for child in [*members, first, burst]:
                child.kill()
        return out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--beacon-interval", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip", default="", help="comma list of join,takeover,throughput")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    with (
        tempfile.TemporaryDirectory() as tmp,
        LocalCluster(Path(tmp) / "data", stores=1, beacon_interval=args.beacon_interval) as cluster,
    ):
        log_dir = Path(tmp) / "logs"
        log_dir.mkdir()
        bench = Bench(cluster, log_dir, args.beacon_interval)
        try:
            print(f"beacon interval {args.beacon_interval} s (session timeout 2 intervals)")
            for r in range(args.rounds):
                if "join" not in skip:
                    first, revoke, ready, assigned = bench.join(r)
                    print(
                        f"join {r}: first record {first:.2f} s after Consumer(), the others' "
                        f"revoke at {revoke:.2f} s (Consumer() returned at {ready:.2f} s, "
                        f"on_assign at {assigned:.2f} s)"
                    )
                if "takeover" not in skip:
                    assigned, every, read = bench.takeover(r)
                    print(
                        f"takeover {r}: on_assign {assigned:.2f} s after the SIGKILL (of all "
                        f"its partitions: {every:.2f} s), its partitions read again at "
                        f"{read:.2f} s"
                    )
                if "throughput" not in skip:
                    one, three = bench.throughput(r, args.messages)
                    print(
                        f"throughput {r}: {args.messages:,} messages published flat out and "
                        f"read live: a group of 1 {one:,.0f} msg/s, of 3 {three:,.0f} msg/s "
                        f"(x{three / one:.2f})"
                    )
        finally:
            bench.close()


if __name__ == "__main__":
    main()
