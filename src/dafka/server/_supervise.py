"""A daemon that restarts itself after a crash: ``dafka store --restart-on-crash N`` (and
``dafka tower``).

Why: libzmq 4.3.5 aborts the whole process on a stream a stranger can craft against a
plaintext node (docs/nodes.md, "Limits against strangers"), and nothing in Python can catch
an abort. A daemon whose operator runs no supervisor of their own would stay down.

The supervisor is the process the operator started: it runs the daemon's own command line
again as a child (with ``--restart-on-crash 0``), in the child's own session (a Ctrl-C in
the terminal reaches the supervisor only, which passes SIGINT / SIGTERM / SIGHUP on once, so
the daemon stops cleanly, a store after its flush) and with the kernel's promise to SIGTERM
the child if the supervisor dies (Linux). A child that exits by itself - 0 after a signal,
1 when one of its nodes died, 2 on a usage error - ends the supervisor with the same code:
only a death by a signal the supervisor did not pass on (an abort, a segfault, the OOM
killer) is a crash. Each crash is logged at ERROR with the signal, how long the child lived
and the count, and the child restarted after a back-off (0.5 s, doubling up to 10 s while it
keeps dying within 10 s of its start); one crash more than allowed within
:data:`CRASH_WINDOW` ends the supervisor with exit ``128 + signal`` and a line saying it
gave up: a crash loop stops, and says so. A store's data is safe across the restart: what
it ACKed is on disk, and its recovery checks the log's tail (docs/storage.md).

Signals sent to the supervisor's pid reach the daemon as said; SIGSTOP and SIGCONT do not
(they cannot be caught): pause the child's pid, which the supervisor logs at each start.
"""

from __future__ import annotations

import collections
import logging
import signal
import subprocess
import sys
import threading
import time
from types import FrameType

from dafka.server._processes import BACKOFF_FIRST, BACKOFF_MAX, YOUNG, _die_with_parent

log = logging.getLogger("dafka.supervisor")

CRASH_WINDOW = 600.0
"""Seconds over which crashes are counted against ``--restart-on-crash``."""
_PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Supervisor:
    """Runs ``argv`` (the daemon's command line, already saying ``--restart-on-crash 0``)
    until it exits by itself, restarting it after each crash, at most ``restarts`` times
    within :data:`CRASH_WINDOW`. :meth:`run` returns the exit code for this process."""

    def __init__(self, name: str, argv: list[str], restarts: int) -> None:
        if restarts < 1:
            raise ValueError(f"restarts {restarts}: at least 1 (0 is not supervised)")
        self.name = name
        self.argv = argv
        self.restarts = restarts
        self._stopping = threading.Event()
        self._child: subprocess.Popen[bytes] | None = None
        self.crashes = 0
        """Crashes so far (each one logged)."""

    def _pass_on(self, signum: int, _frame: FrameType | None) -> None:
        self._stopping.set()
        child = self._child
        if child is not None and child.poll() is None:
            log.info("%s: signal %s received, passed on to pid %s", self.name, signum, child.pid)
            child.send_signal(signum)

    def run(self) -> int:
        previous = {s: signal.signal(s, self._pass_on) for s in _PASSED_ON}
        try:
            return self._loop()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _loop(self) -> int:
        recent: collections.deque[float] = collections.deque()
        backoff = BACKOFF_FIRST
        while True:
            started = time.monotonic()
            child = subprocess.Popen(
                self.argv,
                start_new_session=True,
                # one thread here: the supervisor starts none
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
            )
            self._child = child
            log.info(
                "%s: running as pid %s (supervised: restarted after a crash, at most %d "
                "times in %.0f s)",
                self.name,
                child.pid,
                self.restarts,
                CRASH_WINDOW,
            )
            if self._stopping.is_set():  # a signal came while it was starting
                child.send_signal(signal.SIGTERM)
            code = child.wait()
            if code >= 0 or self._stopping.is_set():
                return code if code >= 0 else 128 - code
            now = time.monotonic()
            lived = now - started
            self.crashes += 1
            recent.append(now)
            while recent and recent[0] < now - CRASH_WINDOW:
                recent.popleft()
            signame = _signal_name(-code)
            if len(recent) > self.restarts:
                log.error(
                    "%s: pid %s died by %s after %.1f s: %d crashes in %.0f s, more than "
                    "--restart-on-crash %d allows; giving up",
                    self.name,
                    child.pid,
                    signame,
                    lived,
                    len(recent),
                    CRASH_WINDOW,
                    self.restarts,
                )
                return 128 - code
            if lived >= YOUNG:
                backoff = BACKOFF_FIRST
            elif self.crashes > 1:
                backoff = min(BACKOFF_MAX, backoff * 2)
            log.error(
                "%s: pid %s died by %s after %.1f s (crash %d, %d of %d allowed in %.0f s); "
                "restarting in %.1f s",
                self.name,
                child.pid,
                signame,
                lived,
                self.crashes,
                len(recent),
                self.restarts,
                CRASH_WINDOW,
                backoff,
            )
            if self._stopping.wait(backoff):
                return 128 - code


__all__ = ["CRASH_WINDOW", "Supervisor"]
