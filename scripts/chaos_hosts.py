"""A bounded chaos soak across three hosts, with network partitions among its faults.

    nice -n 10 .venv/bin/python scripts/chaos_hosts.py [--minutes 3] [--seed 1]   # as root

The hosts are Linux network namespaces (``dafka.testing.Hosts``). Host ``a`` runs ``dafka
tower --bind '*'`` and a store, host ``b`` a store, host ``c`` ``--producers`` producers
(``tests/hosts/hosts_client.py``, ``--rate`` messages/s each, for the whole soak); a consumer
on ``a`` and one on ``c`` read every topic from the beginning. Everything is started with the
README's flags (``--tower A:5556``). Until the time is up, every 5-20 s one of:

* cut a host off (its link down both ways) for 2-20 s, then heal it;
* slow host ``c``'s link down for 5-15 s (0-100 ms each way, +-20 %, 0-3 % loss);
* SIGKILL the store on ``b`` and restart it on its data directory after 1-3 s.

At the end every producer must have had every message ACKed, both consumers must have
received every message of every producer exactly once and in order, and both stores must
hold every partition up to the same head (``dafka status`` from host a). Prints the faults,
the counts, lost / duplicated / reordered; exit 1 if a check failed. The loopback soak with
the other faults is ``scripts/chaos.py``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.cluster.cluster_procs import DAFKA, Proc, Processes  # noqa: E402

from dafka.testing import Hosts  # noqa: E402

CLIENT = ROOT / "tests" / "hosts" / "hosts_client.py"
STORE_READY = re.compile(r"ready \(writer")
TOWER_READY = re.compile(r"tower ready")


class Soak:
    def __init__(self, hosts: Hosts, procs: Processes, data: Path, rng: random.Random) -> None:
        self.hosts = hosts
        self.procs = procs
        self.data = data
        self.rng = rng
        self.towers = f"{hosts['a'].address}:5556"
        self.faults: dict[str, int] = {"cut": 0, "slow": 0, "store kill": 0}
        self.store_b: Proc | None = None

    def dafka(self, host: str, name: str, *args: str) -> Proc:
        argv = self.hosts[host].command([*DAFKA, *args, "--tower", self.towers])
        return self.procs.spawn(name, argv)

    def client(self, host: str, name: str, *args: str) -> Proc:
        argv = [sys.executable, str(CLIENT), *args, "--towers", self.towers]
        return self.procs.spawn(name, self.hosts[host].command(argv))

    def start_store(self, host: str) -> Proc:
        proc = self.dafka(host, f"store-{host}", "store", "--data", str(self.data / host))
        proc.wait_log(STORE_READY)
        return proc

    def fault(self) -> None:
        kind = self.rng.choice(["cut", "cut", "slow", "store kill"])
        self.faults[kind] += 1
        if kind == "cut":
            host, seconds = self.rng.choice("abc"), self.rng.uniform(2, 20)
            print(f"  cut host {host} off for {seconds:.1f}s", flush=True)
            self.hosts.cut(host)
            try:
                time.sleep(seconds)  # the fault's length
            finally:
                self.hosts.heal(host)
        elif kind == "slow":
            delay, loss, seconds = (
                self.rng.uniform(0, 100),
                self.rng.uniform(0, 3),
                self.rng.uniform(5, 15),
            )
            print(f"  host c's link +{delay:.0f} ms, {loss:.1f}% loss for {seconds:.1f}s")
            self.hosts.impair("c", delay, delay / 5, loss)
            try:
                time.sleep(seconds)
            finally:
                self.hosts.impair("c", 0)
        else:
            assert self.store_b is not None
            pause = self.rng.uniform(1, 3)
            print(f"  SIGKILL the store on b, restart after {pause:.1f}s", flush=True)
            self.store_b.send_signal(signal.SIGKILL)
            self.store_b.wait_exit()
            time.sleep(pause)
            self.store_b = self.start_store("b")


def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    count = int(args.rate * args.minutes * 60)
    with tempfile.TemporaryDirectory() as tmp, Hosts(["a", "b", "c"], impairable=["c"]) as hosts:
        print(f"hosts a {hosts['a'].address}, b {hosts['b'].address}, c {hosts['c'].address}")
        print(f"slowing with {hosts.impairment}")
        (Path(tmp) / "logs").mkdir()
        procs = Processes(Path(tmp) / "logs")
        soak = Soak(hosts, procs, Path(tmp) / "data", rng)
        try:
            procs.spawn("tower", hosts["a"].command([*DAFKA, "tower", "--bind", "*"])).wait_log(
                TOWER_READY
            )
            soak.start_store("a")
            soak.store_b = soak.start_store("b")
            topics = [f"chaos-{i}" for i in range(args.producers)]
            timeout = str(args.minutes * 60 + 300)
            readers = [
                soak.client(
                    host,
                    f"consume-{host}-{topic}",
                    "consume",
                    "--topic",
                    topic,
                    "--expect",
                    str(count),
                    "--timeout",
                    timeout,
                )
                for host in ("a", "c")
                for topic in topics
            ]
            for reader in readers:
                reader.wait_event("ready")
            writers = [
                soak.client(
                    "c",
                    f"produce-{topic}",
                    "produce",
                    "--topic",
                    topic,
                    "--count",
                    str(count),
                    "--rate",
                    str(args.rate),
                    "--timeout",
                    timeout,
                )
                for topic in topics
            ]
            end = time.monotonic() + args.minutes * 60
            while time.monotonic() < end:
                time.sleep(rng.uniform(5, 20))  # between faults: a soak's pacing, not a settle
                soak.fault()
            failed = []
            for writer in writers:
                done = writer.wait_event("done", timeout=600)
                if done["not_acked"]:
                    failed.append(f"{writer.name}: {done['not_acked']} not ACKed")
            lost = duplicated = reordered = 0
            for reader in readers:
                done = reader.wait_event("done", timeout=600)
                lost += done["missing"]
                duplicated += done["duplicates"]
                reordered += done["reordered"]
            status = soak.dafka("a", "status", "status", "--json")
            status.wait_exit(120)
            found = json.loads(status.out_path.read_text())
            for topic in topics:
                for partition in found["topics"][topic]["partitions"]:
                    heads = set(partition["stores"].values())
                    if len(partition["stores"]) != 2 or heads != {partition["head"]}:
                        failed.append(f"{topic}: stores not converged: {partition}")
            print(
                f"faults {soak.faults}; {args.producers} producer(s) x {count} messages, read on "
                f"2 hosts: lost {lost}, duplicated {duplicated}, reordered {reordered}"
            )
            if lost or duplicated or reordered:
                failed.append("a consumer missed, repeated or reordered messages")
            for line in failed:
                print(f"FAILED: {line}")
            return 1 if failed else 0
        finally:
            procs.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=50.0, help="messages/s per producer")
    sys.exit(run(parser.parse_args()))


if __name__ == "__main__":
    main()
