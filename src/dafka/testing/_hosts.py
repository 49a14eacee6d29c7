"""Hosts made of Linux network namespaces, for tests and benchmarks across machines.

Every test of a single machine runs on one loopback interface, where any bind/advertise
mistake still works. :class:`Hosts` builds real separate network stacks instead: one
namespace per host (its own interfaces, addresses and loopback), all joined to a router
namespace by one link each, host *i* at ``10.77.<i+1>.2`` (the router at ``.1``). A process
runs on a host with ``ip netns exec`` (:meth:`Host.command`). Faults act on a host's link:
:meth:`Hosts.cut` / :meth:`Hosts.heal` (the router's end goes down: nothing passes either
way, like an unplugged cable), :meth:`Hosts.impair` (latency, jitter and loss each way:
``tc netem`` on both ends of a veth pair, or, on a kernel without ``sch_netem``, the user
space link of :mod:`dafka.testing._link` between two TUN devices; :attr:`Hosts.impairment`
says which).

Names are unique per process and instance (``dk<pid>x<n>h<i>``), so runs in parallel never
clash; :meth:`Hosts.close` (also on ``with`` exit, whatever happened) stops the user space
links and deletes the namespaces, which takes every link with them (the processes a test
started on the hosts are its own to stop). A run killed before its teardown leaves its
namespaces: the next run deletes those whose process is gone (:func:`forget_dead_runs`).
Root and ``ip`` (iproute2) are needed: :func:`hosts_problem` says what is missing, after
trying to install iproute2 with apt-get where it is absent.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dafka.errors import DafkaError
from dafka.lifecycle import Closing

SUBNET = "10.77"
"""Host i is at ``10.77.<i+1>.2``; its link's router end at ``10.77.<i+1>.1``."""
_counter = itertools.count()
_LINK = [sys.executable, "-m", "dafka.testing._link"]


