"""Fixtures of the multi-host tests: a cluster on three hosts made of network namespaces.

Host ``a`` runs the tower and a store, host ``b`` another store, host ``c`` the clients (the
dafka commands and ``hosts_client.py``), each started as the README says for a cluster
across machines: the tower with ``--bind '*'``, every other node with nothing but
``--tower A:5556`` (where a node listens and what it advertises are the defaults). Host
``c``'s link can be cut and slowed down (``dafka.testing.Hosts``).

Where namespaces cannot be made (not root, no ``ip``), every test here fails and says why:
these tests are the only proof that dafka works across machines, and a skip would hide
their absence.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dafka.testing import Host, Hosts, HostsError
from tests.integration.cluster.cluster_procs import DAFKA, Proc, Processes

CLIENT = Path(__file__).with_name("hosts_client.py")
TOWER_PORT = 5556
_TOWER_READY = re.compile(r"tower ready: beacons in on (tcp://\S+), out on (tcp://\S+)")
_STORE_READY = re.compile(r"ready \(writer (\S+), reader (\S+), ports \[(\d+), (\d+)\]\)")


@dataclass
class Cluster:
    """Three hosts, a tower and two stores running; processes started through ``procs``."""

    hosts: Hosts
    procs: Processes
    data: Path
    stores: dict[str, Proc]

    @property
    def towers(self) -> str:
        """``--tower`` of every node: the tower's address on host a."""
        return f"{self.hosts['a'].address}:{TOWER_PORT}"

    def dafka(self, host: str, name: str, *args: str, stdin: bool = False) -> Proc:
        """``dafka ARGS --tower A:5556`` on ``host`` (a process; output in files)."""
        argv = self.hosts[host].command([*DAFKA, *args, "--tower", self.towers])
        return self.procs.spawn(name, argv, stdin=stdin)

    def client(self, host: str, name: str, mode: str, topic: str, *args: str) -> Proc:
        """``hosts_client.py MODE`` on ``host``."""
        argv = [sys.executable, str(CLIENT), mode, "--towers", self.towers, "--topic", topic]
        return self.procs.spawn(name, self.hosts[host].command([*argv, *args]))

    def start_store(self, host: str) -> Proc:
        proc = self.dafka(host, f"store-{host}", "store", "--data", str(self.data / host))
        proc.wait_log(_STORE_READY)
        self.stores[host] = proc
        return proc

    def host(self, name: str) -> Host:
        return self.hosts[name]


def done_event(proc: Proc, timeout: float = 180.0) -> dict[str, Any]:
    """The ``done`` line of a ``hosts_client.py`` process, once it exited 0."""
    event = proc.wait_event("done", timeout=timeout)
    code = proc.wait_exit()
    assert code == 0, proc.tail()
    return event


def json_out(proc: Proc, timeout: float = 120.0) -> Any:
    """The JSON a ``dafka ... --json`` process printed, once it exited 0."""
    code = proc.wait_exit(timeout)
    assert code == 0, proc.tail()
    return json.loads(proc.out_path.read_text())


def converged(cluster: Cluster, host: str, topic: str, timeout: float = 90.0) -> Any:
    """``dafka status TOPIC --json`` from ``host`` once it shows both stores holding every
    partition of ``topic`` up to its head (asked again until then: the second store may
    still be fetching what the first one ACKed)."""
    deadline = time.monotonic() + timeout
    while True:
        found = json_out(cluster.dafka(host, f"status-{topic}-{host}", "status", topic, "--json"))
        partitions = found["topics"].get(topic, {}).get("partitions", [])
        if (
            len(found["stores"]) == 2
            and partitions
            and all(
                len(p["stores"]) == 2 and set(p["stores"].values()) == {p["head"]}
                for p in partitions
            )
        ):
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"the stores did not converge on {topic}: {found}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    try:
        hosts = Hosts(["a", "b", "c"], impairable=["c"])
    except HostsError as exc:  # said loudly: a failed test, never a silent skip
        pytest.fail(f"no multi-host tests on this machine: {exc}", pytrace=False)
    print(f"\nhosts: a {hosts['a'].address}, b {hosts['b'].address}, c {hosts['c'].address}")
    if hosts.impairment:
        print(f"slowing host c's link with {hosts.impairment}")
    root = tmp_path_factory.mktemp("hosts")
    (root / "logs").mkdir()
    procs = Processes(root / "logs")
    cluster = Cluster(hosts, procs, root / "data", {})
    try:
        tower = procs.spawn("tower", hosts["a"].command([*DAFKA, "tower", "--bind", "*"]))
        tower.wait_log(_TOWER_READY)
        cluster.start_store("a")
        cluster.start_store("b")
        yield cluster
    finally:
        procs.close()
        print(procs.describe())
        hosts.close()
