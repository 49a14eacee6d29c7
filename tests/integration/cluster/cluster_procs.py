"""Daemons and client processes of a real cluster on 127.0.0.1, for the cluster tests.

Every process writes its stdout and stderr to files under the test's ``tmp_path`` rather than
to pipes: a daemon that logs more than a pipe holds while nobody reads would block, and the
files are there to read when a test fails. Waiting is always for a condition (a log line, a
JSON event, an exit) with a deadline; :class:`Processes` kills whatever is still running at
teardown, so no test leaves a daemon behind.

Daemons run the real command line (``dafka tower`` / ``dafka store``) with the interpreter
running the tests; clients run ``cluster_client.py``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tests.integration.cluster.cluster_client import rss_kb

DAFKA = [
    sys.executable,
    "-c",
    "import sys; from dafka.cli import main; sys.exit(main(prog_name='dafka'))",
]
CLIENT = Path(__file__).with_name("cluster_client.py")
BEACON_INTERVAL = "0.2"
DEADLINE = 60.0
"""Seconds any condition may take: generous, the 2 cores are shared with other work."""

T = TypeVar("T")

_TOWER_READY = re.compile(r"tower ready: beacons in on (tcp://\S+), out on (tcp://\S+)")
_STORE_READY = re.compile(r"ready \(writer (\S+), reader (\S+), ports \[(\d+), (\d+)\]\)")


def wait_until(condition: Callable[[], T | None], what: str, timeout: float = DEADLINE) -> T:
    """Poll ``condition`` until it returns a value other than None/False; fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


class Proc:
    """One child process with its output in files."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        log_dir: Path,
        *,
        stdin: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = argv
        self.out_path = log_dir / f"{name}.out"
        self.err_path = log_dir / f"{name}.err"
        with self.out_path.open("ab") as out, self.err_path.open("ab") as err:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=None if env is None else {**os.environ, **env},
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def events(self) -> list[dict[str, Any]]:
        """The complete JSON lines printed so far."""
        text = self.out_path.read_text(errors="replace")
        return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]

    def last(self, event: str) -> dict[str, Any] | None:
        found = [e for e in self.events() if e["event"] == event]
        return found[-1] if found else None

    def require(self, event: str) -> dict[str, Any]:
        """The last ``event`` line, which must exist."""
        found = self.last(event)
        if found is None:
            raise AssertionError(f"{self.name} printed no {event!r}\n{self.tail()}")
        return found

    def wait_event(
        self,
        event: str,
        condition: Callable[[dict[str, Any]], bool] = lambda _e: True,
        timeout: float = DEADLINE,
    ) -> dict[str, Any]:
        """The first ``event`` line satisfying ``condition``; fails if the process dies first."""

        def check() -> dict[str, Any] | None:
            exited = not self.running()
            for e in self.events():
                if e["event"] == event and condition(e):
                    return e
            if exited:
                raise AssertionError(f"{self.name} exited before {event!r}\n{self.tail()}")
            return None

        return wait_until(check, f"{self.name}: {event}", timeout)

    def wait_log(self, pattern: re.Pattern[str], timeout: float = DEADLINE) -> re.Match[str]:
        def check() -> re.Match[str] | None:
            found = pattern.search(self.stderr())
            if found is None and not self.running():
                raise AssertionError(f"{self.name} exited without logging {pattern.pattern}")
            return found

        return wait_until(check, f"{self.name}: {pattern.pattern}", timeout)

    def send_line(self, line: str) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(line.encode() + b"\n")
        self.popen.stdin.flush()

    def send_signal(self, signum: int) -> None:
        self.popen.send_signal(signum)

    def wait_exit(self, timeout: float = DEADLINE) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.name} did not exit within {timeout}s\n{self.tail()}"
            ) from None

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Signal and wait for the exit code."""
        self.send_signal(signum)
        return self.wait_exit(timeout)

    def kill(self) -> None:
        if self.running():
            self.popen.kill()
        self.popen.wait()
        if self.popen.stdin is not None:
            self.popen.stdin.close()

    def rss_kb(self) -> int:
        return rss_kb(self.pid)

    def tail(self, lines: int = 15) -> str:
        text = self.stderr().splitlines()[-lines:] + self.out_path.read_text().splitlines()[-3:]
        return f"--- {self.name} (exit {self.popen.poll()}):\n" + "\n".join(text)


