"""A tower and stores, each in its own supervised process, on loopback (``dafka up``).

Why processes: the nodes of one Python process share one GIL, so a tower and two stores in
one process reached 11k records/s where the same nodes as separate processes do 220k. Each
member runs the real command line (``python -m dafka tower`` / ``store``), exactly what an
operator runs by hand.

The supervisor (a thread of the parent) reads every member's stderr line by line: it learns
where the member listens from its ready line, keeps the last lines for error messages, and
hands each line to ``echo`` (``dafka up`` prints them, prefixed with the member's name). A
member that exits while the cluster runs is logged and restarted after a back-off (0.5 s,
doubling up to 10 s while it keeps dying young); a store comes back with the same data
directory, hence the same node ids, so peers see a refresh rather than a new node.

A member that cannot start is not restarted forever: after :data:`GIVE_UP_AFTER` deaths in a
row each within :data:`YOUNG` seconds of its start and before its ready line (a data
directory it cannot open, a port taken for good, a disk that fails its recovery; deaths
:meth:`LocalCluster.kill` asked for do not count, nor does a crash after the member was
ready - it started, and libzmq's abort that a stranger can set off on a plaintext node would
otherwise end the whole cluster after five) the cluster gives up on it: it logs the member's
last lines at ERROR, keeps it down, sets :attr:`LocalCluster.failure` and calls
``on_failure`` with it - ``dafka up`` passes the process's failure board there, so it stops
the rest and exits 1 with the cause instead of crash-looping a member unseen
(docs/deploy.md). ``dafka store --restart-on-crash`` (:mod:`dafka.server._supervise`) uses
the same back-off.

Members run in their own session, so a Ctrl-C in the terminal reaches only the supervisor,
which then stops them in order (stores first, so that they flush, then the tower). On Linux
each member also gets SIGTERM if the supervisor dies without stopping them.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import logging
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dafka.config import SETTINGS
from dafka.errors import ConfigError, NodeFailedError
from dafka.lifecycle import Running
from dafka.server._ports import ClusterError, free_port_pair
from dafka.transport.config import TransportConfig

log = logging.getLogger("dafka.cluster")

_TOWER_READY = re.compile(r"tower ready: beacons in on (tcp://\S+), out on (tcp://\S+)")
_STORE_READY = re.compile(r"ready \(writer (\S+), reader (\S+), ports \[(\d+), (\d+)\]\)")
BACKOFF_FIRST = 0.5
"""Seconds before the first restart of a member (or a supervised daemon) that died."""
BACKOFF_MAX = 10.0
YOUNG = 10.0
"""A member that dies sooner than this after its start doubles the next back-off."""
GIVE_UP_AFTER = 5
"""Young deaths in a row after which :class:`LocalCluster` stops restarting a member."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: ask the kernel to SIGTERM this child when its parent dies (PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)


@dataclass
class Member:
    """One supervised process: the tower or a store."""

    name: str
    argv: list[str]
    ready_pattern: re.Pattern[str]
    data_dir: Path | None = None
    popen: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restarts: int = 0
    backoff: float = BACKOFF_FIRST
    restart_at: float | None = None
    young_deaths: int = 0
    """Deaths in a row within :data:`YOUNG` seconds of a start, each before the member was
    ready (the kills asked for aside)."""
    killed: bool = False
    """:meth:`LocalCluster.kill` ended it: its death is not the member's own."""
    given_up: bool = False
    ready_match: re.Match[str] | None = None
    lines: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=50))
    ready: threading.Event = field(default_factory=threading.Event)
    reader: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def ports(self) -> tuple[int, ...]:
        """Where it listens: (XSUB, XPUB) for the tower, (writer, reader) for a store."""
        found = self.ready_match
        if found is None:
            return ()
        if self.data_dir is None:
            return tuple(int(e.rsplit(":", 1)[1]) for e in found.groups())
        return (int(found.group(3)), int(found.group(4)))

    def tail(self) -> str:
        return "\n".join(self.lines)