class HostsError(DafkaError):
    """A namespace, link or fault could not be set up (the command and its output say why)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise HostsError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done


def _tc(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["tc", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise HostsError(f"tc {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done


def hosts_problem(install: bool = True) -> str | None:
    """Why namespaces cannot be made here, or None. Without ``ip`` it first installs
    iproute2 with apt-get (``install``), saying so on stderr."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces are Linux only (this is {sys.platform})"
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add); this runs as uid " + str(os.geteuid())
    if shutil.which("ip") is None and install and shutil.which("apt-get") is not None:
        print("dafka.testing.Hosts: installing iproute2 (apt-get) for ip netns", file=sys.stderr)
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "iproute2"], capture_output=True, check=False
        )
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is missing and could not be installed"
    probe = f"dk{os.getpid()}probe{next(_counter)}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def netem_problem(namespace: str) -> str | None:
    """Why ``tc ... netem`` cannot be used (tried on ``namespace``'s loopback), or None."""
    if shutil.which("tc") is None:
        return "the tc command (iproute2) is missing"
    probe = ["qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]
    tried = _tc("-n", namespace, *probe, check=False)
    if tried.returncode != 0:
        return f"tc netem refused ({tried.stderr.strip()}): this kernel lacks sch_netem"
    _tc("-n", namespace, "qdisc", "del", "dev", "lo", "root", check=False)
    return None


_OURS = re.compile(r"dk(\d+)(x\d+[rh]\d*|probe\d+)")


def forget_dead_runs() -> list[str]:
    """Delete the namespaces of runs whose process is gone (a run killed before its
    teardown); returns their names. Namespaces of live processes are left alone."""
    listed = _ip("netns", "list", check=False).stdout.split("\n")
    gone = []
    for line in listed:
        name = line.split(" ", 1)[0]
        found = _OURS.fullmatch(name)
        if found is None or Path(f"/proc/{found.group(1)}").exists():
            continue
        _ip("netns", "del", name, check=False)
        gone.append(name)
    return gone


@dataclass(frozen=True, slots=True)
class Host:
    """One host: a network namespace with one address on its link to the router."""

    name: str
    namespace: str
    address: str

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run on this host (``ip netns exec``: the command itself is exec'd, so
        the process id and signals are the command's own)."""
        return ["ip", "netns", "exec", self.namespace, *argv]


@dataclass(frozen=True, slots=True)
class _Link:
    router_end: str
    host_end: str
    emulator: subprocess.Popen[str] | None
    """The user space link (TUN devices) when netem is not available; else a veth pair."""


class Hosts(Closing):
    """Hosts named ``names``, each on its own link to one router; ``impairable`` names the
    hosts whose link :meth:`impair` may slow down (they get a user space link where the
    kernel has no netem). Use as a context manager, or call :meth:`close`."""

    def __init__(self, names: Sequence[str], *, impairable: Sequence[str] = ()) -> None:
        if len(set(names)) != len(names) or not names:
            raise ValueError(f"host names must be distinct and at least one: {names!r}")
        unknown = set(impairable) - set(names)
        if unknown:
            raise ValueError(f"impairable hosts {sorted(unknown)} are not among {names!r}")
        problem = hosts_problem()
        if problem is not None:
            raise HostsError(f"cannot make hosts from network namespaces: {problem}")
        forget_dead_runs()
        tag = f"dk{os.getpid()}x{next(_counter)}"
        self.router = f"{tag}r"
        self.hosts: dict[str, Host] = {}
        self._links: dict[str, _Link] = {}
        self._namespaces: list[str] = []
        self._emulators: list[subprocess.Popen[str]] = []
        self.impairment = ""
        """How :meth:`impair` works here: ``tc netem`` or the user space link (and why)."""
        try:
            self._add_namespace(self.router)
            self._sh(self.router, "echo 1 > /proc/sys/net/ipv4/ip_forward")
            netem = netem_problem(self.router) if impairable else None
            if impairable:
                self.impairment = (
                    "tc netem on both ends of a veth pair"
                    if netem is None
                    else f"a user space TUN link (dafka.testing._link): {netem}"
                )
            for index, name in enumerate(names):
                namespace = f"{tag}h{index}"
                self._add_namespace(namespace)
                host = Host(name, namespace, f"{SUBNET}.{index + 1}.2")
                tun = name in impairable and netem is not None
                self._links[name] = self._link(index, namespace, tun)
                self.hosts[name] = host
        except BaseException:
            self.close()
            raise

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    # -- faults ------------------------------------------------------------------------------

    def cut(self, name: str) -> None:
        """Nothing passes between host ``name`` and the others until :meth:`heal`."""
        link = self._links[name]
        if link.emulator is not None:
            self._tell(link, "down")
        else:
            _ip("-n", self.router, "link", "set", link.router_end, "down")

    def heal(self, name: str) -> None:
        """Host ``name``'s link carries traffic again."""
        link = self._links[name]
        if link.emulator is not None:
            self._tell(link, "up")
        else:
            _ip("-n", self.router, "link", "set", link.router_end, "up")

    def impair(self, name: str, delay_ms: float, jitter_ms: float = 0.0, loss: float = 0.0) -> None:
        """Each packet on host ``name``'s link, each way, waits ``delay_ms`` +- ``jitter_ms``
        and is lost with ``loss`` percent probability; all zero: a clean link again."""
        link = self._links[name]
        if link.emulator is not None:
            self._tell(link, f"{delay_ms} {jitter_ms} {loss}")
            return
        if not self.impairment:
            raise HostsError(f"host {name!r} was not made impairable (Hosts(impairable=...))")
        ends = ((self.router, link.router_end), (self.hosts[name].namespace, link.host_end))
        for namespace, device in ends:
            if delay_ms == jitter_ms == loss == 0:
                _tc("-n", namespace, "qdisc", "del", "dev", device, "root", check=False)
                continue
            spec = ["delay", f"{delay_ms}ms", f"{jitter_ms}ms", "loss", f"{loss}%"]
            _tc("-n", namespace, "qdisc", "replace", "dev", device, "root", "netem", *spec)

    # -- life cycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the user space links and delete every namespace (idempotent)."""
        for emulator in self._emulators:
            if emulator.poll() is None:
                emulator.kill()
            emulator.wait()
            for pipe in (emulator.stdin, emulator.stdout):
                if pipe is not None:
                    pipe.close()
        self._emulators.clear()
        self._links.clear()
        for namespace in reversed(self._namespaces):
            _ip("netns", "del", namespace, check=False)
        self._namespaces.clear()

    # -- set-up ------------------------------------------------------------------------------

    def _add_namespace(self, namespace: str) -> None:
        _ip("netns", "add", namespace)
        self._namespaces.append(namespace)
        _ip("-n", namespace, "link", "set", "lo", "up")

    @staticmethod
    def _sh(namespace: str, script: str) -> None:
        done = subprocess.run(
            ["ip", "netns", "exec", namespace, "sh", "-c", script],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise HostsError(f"{namespace}: {script}: {done.stderr.strip()}")

    def _link(self, index: int, namespace: str, tun: bool) -> _Link:
        router_end, host_end = f"r{index}", "eth0"
        router_address = f"{SUBNET}.{index + 1}.1/24"
        host_address = f"{SUBNET}.{index + 1}.2/24"
        emulator = None
        if tun:
            emulator = subprocess.Popen(
                [*_LINK, str(index), self.router, router_end, namespace, host_end],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            self._emulators.append(emulator)
            assert emulator.stdout is not None
            if emulator.stdout.readline().strip() != "ready":
                raise HostsError(f"the user space link of host {index} did not start")
        else:
            peer = ["peer", "name", host_end, "netns", namespace]
            _ip("-n", self.router, "link", "add", router_end, "type", "veth", *peer)
        _ip("-n", self.router, "addr", "add", router_address, "dev", router_end)
        _ip("-n", self.router, "link", "set", router_end, "up")
        _ip("-n", namespace, "addr", "add", host_address, "dev", host_end)
        _ip("-n", namespace, "link", "set", host_end, "up")
        gateway = ["dev", host_end] if tun else ["via", router_address.partition("/")[0]]
        _ip("-n", namespace, "route", "add", "default", *gateway)
        return _Link(router_end, host_end, emulator)

    @staticmethod
    def _tell(link: _Link, line: str) -> None:
        assert link.emulator is not None
        assert link.emulator.stdin is not None
        link.emulator.stdin.write(line + "\n")
        link.emulator.stdin.flush()


__all__ = ["SUBNET", "Host", "Hosts", "HostsError", "hosts_problem", "netem_problem"]