@dataclass(frozen=True)
class TowerProc:
    proc: Proc
    sub_endpoint: str
    pub_endpoint: str

    @property
    def spec(self) -> str:
        """``HOST:SUBPORT:PUBPORT`` as ``--tower`` takes it."""
        host, sub = self.sub_endpoint.removeprefix("tcp://").rsplit(":", 1)
        return f"{host}:{sub}:{self.pub_endpoint.rsplit(':', 1)[1]}"


@dataclass(frozen=True)
class StoreProc:
    proc: Proc
    data_dir: Path
    writer_id: str
    reader_id: str
    writer_port: int
    reader_port: int


class Processes:
    """Starts the cluster's processes; ``close()`` kills every one still running."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._all: list[Proc] = []
        self._names: dict[str, int] = {}

    def spawn(
        self,
        name: str,
        argv: list[str],
        *,
        stdin: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> Proc:
        count = self._names.get(name, 0)
        self._names[name] = count + 1
        proc = Proc(f"{name}.{count}" if count else name, argv, self.log_dir, stdin=stdin, env=env)
        self._all.append(proc)
        return proc

    def tower(self, name: str = "tower") -> TowerProc:
        """A ``dafka tower`` on ephemeral loopback ports, read from its ready line."""
        proc = self.spawn(
            name, [*DAFKA, "tower", "--sub", "tcp://127.0.0.1:*", "--pub", "tcp://127.0.0.1:*"]
        )
        found = proc.wait_log(_TOWER_READY)
        return TowerProc(proc, found.group(1), found.group(2))

    def store(
        self,
        data_dir: Path,
        towers: list[TowerProc],
        *,
        name: str = "store",
        fsync: str = "batch",
        extra: tuple[str, ...] = (),
    ) -> StoreProc:
        """A ``dafka store`` on ``data_dir`` (``extra``: more of its options); returns once it
        logged that it is ready."""
        argv = [*DAFKA, "store", "--data", str(data_dir), "--fsync", fsync, *extra]
        for tower in towers:
            argv += ["--tower", tower.spec]
        argv += [
            "--advertise",
            "127.0.0.1",
            "--bind",
            "127.0.0.1",
            "--beacon-interval",
            BEACON_INTERVAL,
        ]
        proc = self.spawn(name, argv)
        found = proc.wait_log(_STORE_READY)
        return StoreProc(
            proc, data_dir, found.group(1), found.group(2), int(found.group(3)), int(found.group(4))
        )

    def client(
        self,
        name: str,
        mode: str,
        towers: list[TowerProc],
        topic: str,
        *args: str,
        env: Mapping[str, str] | None = None,
    ) -> Proc:
        """A ``cluster_client.py`` process (``env``: variables added to this one's); wait for
        its ``ready`` event before relying on it."""
        argv = [
            sys.executable,
            str(CLIENT),
            mode,
            "--topic",
            topic,
            "--beacon-interval",
            BEACON_INTERVAL,
        ]
        for tower in towers:
            argv += ["--tower", tower.spec]
        stdin = "--pause-at" in args or "--wait-line" in args
        return self.spawn(name, [*argv, *args], stdin=stdin, env=env)

    def produce_named(
        self, towers: list[TowerProc], topic: str, name: str, tag: str, records: int, *args: str
    ) -> Proc:
        """Run ``tag`` of the named producer ``name`` (``cluster_client.py produce-named``,
        the process named ``tag``): ``records`` records, their contents naming the run."""
        args = ("--name", name, "--tag", tag, "--records", str(records), *args)
        return self.client(tag, "produce-named", towers, topic, *args)

    def describe(self) -> str:
        """The tails of every process's output, for failure messages."""
        return "\n".join(p.tail() for p in self._all)

    def close(self) -> None:
        for proc in self._all:
            proc.kill()


__all__ = ["DEADLINE", "Proc", "Processes", "StoreProc", "TowerProc", "wait_until"]