def _store_args(settings: Mapping[str, object]) -> list[str]:
    """``dafka store`` flags for settings given by config key (``store/retention/bytes``):
    each checked by its key's parser here, so a bad value fails the cluster's constructor
    rather than every store process."""
    args: list[str] = []
    for key, value in settings.items():
        setting = SETTINGS.get(key)
        if setting is None or not key.startswith("store/") or key == "store/db":
            raise ConfigError(f"store_settings: {key!r} is not a store setting")
        try:
            args += [setting.flag, str(setting.kind.parse(value))]
        except ConfigError as exc:
            raise ConfigError(f"store_settings: {key}: {exc}") from None
    return args


class LocalCluster(Running):
    """``with LocalCluster(stores=2) as cluster: Producer("t", towers=cluster.towers)``.

    ``data_dir`` defaults to a temporary directory removed at :meth:`stop`; ``port`` (the
    tower's XSUB, its XPUB is ``port + 1``) defaults to a free pair. ``echo`` receives every
    line the members write (``"store-0 | ..."``); by default they are only kept for errors.
    ``metrics_port``: the tower serves /metrics there, store ``i`` on ``metrics_port + 1 + i``.
    ``store_settings``: more settings of every store by config key (``{"store/retention/bytes":
    1 << 30}``), passed as the keys' ``dafka store`` flags.
    ``max_message_bytes``: the stores' limit (None: as ``dafka store`` reads it, 64 MiB by
    default); give clients the same.
    ``key``, ``authorized_keys``, ``tower_key``: a secured cluster (docs/security.md): the
    tower and every store run with this secret certificate and admit the keys of the
    directory; clients give their own ``key=`` and ``authorized_keys=``. ``acl``: the
    stores enforce that permissions file (the key they run with, the tower's, must be among
    its ``stores``; docs/security.md, "Permissions").
    ``on_failure``: called (from the supervising thread) with the error when the cluster
    gives up restarting a member that keeps dying young; also kept in :attr:`failure`.
    """

    def __init__(
        self,
        data_dir: Path | str | None = None,
        *,
        stores: int = 1,
        host: str = "127.0.0.1",
        port: int | None = None,
        fsync: str = "ms:5",
        max_message_bytes: int | None = None,
        beacon_interval: float = 1.0,
        ready_timeout: float = 60.0,
        echo: Callable[[str], None] | None = None,
        python: str = sys.executable,
        log_format: str = "text",
        metrics_port: int = 0,
        store_settings: Mapping[str, object] | None = None,
        key: str | Path | None = None,
        authorized_keys: str | Path | None = None,
        tower_key: str | Path | None = None,
        acl: str | Path | None = None,
        on_failure: Callable[[NodeFailedError], None] | None = None,
    ) -> None:
        if stores < 0:
            raise ClusterError(f"stores must be >= 0, got {stores}")
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._store_count = stores
        self.host = host
        self._fixed_port = port
        self.port = port or 0
        self._fsync = fsync
        self._max_message_bytes = max_message_bytes
        self._beacon_interval = beacon_interval
        self._ready_timeout = ready_timeout
        self._echo = echo
        self._python = python
        self._log_format = log_format
        self._metrics_port = metrics_port
        self._store_args = _store_args(store_settings or {})
        self._security_args: list[str] = []
        for flag, value in (
            ("--key", key),
            ("--authorized-keys", authorized_keys),
            ("--tower-key", tower_key),
            ("--acl", acl),
        ):
            if value not in (None, ""):
                self._security_args += [flag, str(value)]
        self.tower: Member | None = None
        self.stores: list[Member] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None
        self._on_failure = on_failure
        self.failure: NodeFailedError | None = None
        """Set when the cluster gave up restarting a member (see the module's docstring)."""

    # -- what clients need -----------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            raise ClusterError("the cluster has not started")
        return self._data_dir

    @property
    def towers(self) -> str:
        """``host:port`` of the tower, as clients and ``--tower`` take it."""
        return f"{self.host}:{self.port}"

    @property
    def transport(self) -> TransportConfig:
        """Transport settings of a node joining this cluster."""
        return TransportConfig.for_towers(
            self.towers,
            advertised_host=self.host,
            bind_host=self.host,
            beacon_interval=self._beacon_interval,
        )

    @property
    def members(self) -> list[Member]:
        return ([self.tower] if self.tower else []) + list(self.stores)

    def member(self, name: str) -> Member:
        for member in self.members:
            if member.name == name:
                return member
        raise KeyError(name)

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> None:
        if self._data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="dafka-cluster-")
            self._data_dir = Path(self._tmp.name)
        self._data_dir.mkdir(parents=True, exist_ok=True)
        self._stopping.clear()
        try:
            self._start_tower()
            for i in range(self._store_count):
                self.stores.append(self._store_member(i))
            for store in self.stores:
                self._spawn(store)
            for store in self.stores:
                self._await_ready(store)
        except BaseException:
            self.stop()
            raise
        self._supervisor = threading.Thread(
            target=self._supervise, name="dafka-cluster-supervisor", daemon=True
        )
        self._supervisor.start()

    def stop(self, timeout: float = 15.0) -> None:
        """Stop every member (SIGTERM, stores first so that they flush; SIGKILL after
        ``timeout``)."""
        self._stopping.set()
        if self._supervisor is not None:
            self._supervisor.join()
            self._supervisor = None
        for group in (self.stores, [self.tower] if self.tower else []):
            for member in group:
                if member.running and member.popen is not None:
                    member.popen.send_signal(signal.SIGTERM)
            for member in group:
                if member.popen is None:
                    continue
                try:
                    member.popen.wait(timeout)
                except subprocess.TimeoutExpired:
                    log.warning("%s did not stop within %ss: killed", member.name, timeout)
                    member.popen.kill()
                    member.popen.wait()
        self.stores.clear()
        self.tower = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
            self._data_dir = None

    def kill(self, name: str, signum: int = signal.SIGKILL) -> None:
        """Send ``signum`` to a member (tests, chaos); the supervisor restarts it."""
        member = self.member(name)
        if member.popen is not None and member.running:
            if signum not in (signal.SIGSTOP, signal.SIGCONT):
                member.killed = True
            member.popen.send_signal(signum)

    def wait_restarted(self, name: str, restarts: int, timeout: float = 60.0) -> Member:
        """Wait until ``name`` was restarted ``restarts`` times in all and is ready again."""
        member = self.member(name)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                done = member.restarts >= restarts and member.ready.is_set()
            if done:
                return member
            if member.given_up:
                raise ClusterError(str(self.failure))
            time.sleep(0.05)
        raise ClusterError(f"{name} was not restarted and ready within {timeout}s\n{member.tail()}")

    # -- members ---------------------------------------------------------------------------

    def _start_tower(self) -> None:
        attempts = 1 if self._fixed_port else 5
        for attempt in range(attempts):
            if not self._fixed_port:
                self.port = free_port_pair(self.host)
            tower = Member(
                "tower",
                [
                    self._python,
                    "-m",
                    "dafka",
                    "tower",
                    "--sub",
                    f"tcp://{self.host}:{self.port}",
                    "--pub",
                    f"tcp://{self.host}:{self.port + 1}",
                    *self._common_args(0),
                ],
                _TOWER_READY,
            )
            self.tower = tower
            self._spawn(tower)
            try:
                self._await_ready(tower)
                return
            except ClusterError:
                if attempt == attempts - 1:  # another process took the free pair: retry
                    raise

    def _store_member(self, index: int) -> Member:
        data = self.data_dir / f"store-{index}"
        argv = [
            self._python,
            "-m",
            "dafka",
            "store",
            "--data",
            str(data),
            "--tower",
            self.towers,
            "--advertise",
            self.host,
            "--bind",
            self.host,
            "--fsync",
            self._fsync,
            "--beacon-interval",
            str(self._beacon_interval),
            *self._store_args,
            *self._common_args(1 + index),
        ]
        if self._max_message_bytes is not None:
            argv += ["--max-message-bytes", str(self._max_message_bytes)]
        return Member(f"store-{index}", argv, _STORE_READY, data_dir=data)

    def _common_args(self, offset: int) -> list[str]:
        """Log format, and the metrics port: ``metrics_port`` for the tower, the next ports
        for the stores in order."""
        args = ["--log-format", self._log_format, *self._security_args]
        if self._metrics_port:
            args += ["--metrics-port", str(self._metrics_port + offset)]
        return args

    def _spawn(self, member: Member) -> None:
        member.ready.clear()
        member.ready_match = None
        member.started_at = time.monotonic()
        member.restart_at = None
        member.killed = False
        member.popen = subprocess.Popen(
            member.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
        )
        member.reader = threading.Thread(
            target=self._read,
            args=(member, member.popen),
            name=f"dafka-{member.name}-log",
            daemon=True,
        )
        member.reader.start()

    def _read(self, member: Member, popen: subprocess.Popen[bytes]) -> None:
        """Reader thread of one member's stderr, until the member closes it."""
        assert popen.stderr is not None
        for raw in popen.stderr:
            line = raw.decode(errors="replace").rstrip()
            member.lines.append(line)
            if not member.ready.is_set():
                found = member.ready_pattern.search(line)
                if found is not None:
                    member.ready_match = found
                    member.ready.set()
            if self._echo is not None:
                self._echo(f"{member.name} | {line}")
        popen.stderr.close()

    def _await_ready(self, member: Member) -> None:
        deadline = time.monotonic() + self._ready_timeout
        while not member.ready.wait(0.05):
            if member.popen is not None and member.popen.poll() is not None:
                if member.reader is not None:  # its last lines explain why
                    member.reader.join(5.0)
                raise ClusterError(
                    f"{member.name} exited with code {member.popen.returncode} before it was "
                    f"ready:\n{member.tail()}"
                )
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{member.name} not ready within {self._ready_timeout}s:\n{member.tail()}"
                )

    def _supervise(self) -> None:
        """Restart members that exit while the cluster runs."""
        while not self._stopping.wait(0.1):
            now = time.monotonic()
            for member in self.members:
                popen = member.popen
                if popen is None or member.given_up or popen.poll() is None:
                    continue
                if member.restart_at is None:
                    lived = now - member.started_at
                    young = not member.killed and lived < YOUNG
                    if not young:
                        member.backoff = BACKOFF_FIRST
                    elif member.restarts:
                        member.backoff = min(BACKOFF_MAX, member.backoff * 2)
                    # a crash after the ready line (while serving) is no failed start
                    failed_start = young and not member.ready.is_set()
                    member.young_deaths = member.young_deaths + 1 if failed_start else 0
                    if member.young_deaths >= GIVE_UP_AFTER:
                        self._give_up(member, lived)
                        continue
                    member.restart_at = now + member.backoff
                    log.warning(
                        "%s (pid %s) exited with code %s; restarting in %.1fs",
                        member.name,
                        popen.pid,
                        popen.returncode,
                        member.backoff,
                    )
                elif now >= member.restart_at:
                    with self._lock:
                        member.restarts += 1
                        self._spawn(member)
                    log.warning(
                        "%s restarted (pid %s, restart %d)",
                        member.name,
                        member.pid,
                        member.restarts,
                    )

    def _give_up(self, member: Member, lived: float) -> None:
        """Keep ``member`` down for good: it died young :data:`GIVE_UP_AFTER` times in a row."""
        assert member.popen is not None
        error = NodeFailedError(
            f"{member.name} died {member.young_deaths} times in a row within {YOUNG:.0f} s "
            f"of its start (the last after {lived:.1f} s, exit code {member.popen.returncode}); "
            f"the cluster stopped restarting it. Its last lines:\n{member.tail()}"
        )
        log.error("%s", error)
        self.failure = error
        if self._on_failure is not None:
            self._on_failure(error)
        member.given_up = True  # last: a waiter that sees it finds the failure told


__all__ = [
    "BACKOFF_FIRST",
    "BACKOFF_MAX",
    "GIVE_UP_AFTER",
    "YOUNG",
    "ClusterError",
    "LocalCluster",
    "Member",
    "free_port_pair",
]
