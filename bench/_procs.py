"""Helpers for benchmarks that run a cluster as separate processes.

A tower and stores run as real ``dafka tower`` / ``dafka store`` processes (what an operator
runs), so the benchmark measures the same code paths, GIL-free from the clients. Clients
run in ``multiprocessing`` children ("spawn": no inherited ZeroMQ context).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType

from dafka.server import free_port_pair  # one cursor for every cluster of this user

DAFKA = os.environ.get("DAFKA_BENCH_DAFKA") or str(Path(sys.executable).with_name("dafka"))
"""The ``dafka`` command run for the tower and the stores (``DAFKA_BENCH_DAFKA`` overrides it,
e.g. to measure another checkout or a wrapper that changes interpreter settings)."""


class ProcessCluster:
    """A tower and ``stores`` stores, each in its own process, on loopback.

    ``with ProcessCluster(fsync="batch") as c: c.transport`` - the clients' transport config
    is built from ``c.tower`` (``127.0.0.1:PORT``).
    """

    def __init__(
        self, *, stores: int = 1, fsync: str = "batch", beacon_interval: float = 1.0
    ) -> None:
        self.stores = stores
        self.fsync = fsync
        self.beacon_interval = beacon_interval
        self.port = 0
        self.pids: dict[str, int] = {}
        self._procs: list[subprocess.Popen[bytes]] = []
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def tower(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="dafka-bench-cluster-")
        self.port = free_port_pair()
        output = None if os.environ.get("DAFKA_BENCH_VERBOSE") else subprocess.DEVNULL
        tower = subprocess.Popen(
            [
                DAFKA,
                "tower",
                "--sub",
                f"tcp://127.0.0.1:{self.port}",
                "--pub",
                f"tcp://127.0.0.1:{self.port + 1}",
            ],
            stdout=output,
            stderr=output,
        )
        self._procs.append(tower)
        self.pids["tower"] = tower.pid
        for i in range(self.stores):
            store = subprocess.Popen(
                [
                    DAFKA,
                    "store",
                    "--data",
                    str(Path(self._tmp.name) / f"store-{i}"),
                    "--tower",
                    self.tower,
                    "--advertise",
                    "127.0.0.1",
                    "--bind",
                    "127.0.0.1",
                    "--fsync",
                    self.fsync,
                    "--beacon-interval",
                    str(self.beacon_interval),
                ],
                stdout=output,
                stderr=output,
            )
            self._procs.append(store)
            self.pids[f"store-{i}"] = store.pid

    def stop(self) -> None:
        stop_processes(self._procs)
        self._procs.clear()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> ProcessCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def stop_processes(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each process still running, the last started first, then wait for each (15 s,
    then SIGKILL): the stores leave before the tower they beacon to."""
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in reversed(procs):
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process (all its threads) used so far, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The value below which ``fraction`` of the (sorted) values fall (nearest rank)."""
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


__all__ = ["DAFKA", "ProcessCluster", "cpu_seconds", "free_port_pair", "percentile"]
